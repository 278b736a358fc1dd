"""The evidence store: recorded runs are content-addressed, read-only and never overwritten.

A run's id is derived from what it is: its ``results.json`` (config, code version, seed, data
hashes, metrics, artifacts, creation time) minus any ``run_id``, plus the sha256 of every file
in the run directory. Re-recording identical content is a no-op; a re-run (new ``created``, new
numbers) is a new id. ``RECORD.json`` in each stored run lists every file's sha256, so
``check_store`` can name a file edited in place after recording (read-only bits do not stop
root or a ``chmod``; the hashes do).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import stat
import tempfile
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from rgt._fs import atomic_write_json, sha256_file
from rgt.deliver.workspace import Workspace
from rgt.errors import SpecError, UsageError
from rgt.results import RESULTS_NAME, load_results, parse_results

RECORD_NAME = "RECORD.json"
_SKIP = {RECORD_NAME}
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


@dataclass(frozen=True)
class RecordResult:
    run_id: str
    path: Path
    created: bool  # False: the same content was already recorded (a no-op)
    verified: bool | None  # artifact hashes at record time; None when nothing declared any


@dataclass(frozen=True)
class Tamper:
    run_id: str
    file: str
    problem: str  # "modified" | "missing" | "added"


@dataclass
class CheckReport:
    runs: int = 0
    files: int = 0
    tampered: list[Tamper] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.tampered


def _file_hashes(directory: Path) -> dict[str, str]:
    hashes = {}
    for path in sorted(directory.rglob("*")):
        rel = path.relative_to(directory).as_posix()
        if path.is_symlink():
            raise UsageError(
                f"{path} is a symlink; the evidence store keeps only regular files",
                fix="replace the link with the file it points to, then record again",
            )
        if path.is_file() and rel not in _SKIP:
            hashes[rel] = sha256_file(str(path))
    return hashes


def compute_run_id(results: dict[str, Any], hashes: dict[str, str]) -> str:
    """``<name>-s<seed>-<12 hex>``: readable, and the hex part pins the content."""
    content = {k: v for k, v in results.items() if k != "run_id"}
    files = {rel: digest for rel, digest in hashes.items() if rel != RESULTS_NAME}
    blob = json.dumps({"results": content, "files": files}, sort_keys=True).encode("utf-8")
    digest = hashlib.sha256(blob).hexdigest()[:12]
    name = _UNSAFE.sub("-", str(results.get("name", "run"))).strip("-.") or "run"
    seed = results.get("seed")
    return f"{name[:48]}-s{seed}-{digest}" if seed is not None else f"{name[:48]}-{digest}"


def _declared_ok(results: dict[str, Any], source: Path, hashes: dict[str, str]) -> bool | None:
    """Do the artifacts that results.json and the agent's manifest.json declare match the files?
    None when neither declares any (the run was never verified: the gate discloses it)."""
    declared = list(results.get("artifacts") or []) + _manifest_entries(source)
    if not declared:
        return None
    return all(hashes.get(str(item.get("path"))) == item.get("sha256") for item in declared)


def _manifest_entries(directory: Path) -> list[dict[str, Any]]:
    manifest = directory / "manifest.json"
    if not manifest.is_file():
        return []
    try:
        files = json.loads(manifest.read_text(encoding="utf-8")).get("files", [])
    except (ValueError, AttributeError) as exc:
        raise SpecError(f"{manifest}: not a manifest: {exc}", path=str(manifest)) from exc
    return [f for f in files if isinstance(f, dict)]


@dataclass(frozen=True)
class _Prepared:
    """A run that passed every check and is ready to be copied in."""

    source: Path
    results: dict[str, Any]
    hashes: dict[str, str]
    run_id: str
    verified: bool | None


def record_run(ws: Workspace, run_dir: Path | str) -> RecordResult:
    """Copy a pulled run into ``runs/<run-id>/`` and make it read-only; idempotent."""
    return _commit(ws, _prepare(run_dir))


def record_runs(ws: Workspace, run_dirs: list[Path] | tuple[Path, ...]) -> list[RecordResult]:
    """All or nothing: every run is validated and hashed first; one bad run records none."""
    prepared = [_prepare(run_dir) for run_dir in run_dirs]
    return [_commit(ws, run) for run in prepared]


def _prepare(run_dir: Path | str) -> _Prepared:
    source = Path(run_dir)
    run = load_results(source)  # validates rgt.results/1 and names a bad field
    source = Path(run.path or source).parent
    hashes = _file_hashes(source)
    verified = _declared_ok(run.raw, source, hashes)
    return _Prepared(source, run.raw, hashes, compute_run_id(run.raw, hashes), verified)


def _commit(ws: Workspace, run: _Prepared) -> RecordResult:
    target = ws.run_dir(run.run_id)
    if target.exists():
        return RecordResult(run.run_id, target, created=False, verified=run.verified)
    _copy_in(ws, run.source, target, run.results, run.run_id, run.hashes, run.verified)
    return RecordResult(run.run_id, target, created=True, verified=run.verified)


def _copy_in(
    ws: Workspace,
    source: Path,
    target: Path,
    results: dict[str, Any],
    run_id: str,
    hashes: dict[str, str],
    verified: bool | None,
) -> None:
    ws.runs.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".record-", dir=ws.runs))
    try:
        for rel in hashes:
            dest = staging / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source / rel, dest)
        atomic_write_json(str(staging / RESULTS_NAME), {**results, "run_id": run_id})
        stored = _file_hashes(staging)
        _check_copied(source, staging, hashes, stored)
        record = {
            "run_id": run_id,
            "source": os.path.abspath(source),  # VERIFY's findings name runs by directory
            "recorded": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "verified": verified,
            "files": stored,
        }
        atomic_write_json(str(staging / RECORD_NAME), record)
        _make_read_only(staging)
        os.rename(staging, target)
    except BaseException:
        _make_writable(staging)
        shutil.rmtree(staging, ignore_errors=True)
        raise


def _check_copied(
    source: Path, staging: Path, hashes: dict[str, str], stored: dict[str, str]
) -> None:
    """Trust the copy we re-read, not the copy call: every byte is re-hashed after writing."""
    for rel, digest in hashes.items():
        if rel != RESULTS_NAME and stored.get(rel) != digest:
            raise UsageError(
                f"{source / rel} changed while it was being recorded",
                fix="wait until the run has finished writing, then record it again",
            )


def _make_read_only(root: Path) -> None:
    for path in sorted(root.rglob("*"), reverse=True):
        mode = 0o555 if path.is_dir() else 0o444
        path.chmod(mode)
    root.chmod(0o555)


def _make_writable(root: Path) -> None:
    if not root.exists():
        return
    for path in [root, *root.rglob("*")]:
        path.chmod(path.stat().st_mode | stat.S_IWUSR)


def stored_run_ids(ws: Workspace) -> list[str]:
    if not ws.runs.is_dir():
        return []
    return sorted(p.name for p in ws.runs.iterdir() if p.is_dir() and not p.name.startswith("."))


def read_record(ws: Workspace, run_id: str) -> dict[str, Any]:
    path = ws.run_dir(run_id) / RECORD_NAME
    try:
        data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise SpecError(
            f"run {run_id}: {RECORD_NAME} is missing or unreadable ({exc})",
            path=str(path),
            fix="the stored run was damaged; record the original run directory again",
        ) from exc
    return data


def check_store(ws: Workspace) -> CheckReport:
    """Re-hash every stored run against its RECORD.json; report each file edited in place."""
    report = CheckReport()
    for run_id in stored_run_ids(ws):
        expected = read_record(ws, run_id).get("files", {})
        actual = _file_hashes(ws.run_dir(run_id))
        report.runs += 1
        report.files += len(actual)
        for rel in sorted(set(expected) | set(actual)):
            if rel not in actual:
                report.tampered.append(Tamper(run_id, rel, "missing"))
            elif rel not in expected:
                report.tampered.append(Tamper(run_id, rel, "added"))
            elif actual[rel] != expected[rel]:
                report.tampered.append(Tamper(run_id, rel, "modified"))
    return report


def load_stored(ws: Workspace, run_id: str) -> Any:
    """The validated results of one stored run (``rgt.results.RunResults``)."""
    path = ws.run_dir(run_id) / RESULTS_NAME
    if not path.is_file():
        known = ", ".join(stored_run_ids(ws)[:8]) or "none recorded"
        raise UsageError(
            f"no recorded run {run_id!r} (recorded: {known})",
            fix="record it with `rgt deliver record RUN_DIR`, or fix the run id",
        )
    return parse_results(json.loads(path.read_text(encoding="utf-8")), path=str(path))
