"""The one resource vocabulary users speak; each backend translates it.

``Resources(gpus="A100:1", cpus=8, mem_gb=32, timeout_min=120)`` means the same thing on Slurm
(``--gres=gpu:A100:1 --cpus-per-task=8 --mem=32G --time=120``) and on Kubernetes (a
``nvidia.com/gpu: 1`` limit, ``cpu: 8``, ``memory: 32Gi``, ``activeDeadlineSeconds``). Users
never write raw ``--gres``: a typo in a raw flag is found by the scheduler at 3 a.m., a typo in
a key here is found now, with the list of valid keys.

``partition``, ``account`` and ``qos`` are Slurm's native names, passed through unchanged;
Kubernetes has no equivalent and refuses them rather than silently dropping a request.
``gpus`` is per node and ``nodes`` the number of nodes (``rgt.backends._render.fit`` says
what each backend does with every key, and refuses what it cannot honour).

Where a run's resources come from, first found wins per key: ``rgt run``'s flags, then the
project's ``rgt.toml`` ``[resources]`` table (``from_settings``), then the machine's defaults
(``rgt up slurm|kubernetes --gpus … --partition …``, merged by the backend).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from rgt.errors import SpecError

# A GPU request: a count, optionally after a type ("A100:1"). The type is a site-defined,
# case-sensitive GRES name on Slurm, so it is kept exactly as written.
GPUS_RE = re.compile(r"^(?:(?P<type>[A-Za-z0-9][A-Za-z0-9_.-]{0,63}):)?(?P<count>\d{1,3})\Z")
# The command-line flag of each key whose name differs (`rgt run --mem 0`).
FLAGS = {"mem_gb": "mem", "timeout_min": "time"}
GPU_TYPE_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}\Z")
# "2xA100", "A100x2", "A100*2": a spelling from vendors' catalogues, not rgt's.
TIMES_RE = re.compile(
    r"^(?:(?P<count>\d{1,3})\s*[xX*]\s*(?P<type>[A-Za-z][\w.-]*)"
    r"|(?P<type2>[A-Za-z][\w.-]*?)\s*[xX*]\s*(?P<count2>\d{1,3}))\Z"
)
GPUS_FORM = "a count per node or TYPE:COUNT, e.g. 2, 0 (no GPU) or A100:1"
# Partition, account and qos end up in `#SBATCH` lines: one token, nothing a shell or a
# newline could turn into a second directive. Comma lists are Slurm syntax ("gpu,gpu-long").
NATIVE_RE = re.compile(r"^[A-Za-z0-9_.-]{1,64}(?:,[A-Za-z0-9_.-]{1,64}){0,15}\Z")


@dataclass(frozen=True)
class Resources:
    """What one job needs. Every field is optional: unset means the cluster's default."""

    gpus: str | None = None
    cpus: int | None = None
    mem_gb: float | None = None
    timeout_min: int | None = None
    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    nodes: int | None = None

    def __post_init__(self) -> None:
        if self.gpus is not None:
            _check_gpus(str(self.gpus))
        for name in ("cpus", "timeout_min", "nodes"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
                raise _bad(name, value, "a whole number")
            if value is not None and value < 1:
                raise _bad(name, value, "a whole number >= 1")
        if self.mem_gb is not None and (
            isinstance(self.mem_gb, bool)
            or not isinstance(self.mem_gb, (int, float))
            or not self.mem_gb > 0
        ):
            raise _bad("mem_gb", self.mem_gb, "a number of GiB > 0")
        for name in ("partition", "account", "qos"):
            value = getattr(self, name)
            if value is not None and not NATIVE_RE.match(str(value)):
                raise _bad(name, value, "letters, digits, '_', '.', '-' (comma lists allowed)")

    @classmethod
    def keys(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls))

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], *, path: str | None = None) -> Resources:
        """From a TOML/JSON table. Unknown keys fail and list the valid ones."""
        unknown = sorted(set(data) - set(cls.keys()))
        if unknown:
            raise SpecError(
                f"unknown resource key {unknown[0]!r}",
                path=path,
                field=unknown[0],
                fix=f"valid resource keys: {', '.join(cls.keys())}",
            )
        return cls(**{key: _coerce(key, value) for key, value in data.items()})

    @classmethod
    def parse(cls, text: str) -> Resources:
        """From the command line: ``gpus=A100:1,cpus=8,mem_gb=32``."""
        pairs: dict[str, str] = {}
        for item in filter(None, (part.strip() for part in text.split(","))):
            key, sep, value = item.partition("=")
            if not sep:
                raise SpecError(
                    f"resource {item!r} has no value",
                    field=key,
                    fix="write KEY=VALUE pairs separated by commas, e.g. gpus=A100:1,cpus=8",
                )
            pairs[key.strip()] = value.strip()
        return cls.from_mapping(pairs)

    def merged(self, override: Resources) -> Resources:
        """These defaults with every field ``override`` sets replacing them."""
        values = {k: getattr(self, k) for k in self.keys()}
        values.update({k: getattr(override, k) for k in self.keys() if _set(getattr(override, k))})
        return Resources(**values)

    @classmethod
    def from_settings(cls, start: Path | None = None) -> Resources:
        """``$RGT_RESOURCES`` (``gpus=1,cpus=8``), else the project's ``rgt.toml``
        ``[resources]``, else the user config's (``rgt.config``'s precedence); empty if none."""
        from rgt.config import Settings, project_config_path

        table = Settings.load(start).get("resources") or {}
        if isinstance(table, str):  # $RGT_RESOURCES="gpus=1,cpus=8"
            return cls.parse(table)
        if not isinstance(table, Mapping):
            raise SpecError(
                "'resources' in rgt.toml must be a table",
                field="resources",
                fix=f"write [resources] with keys {', '.join(cls.keys())}",
            )
        where = project_config_path(start)
        return cls.from_mapping(table, path=str(where) if where else None)

    def gpu_request(self) -> tuple[str | None, int]:
        """(type or None, count); (None, 0) when no GPU is asked for."""
        match = GPUS_RE.match(self.gpus or "0")
        assert match is not None  # validated in __post_init__
        return match.group("type"), int(match.group("count"))

    def to_json(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.keys() if getattr(self, k) is not None}


