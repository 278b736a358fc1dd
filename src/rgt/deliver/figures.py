"""The figure chain: recorded results → ``source_data.csv`` → script → image + provenance.

A figure lives in ``figures/NAME/`` with a ``figure.toml`` and its script::

    script = "plot.py"              # run as: python plot.py source_data.csv IMAGE (cwd: the folder)
    runs = "train_demo-*"           # a glob over recorded run ids, or a list of ids
    log = "metrics.jsonl"           # optional: one row per line of this file in each run;
                                    # without it, one row per run with every metric
    image = "NAME.png"              # optional (default NAME.png)
    size = [640, 480]               # optional: expected pixels
    series = "run_id"               # optional: column whose distinct values are the plotted series

The build writes ``source_data.csv``, runs the script with matplotlib's Agg backend and
``SOURCE_DATE_EPOCH=0``, reopens the image and checks its pixels (``rgt.deliver.pixels``), and
writes ``NAME.provenance.json``. Its ``digest`` covers inputs, source data and script only, so
an unchanged rebuild keeps the same digest (the build time is recorded next to it).
"""

from __future__ import annotations

import csv
import fnmatch
import hashlib
import io
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any

from rgt import __version__
from rgt._fs import atomic_write_bytes, atomic_write_json, sha256_file
from rgt.config import TOMLDecodeError, loads_toml
from rgt.deliver.pixels import PixelReport, check_image
from rgt.deliver.runs import load_stored, stored_run_ids
from rgt.deliver.workspace import Workspace
from rgt.errors import SpecError, UsageError, VerifyError

SCRIPT_TIMEOUT_S = 300
_LIBRARIES = ("matplotlib", "numpy", "pillow", "jinja2")


@dataclass(frozen=True)
class FigureSpec:
    name: str
    folder: Path
    script: str
    runs: str | tuple[str, ...]
    log: str | None = None
    image: str = ""
    size: tuple[int, int] | None = None
    series: str | None = None


@dataclass(frozen=True)
class FigureResult:
    name: str
    image: Path
    provenance: Path
    digest: str
    pixels: PixelReport


def load_figure(ws: Workspace, name: str) -> FigureSpec:
    folder = ws.figure_dir(name)
    spec_path = folder / "figure.toml"
    if not spec_path.is_file():
        known = ", ".join(list_figures(ws)) or "none"
        raise UsageError(
            f"no figure {name!r} (no {spec_path}; figures: {known})",
            fix=f"create figures/{name}/figure.toml with script= and runs=",
        )
    try:
        data = loads_toml(spec_path.read_text(encoding="utf-8"))
    except TOMLDecodeError as exc:
        raise SpecError(f"{spec_path}: {exc}", path=str(spec_path), fix="fix the TOML") from exc
    return _spec(name, folder, data, str(spec_path))


def _spec(name: str, folder: Path, data: dict[str, Any], where: str) -> FigureSpec:
    for key in ("script", "runs"):
        if key not in data:
            raise SpecError(f"{where}: missing {key!r}", path=where, field=key, fix=_SPEC_FIX)
    runs = data["runs"]
    if not isinstance(runs, str | list):
        raise SpecError(f"{where}: runs must be a glob or a list", path=where, field="runs")
    size = data.get("size")
    return FigureSpec(
        name=name,
        folder=folder,
        script=str(data["script"]),
        runs=runs if isinstance(runs, str) else tuple(runs),
        log=data.get("log"),
        image=str(data.get("image") or f"{name}.png"),
        size=(int(size[0]), int(size[1])) if size else None,
        series=data.get("series"),
    )


_SPEC_FIX = 'figure.toml needs script = "plot.py" and runs = "GLOB" (or a list of run ids)'


def list_figures(ws: Workspace) -> list[str]:
    if not ws.figures.is_dir():
        return []
    return sorted(p.name for p in ws.figures.iterdir() if (p / "figure.toml").is_file())


def _run_ids(ws: Workspace, spec: FigureSpec) -> tuple[str, ...]:
    if isinstance(spec.runs, tuple):
        return spec.runs
    matched = tuple(r for r in stored_run_ids(ws) if fnmatch.fnmatchcase(r, spec.runs))
    if not matched:
        raise UsageError(
            f"figure {spec.name!r}: runs {spec.runs!r} match no recorded run",
            fix="record the runs first, or fix runs= in figure.toml",
        )
    return matched


Rows = list[dict[str, Any]]


