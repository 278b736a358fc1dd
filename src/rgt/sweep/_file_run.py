"""How each cell of a sweep file is run: its seeds, the machines, the per-machine limit,
resources, artifacts, environment and code directory (``rgt.sweep._file`` reads the cells).
Each check raises a ``SpecError`` that names the key and the fix.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rgt.errors import SpecError
from rgt.resources import Resources


def err(where: str, key: str, message: str, fix: str) -> SpecError:
    return SpecError(f"{where}: {message}", path=where, field=key, fix=fix)


def machines(where: str, data: dict[str, Any]) -> tuple[str, ...]:
    machines = data.get("machines")
    if not (isinstance(machines, list) and machines and all(isinstance(m, str) for m in machines)):
        machines = None
    if machines is None or len(set(machines)) != len(machines):
        raise err(
            where,
            "machines",
            f"'machines' is {data.get('machines')!r}",
            "a list of distinct registered machine names (`rgt status` lists them)",
        )
    return tuple(machines)


def positive_int(where: str, data: dict[str, Any], key: str, default: int, minimum: int = 1) -> int:
    value = data.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise err(where, key, f"'{key}' is {value!r}", f"a whole number >= {minimum}")
    return value


def resources(where: str, data: dict[str, Any]) -> Resources:
    table = data.get("resources", {})
    if not isinstance(table, dict):
        raise err(
            where,
            "resources",
            "'resources' must be a table",
            f"keys: {', '.join(Resources.keys())}",
        )
    try:
        return Resources.from_mapping(table, path=where)
    except SpecError as exc:
        key = f"resources.{exc.field}"
        raise err(where, key, f"'{key}': {exc.message}", exc.fix or "") from exc


def strings(where: str, data: dict[str, Any], key: str) -> tuple[str, ...]:
    value = data.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise err(
            where, key, f"'{key}' must be a list of strings", f'e.g. {key} = ["outputs/*.pt"]'
        )
    return tuple(value)


def env(where: str, data: dict[str, Any]) -> dict[str, str]:
    env = data.get("env", {})
    if not isinstance(env, dict) or not all(isinstance(v, str | int | float) for v in env.values()):
        raise err(
            where,
            "env",
            "'env' must be a table of strings",
            'e.g. env = { WANDB_MODE = "offline" }; secrets go through `rgt run --secret`',
        )
    reserved = [k for k in env if str(k).startswith("RGT_")]
    if reserved:
        raise err(
            where,
            f"env.{reserved[0]}",
            f"'env.{reserved[0]}' is set by rgt",
            "RGT_* variables belong to rgt; pick another name",
        )
    return {str(k): str(v) for k, v in env.items()}


def code(path: Path, data: dict[str, Any]) -> Path:
    code = data.get("code", ".")
    base = path.resolve().parent
    target = (base / code).resolve() if isinstance(code, str) else None
    if target is None or not target.is_dir():
        raise err(
            str(path),
            "code",
            f"'code' is {code!r}, not a directory",
            "a directory relative to the sweep file (default: the file's own directory)",
        )
    return target


def seeds(where: str, data: dict[str, Any]) -> list[int]:
    seeds = data.get("seeds", [0])
    ok = (
        isinstance(seeds, list)
        and seeds
        and all(isinstance(s, int) and not isinstance(s, bool) for s in seeds)
    )
    if not ok or len(set(seeds)) != len(seeds):
        raise err(
            where, "seeds", f"'seeds' is {seeds!r}", "a list of distinct integers, e.g. [0, 1, 2]"
        )
    return list(seeds)


def aggregate(where: str, data: dict[str, Any]) -> str | None:
    """An absolute path on the machines (one line, no NUL): where results are collected."""
    value = data.get("aggregate")
    if value is None:
        return None
    if (
        not isinstance(value, str)
        or not value.startswith("/")
        or any(c in value for c in "\0\n\r")
        or "/../" in value + "/"
    ):
        fix = "an absolute path on the machines' shared filesystem, e.g. /shared/sweeps"
        raise err(where, "aggregate", f"'aggregate' is {value!r}", fix)
    return value