def _coerce(key: str, value: Any) -> Any:
    """Command-line and TOML values arrive as text or numbers; each key has one type."""
    if key == "gpus" and isinstance(value, int) and not isinstance(value, bool):
        return str(value)  # TOML's `gpus = 2`
    if value is None or not isinstance(value, str):
        return value
    try:
        if key in ("cpus", "timeout_min", "nodes"):
            return int(value)
        if key == "mem_gb":
            return float(value)
    except ValueError:
        raise _bad(key, value, "a number") from None
    return value


def _set(value: Any) -> bool:
    """An override sets a key when it gives it, ``gpus="0"`` (no GPU) included."""
    return value is not None and value != ""


def _check_gpus(text: str) -> None:
    """``[TYPE:]COUNT``, each part checked alone so the error says which part is wrong."""
    if GPUS_RE.match(text):
        return
    swapped = TIMES_RE.match(text)
    if swapped:
        gpu_type = swapped.group("type") or swapped.group("type2")
        count = swapped.group("count") or swapped.group("count2")
        raise _bad("gpus", text, f"TYPE:COUNT, here {gpu_type}:{count}")
    gpu_type, sep, count = text.rpartition(":")
    if count.lstrip("-").isdigit() and count.startswith("-"):
        raise _bad("gpus", text, "a count >= 0 (0: no GPU, the job sees none)")
    if sep and not count.isdigit():
        raise _bad("gpus", text, f"TYPE:COUNT with a whole-number COUNT, not {count!r}")
    if sep and not GPU_TYPE_RE.match(gpu_type):
        raise _bad(
            "gpus",
            text,
            f"TYPE:COUNT with TYPE one word (letters, digits, '_.-'), not {gpu_type!r}",
        )
    if not sep and GPU_TYPE_RE.match(text) and not text.isdigit():
        raise _bad("gpus", text, f"TYPE:COUNT: the count is missing, e.g. {text}:1")
    raise _bad("gpus", text, GPUS_FORM)


def _bad(key: str, value: Any, expected: str) -> SpecError:
    flag = f" (--{FLAGS.get(key, key)})"
    return SpecError(
        f"resource {key}={value!r}{flag} is not valid",
        field=key,
        fix=f"{key} must be {expected}",
    )
