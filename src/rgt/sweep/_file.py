"""The sweep file (TOML): what cells a sweep has, and how each one is run.

    name = "lr-demo"                      # letters, digits, '.', '_', '-'
    command = ["python3", "train.py", "--lr", "{lr}", "--seed", "{seed}"]
    seeds = [0, 1, 2]                     # seeds are the unit of replication (default [0])
    machines = ["box-a", "box-b"]         # registered machines, or ONE slurm machine
    per_machine = 2                       # most jobs of this sweep in flight on one machine
    artifacts = ["outputs/*.pt"]          # optional extra artifact globs (ckpt/ and outputs/
                                          # are always artifacts; others: relative to work/)
    exclude = ["data/**"]                 # optional globs left out of the default artifacts
    env = { WANDB_MODE = "offline" }      # optional plain environment (never secrets)
    code = "."                            # optional: the directory snapshotted (default: the
                                          # sweep file's own directory)
    retries = 3                           # optional: the agent's retry budget per job
    resume_with = "--init_from=resume"    # optional: `rgt run --resume-with` (cell placeholders
    ckpt = "out/ckpt.pt"                  # and {ckpt} allowed) and `--ckpt` (resume_form)
    aggregate = "/shared/sweeps"          # optional: `sweep pull` collects and reconciles on
                                          # this path of the machines' shared filesystem
    [grid]                                # a cartesian product ...
    lr = [0.01, 0.1]
    # [[cells]]                           # ... or an explicit list of override tables
    [resources]                           # optional, rgt's one resource vocabulary
    timeout_min = 30

A cell is one override table plus one seed. Its id is stable: the sweep name and a hash of
the sweep name, the sorted overrides and the seed, so re-reading the file (in any key order)
names the same cells, and editing one value makes a new cell rather than re-using an old one.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
import string
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rgt.config import _load_toml
from rgt.errors import SpecError
from rgt.jobs.resume_form import from_sweep_table
from rgt.resources import Resources
from rgt.sweep import _file_run as run_keys
from rgt.sweep._file_run import err as _err

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}\Z")
KEY_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}\Z")
ALLOWED = (
    "name",
    "command",
    "grid",
    "cells",
    "seeds",
    "machines",
    "per_machine",
    "resources",
    "artifacts",
    "exclude",
    "env",
    "code",
    "retries",
    "resume_with",
    "ckpt",
    "aggregate",
)
BUILTIN_FIELDS = ("seed", "cell_id")
Scalar = str | int | float | bool


@dataclass(frozen=True)
class Cell:
    """One job of the sweep: overrides (without the seed) and the seed."""

    cell_id: str
    overrides: dict[str, Scalar]
    seed: int
    argv: tuple[str, ...]

    @property
    def group(self) -> str:
        """The overrides as ``k=v,k=v`` (sorted): every seed of one setting shares it."""
        return ",".join(f"{k}={_text(v)}" for k, v in sorted(self.overrides.items())) or "all"


@dataclass(frozen=True)
class Sweep:
    name: str
    path: Path
    command: tuple[str, ...]
    cells: tuple[Cell, ...]
    machines: tuple[str, ...]
    per_machine: int = 1
    resources: Resources = field(default_factory=Resources)
    artifacts: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    code: Path = field(default_factory=Path.cwd)
    retries: int = 3
    resume: dict[str, str] | None = None  # spec.json "resume" (rgt.jobs.resume_form)
    aggregate: str | None = None  # results collected on the machines' shared filesystem


def load_sweep(path: Path) -> Sweep:
    """Read and check a sweep file; a bad one raises ``SpecError`` naming the key."""
    if not path.is_file():
        raise SpecError(f"no sweep file at {path}", path=str(path), fix="give a SWEEP.toml path")
    data = _load_toml(path)
    where = str(path)
    unknown = sorted(set(data) - set(ALLOWED))
    if unknown:
        raise _err(
            where, unknown[0], f"unknown key {unknown[0]!r}", f"allowed: {', '.join(ALLOWED)}"
        )
    name = _name(where, data)
    command = _command(where, data)
    tables = _override_tables(where, data)
    seeds = run_keys.seeds(where, data)
    cells = tuple(_cell(name, command, t, s, where) for t in tables for s in seeds)
    return Sweep(
        name=name,
        path=path.resolve(),
        command=command,
        cells=cells,
        machines=run_keys.machines(where, data),
        per_machine=run_keys.positive_int(where, data, "per_machine", 1),
        resources=run_keys.resources(where, data),
        artifacts=run_keys.strings(where, data, "artifacts"),
        exclude=run_keys.strings(where, data, "exclude"),
        env=run_keys.env(where, data),
        code=run_keys.code(path, data),
        retries=run_keys.positive_int(where, data, "retries", 3, minimum=0),
        resume=from_sweep_table(where, data),
        aggregate=run_keys.aggregate(where, data),
    )


def cell_id(name: str, overrides: Mapping[str, Scalar], seed: int) -> str:
    canonical = json.dumps(
        {"sweep": name, "overrides": dict(sorted(overrides.items())), "seed": seed},
        sort_keys=True,
        separators=(",", ":"),
    )
    return f"{name}-{hashlib.sha256(canonical.encode()).hexdigest()[:10]}"


def _name(where: str, data: dict[str, Any]) -> str:
    name = data.get("name")
    if not isinstance(name, str) or not NAME_RE.match(name):
        raise _err(
            where,
            "name",
            f"'name' is {name!r}",
            "give name = \"…\": letters, digits, '.', '_' or '-' (max 64)",
        )
    return name


def _command(where: str, data: dict[str, Any]) -> tuple[str, ...]:
    command = data.get("command")
    if not isinstance(command, list) or not command or not all(isinstance(a, str) for a in command):
        raise _err(
            where,
            "command",
            "'command' must be a non-empty list of strings",
            'e.g. command = ["python3", "train.py", "--lr", "{lr}"]',
        )
    for word in command:
        _placeholders(where, word)
    return tuple(command)


def _placeholders(where: str, word: str) -> list[str]:
    try:
        names = [f for _, f, _, _ in string.Formatter().parse(word) if f is not None]
    except ValueError as exc:
        raise _err(
            where,
            "command",
            f"'command' word {word!r}: {exc}",
            "write placeholders as {name}; a literal brace is {{ or }}",
        ) from exc
    bad = [n for n in names if not KEY_RE.match(n)]
    if bad:
        raise _err(
            where,
            "command",
            f"'command' placeholder {{{bad[0]}}} is not a plain name",
            "use {key} with a key of grid/cells, {seed} or {cell_id}",
        )
    return names


def _override_tables(where: str, data: dict[str, Any]) -> list[dict[str, Scalar]]:
    if "grid" in data and "cells" in data:
        raise _err(
            where,
            "cells",
            "give either 'grid' or 'cells', not both",
            "a grid is a cartesian product; cells is an explicit list",
        )
    if "cells" in data:
        return _cells_list(where, data["cells"])
    grid = data.get("grid", {})
    if not isinstance(grid, dict):
        raise _err(where, "grid", "'grid' must be a table of lists", "[grid]\nlr = [0.01, 0.1]")
    for key, values in grid.items():
        _key(where, f"grid.{key}", key)
        if not isinstance(values, list) or not values or not all(_scalar(v) for v in values):
            raise _err(
                where,
                f"grid.{key}",
                f"'grid.{key}' must be a non-empty list of strings, numbers or booleans",
                f"e.g. {key} = [1, 2]",
            )
        if len({_text(v) for v in values}) != len(values):
            raise _err(where, f"grid.{key}", f"'grid.{key}' repeats a value", "list each once")
    keys = sorted(grid)
    return [
        dict(zip(keys, combo, strict=True)) for combo in itertools.product(*(grid[k] for k in keys))
    ]


def _cells_list(where: str, cells: Any) -> list[dict[str, Scalar]]:
    if not isinstance(cells, list) or not cells or not all(isinstance(c, dict) for c in cells):
        raise _err(
            where, "cells", "'cells' must be a non-empty list of tables", "[[cells]]\nlr = 0.01"
        )
    seen: dict[str, int] = {}
    for index, cell in enumerate(cells):
        for key, value in cell.items():
            _key(where, f"cells[{index}].{key}", key)
            if not _scalar(value):
                raise _err(
                    where,
                    f"cells[{index}].{key}",
                    f"'cells[{index}].{key}' is {value!r}",
                    "a string, number or boolean",
                )
        canon = json.dumps(cell, sort_keys=True)
        if canon in seen:
            raise _err(
                where,
                f"cells[{index}]",
                f"'cells[{index}]' repeats cells[{seen[canon]}]",
                "list each setting once; seeds come from 'seeds'",
            )
        seen[canon] = index
    return [dict(c) for c in cells]


def _key(where: str, field_name: str, key: str) -> None:
    if key in BUILTIN_FIELDS:
        raise _err(
            where,
            field_name,
            f"'{field_name}' is a reserved name",
            "list seeds in 'seeds'; cell_id is computed",
        )
    if not KEY_RE.match(key):
        raise _err(
            where,
            field_name,
            f"override name {key!r} is not a plain name",
            "use letters, digits and '_' (it becomes a {placeholder})",
        )


def _scalar(value: Any) -> bool:
    return isinstance(value, str | int | float | bool)


def _text(value: Scalar) -> str:
    return json.dumps(value) if isinstance(value, bool) else str(value)


def _cell(
    name: str, command: tuple[str, ...], table: dict[str, Scalar], seed: int, where: str
) -> Cell:
    ident = cell_id(name, table, seed)
    values: dict[str, Any] = {**table, "seed": seed, "cell_id": ident}
    argv = []
    for word in command:
        missing = [n for n in _placeholders(where, word) if n not in values]
        if missing:
            raise _err(
                where,
                "command",
                f"'command' uses {{{missing[0]}}} but cell "
                f"{_describe(table)} has no {missing[0]!r}",
                f"add {missing[0]!r} to grid/cells, or drop the placeholder",
            )
        argv.append(
            word.format_map({k: _text(v) if isinstance(v, bool) else v for k, v in values.items()})
        )
    return Cell(cell_id=ident, overrides=dict(table), seed=seed, argv=tuple(argv))


def _describe(table: dict[str, Scalar]) -> str:
    return "{" + ", ".join(f"{k}={_text(v)}" for k, v in sorted(table.items())) + "}"
