"""``results.json`` (schema ``rgt.results/1``): the record of one run, and how to find many.

One file per run; seeds are the unit of replication, so three seeds of a variant are three run
directories. The record is validated against ``schemas/results.schema.json`` (shipped in the
package); a malformed file raises ``SpecError`` naming the field, e.g. ``metrics.psnr.direction``.
A metric is a bare number or ``{value, direction, split, step}``; ``Metric`` is the normalised
form. Stdlib only at import: ``jsonschema`` is imported when a file is validated.
"""

from __future__ import annotations

import glob
import json
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from rgt._fs import atomic_write_json
from rgt.errors import SpecError, UsageError

SCHEMA_ID = "rgt.results/1"
RESULTS_NAME = "results.json"


@dataclass(frozen=True)
class Metric:
    name: str
    value: float
    direction: str | None = None  # "max" (higher is better) | "min" | None (not declared)
    split: str | None = None
    step: int | None = None


@dataclass(frozen=True)
class RunResults:
    """One validated ``results.json``. ``raw`` is the document as read."""

    name: str
    metrics: dict[str, Metric]
    raw: dict[str, Any]
    path: str | None = None
    seed: int | None = None
    config: dict[str, Any] = field(default_factory=dict)
    steps: int | None = None
    smoke: bool = False
    run_id: str | None = None

    @property
    def label(self) -> str:
        """How a finding names this run: its directory when it has one, else its name."""
        return str(Path(self.path).parent) if self.path else self.name

    def metric(self, name: str) -> Metric:
        if name not in self.metrics:
            known = ", ".join(sorted(self.metrics)) or "none"
            raise UsageError(
                f"run {self.label} has no metric {name!r} (it has: {known})",
                fix="pick a metric every run records, or re-run the ones that lack it",
            )
        return self.metrics[name]


@cache
def results_schema() -> dict[str, Any]:
    text = resources.files("rgt").joinpath("schemas/results.schema.json").read_text("utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema


def validate_results(data: Any, *, path: str | None = None) -> None:
    """Raise ``SpecError`` naming the first bad field (the most specific one jsonschema finds)."""
    import jsonschema

    validator = jsonschema.Draft202012Validator(results_schema())
    error = jsonschema.exceptions.best_match(validator.iter_errors(data))
    if error is None:
        return
    where = ".".join(str(part) for part in error.absolute_path) or "<document>"
    raise SpecError(
        f"{path or 'results'}: field {where!r}: {error.message}",
        path=path,
        field=where,
        fix="fix that field; the format is src/rgt/schemas/results.schema.json (rgt.results/1)",
    )


def parse_results(data: Any, *, path: str | None = None) -> RunResults:
    validate_results(data, path=path)
    metrics = {name: _metric(name, value) for name, value in data["metrics"].items()}
    return RunResults(
        name=data["name"],
        metrics=metrics,
        raw=data,
        path=path,
        seed=data.get("seed"),
        config=data.get("config", {}),
        steps=data.get("steps"),
        smoke=data.get("smoke", False),
        run_id=data.get("run_id"),
    )


def _metric(name: str, value: Any) -> Metric:
    if isinstance(value, dict):
        return Metric(
            name,
            float(value["value"]),
            value.get("direction"),
            value.get("split"),
            value.get("step"),
        )
    return Metric(name, float(value))


def load_results(path: str | Path) -> RunResults:
    """Read one run: a ``results.json`` file or a run directory that holds one."""
    path = Path(path)
    file = path / RESULTS_NAME if path.is_dir() else path
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise SpecError(
            f"no {RESULTS_NAME} at {file}",
            path=str(file),
            fix="point at a run directory that holds results.json",
        ) from exc
    except (ValueError, UnicodeDecodeError) as exc:
        raise SpecError(
            f"{file} is not valid JSON: {exc}",
            path=str(file),
            fix="rewrite it as JSON (rgt.results/1); a truncated file means the job was cut off",
        ) from exc
    return parse_results(data, path=str(file))


def write_results(path: str | Path, data: dict[str, Any]) -> Path:
    """Validate, then write atomically. ``path`` is the run directory or the file itself."""
    path = Path(path)
    file = path / RESULTS_NAME if path.is_dir() else path
    document = {"schema": SCHEMA_ID, **data}
    validate_results(document, path=str(file))
    atomic_write_json(str(file), document)
    return file


def find_runs(spec: str | Path) -> list[RunResults]:
    """Every run ``spec`` names: a run directory, a directory of runs (searched recursively), a
    ``results.json``, or a glob of any of these. Sorted by path, so output is stable."""
    files = sorted({f for match in _expand(str(spec)) for f in _results_files(Path(match))})
    if not files:
        raise UsageError(
            f"no {RESULTS_NAME} found in {spec!s}",
            fix="pass a run directory, a directory of runs, or a quoted glob like 'runs/base-*'",
        )
    return [load_results(file) for file in files]


def _expand(spec: str) -> list[str]:
    if Path(spec).exists():  # a literal path wins: names with [brackets] are not globs here
        return [spec]
    return glob.glob(spec, recursive=True)


def _results_files(path: Path) -> list[Path]:
    if path.is_file():
        return [path] if path.name == RESULTS_NAME else []
    if (path / RESULTS_NAME).is_file():
        return [path / RESULTS_NAME]
    return sorted(path.rglob(RESULTS_NAME)) if path.is_dir() else []