def source_rows(ws: Workspace, spec: FigureSpec) -> tuple[Rows, list[dict[str, str]]]:
    """The rows of source_data.csv, and the input files (run id, path, sha256) they came from."""
    rows: list[dict[str, Any]] = []
    inputs: list[dict[str, str]] = []
    for run_id in _run_ids(ws, spec):
        run = load_stored(ws, run_id)
        base = {"run_id": run_id, "seed": run.seed}
        source = Path(run.path or "")
        if spec.log:
            source = ws.run_dir(run_id) / spec.log
            rows.extend({**base, **entry} for entry in _read_log(source, run_id))
        else:
            rows.append({**base, **{m.name: m.value for m in run.metrics.values()}})
        digest = sha256_file(str(source))
        inputs.append({"run_id": run_id, "file": ws.rel(source), "sha256": digest})
    return rows, inputs


def _read_log(path: Path, run_id: str) -> list[dict[str, Any]]:
    if not path.is_file():
        raise UsageError(
            f"run {run_id} has no {path.name}", fix="fix log= in figure.toml, or cite other runs"
        )
    lines = path.read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def to_csv(rows: list[dict[str, Any]]) -> bytes:
    columns: list[str] = []
    for row in rows:
        columns.extend(k for k in row if k not in columns)
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue().encode("utf-8")


def build_figure(ws: Workspace, name: str) -> FigureResult:
    spec = load_figure(ws, name)
    rows, inputs = source_rows(ws, spec)
    data_path = spec.folder / "source_data.csv"
    atomic_write_bytes(str(data_path), to_csv(rows))
    command = [spec.script, data_path.name, spec.image]
    _run_script(spec, command)
    image = spec.folder / spec.image
    series = len({str(r.get(spec.series)) for r in rows}) if spec.series else None
    pixels = check_image(image, size=spec.size, series=series)
    if not pixels.ok:
        raise VerifyError(
            f"figure {name!r}: {'; '.join(pixels.problems)}",
            path=str(image),
            fix="fix the plotting script (it must draw every series of source_data.csv)",
        )
    return _write_provenance(ws, spec, inputs, command, pixels)


def _run_script(spec: FigureSpec, command: list[str]) -> None:
    if not (spec.folder / spec.script).is_file():
        missing = spec.folder / spec.script
        raise UsageError(f"figure {spec.name!r}: no script {missing}", fix=_SPEC_FIX)
    env = {**os.environ, "MPLBACKEND": "Agg", "SOURCE_DATE_EPOCH": "0", "PYTHONHASHSEED": "0"}
    (spec.folder / spec.image).unlink(missing_ok=True)  # a stale image must not pass the checks
    proc = subprocess.run(
        [sys.executable, *command],
        cwd=spec.folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=SCRIPT_TIMEOUT_S,
        check=False,
    )
    if proc.returncode != 0 or not (spec.folder / spec.image).is_file():
        tail = (proc.stderr or proc.stdout)[-2000:]
        raise VerifyError(
            f"figure {spec.name!r}: script exited {proc.returncode} without a valid "
            f"{spec.image}\n{tail}",
            path=str(spec.folder / spec.script),
            fix="run the script by hand in its folder with source_data.csv and fix the error",
        )


def _write_provenance(
    ws: Workspace,
    spec: FigureSpec,
    inputs: list[dict[str, str]],
    command: list[str],
    pixels: PixelReport,
) -> FigureResult:
    hashes = {
        "inputs": inputs,
        "source_data": sha256_file(str(spec.folder / "source_data.csv")),
        "script": sha256_file(str(spec.folder / spec.script)),
    }
    digest = hashlib.sha256(json.dumps(hashes, sort_keys=True).encode("utf-8")).hexdigest()
    image = spec.folder / spec.image
    document: dict[str, Any] = {
        "schema": "rgt.provenance/1",
        "figure": spec.name,
        "digest": digest,
        **hashes,
        "image": {"file": spec.image, "sha256": sha256_file(str(image)), **pixels.to_json()},
        "command": ["python", *command],
        "versions": _versions(),
        "built": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
    path = spec.folder / f"{spec.name}.provenance.json"
    atomic_write_json(str(path), document)
    return FigureResult(spec.name, image, path, digest, pixels)


def _versions() -> dict[str, str]:
    found = {"python": sys.version.split()[0], "rgt": __version__}
    for name in _LIBRARIES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = "absent"
    return found
