"""Pulling a job's artifacts: copy, check every sha256 against the agent's manifest, load-verify.

The manifest is fetched first and is the roster: a file missing locally or present locally but
absent from the manifest fails the pull. A file already present with the right hash is not
copied again, so re-running ``pull`` after a drop is the resume. The verdict is stored in the
state DB with each pulled file's size, mtime and sha256, where the teardown gate reads (and
re-checks) it.

The machine is not trusted (``_pull_dest``): manifest paths are checked before anything is
written, every file lands through directory descriptors that never follow a link, and what
landed is checked again. A job whose manifest lists no file has no artifacts: nothing to copy,
recorded as such, and the gate has nothing to wait for.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rgt.agent.verdicts import say_counts
from rgt.backends import backend_for
from rgt.errors import JobError, VerifyError
from rgt.jobs._pull_dest import STAGING, Destination, Refused
from rgt.jobs._pull_fetch import fetch
from rgt.jobs._pull_space import check_free_space, need_of
from rgt.jobs.pulled import failure_reasons, file_records
from rgt.models import TERMINAL, JobState
from rgt.state.store import Store
from rgt.status import cache as status_cache
from rgt.status.fleet import is_fleet

# progress(file_path, bytes_done_total, bytes_total)
PullProgress = Callable[[str, int, int], None]
NO_ARTIFACTS = "no artifacts"
_SHA256 = re.compile(r"[0-9a-f]{64}")
_BAD_PARTS = frozenset({"", ".", ".."})  # "a//b", "./a", "a/", ".": no empty or dot part


@dataclass(frozen=True)
class PullResult:
    job_id: str
    dest: str
    copied: int
    skipped: int
    bytes: int
    ok: bool
    report: dict[str, Any]
    reasons: tuple[str, ...] = ()
    note: str | None = None  # "no artifacts"
    refused: tuple[str, ...] = field(default=())

    def to_json(self) -> dict[str, Any]:
        return {
            "job_id": self.job_id,
            "dest": self.dest,
            "copied": self.copied,
            "skipped": self.skipped,
            "bytes": self.bytes,
            "ok": self.ok,
            "note": self.note,
            "reasons": list(self.reasons),
            "refused": list(self.refused),
            "verify": self.report,
        }

    def summary(self) -> list[str]:
        """The human report: what was copied, each file's check, the verdict with its reasons."""
        if self.note:
            return [f"{self.job_id}: {self.note} (its manifest lists no file); nothing to pull"]
        lines = [
            f"pulled {self.copied} file(s), {self.skipped} already present, "
            f"{self.bytes} bytes → {self.dest}"
        ]
        for f in self.report.get("files", []):
            lines.append(f"  {_mark(f)} {f['path']}  {f['detail']}")
        for u in self.report.get("units", []):
            lines.append(
                f"  {_MARKS.get(u['verdict'], '?   ')} {u['layout']} checkpoint {u['path']}/ "
                f"({u['files']} files): {u['detail']}"
            )
        lines.append(verdict_counts(self.report))
        if self.ok:
            return [*lines, "100 % OK"]
        reasons = list(self.reasons) or ["no reason recorded"]
        return [*lines, f"verification FAILED: {reasons[0]}", *(f"  - {r}" for r in reasons[1:])]


_MARKS = {"ok": "OK  ", "hash_only": "HASH", "bad": "BAD "}


def _mark(f: dict[str, Any]) -> str:
    # reports stored before verdicts existed have only "ok"
    return _MARKS.get(str(f.get("verdict")), "OK  " if f.get("ok") else "BAD ")


def verdict_counts(report: dict[str, Any]) -> str:
    """The counts line, word for word what the agent's manifest reason (``rgt watch``) says."""
    return say_counts(report.get("files", []))


def pull(store: Store, job_id: str, dest: Path, progress: PullProgress | None = None) -> PullResult:
    record = store.job(job_id)
    if is_fleet(record):  # every node's artifacts, each under node-R/ (rgt.jobs._pull_fleet)
        from rgt.jobs._pull_fleet import pull_fleet

        return pull_fleet(store, record, dest, progress)
    backend = backend_for(store, record.machine)
    shown = status_cache.observe(store, backend, [record])[job_id]
    state = shown.state or record.state  # unknown (a damaged status.json): the cached state
    found = _manifest(backend.manifest(job_id), job_id, state)
    result, files = fetch_verified(backend, job_id, dest, state, found, progress)
    manifest_sha = hashlib.sha256(found[1]).hexdigest()
    _record(store, job_id, result.dest, files, manifest_sha, result.ok, result.report)
    return result


def fetch_verified(
    backend: Any,
    job_id: str,
    dest: Path,
    state: JobState,
    found: tuple[dict[str, Any], bytes],
    progress: PullProgress | None = None,
) -> tuple[PullResult, dict[str, Any]]:
    """Copy and verify what ``found`` (the manifest and its bytes) lists into ``dest``; the
    result and each landed file's record. Nothing is stored: the caller records the pull."""
    manifest, raw = found
    entries = checked_entries(manifest)
    if not entries:
        return _no_artifacts(job_id, dest, state, found), {}
    with Destination(dest) as target, target.guard():
        target.need = need_of(entries)
        target.open_staging()
        todo = [e for e in entries if target.existing_sha256(e["path"]) != e["sha256"]]
        target.need = need_of(todo)
        check_free_space(target.real, target.need)
        refused = _copy(backend, job_id, target, entries, todo, progress)
        target.write_manifest(raw)
        target.clean_staging()
        report = _verify(target, manifest, refused)
        files = file_records(target.real, entries, report)
    result = PullResult(
        job_id=job_id,
        dest=os.path.abspath(dest),
        copied=len(todo) - len(refused),
        skipped=len(entries) - len(todo),
        bytes=sum(int(e["bytes"]) for e in entries),
        ok=bool(report["ok"]),
        report=report,
        reasons=tuple(failure_reasons(report)),
        refused=tuple(refused.values()),
    )
    return result, files


def _manifest(
    found: tuple[dict[str, Any], bytes] | None, job_id: str, state: JobState
) -> tuple[dict[str, Any], bytes]:
    if found is None:
        hint = (
            "wait for it to end (`rgt watch JOB`)"
            if state not in TERMINAL
            else "the agent wrote no manifest; check `rgt logs JOB`"
        )
        raise JobError(
            f"job {job_id} has no manifest yet (state {state.value})", job_id=job_id, fix=hint
        )
    return found


def _copy(
    backend: Any,
    job_id: str,
    target: Destination,
    entries: list[dict[str, Any]],
    todo: list[dict[str, Any]],
    progress: PullProgress | None,
) -> dict[str, str]:
    """Fetch every entry in ``todo``; returns path -> why, for each file refused."""
    pending = {id(e) for e in todo}
    total = sum(int(e["bytes"]) for e in entries)
    refused: dict[str, str] = {}
    done = 0
    for entry in entries:
        if id(entry) in pending:
            try:
                fetch(backend, job_id, entry, target)
            except Refused as why:
                refused[entry["path"]] = str(why)
        done += int(entry["bytes"])
        if progress:
            progress(entry["path"], done, total)
    return refused


def _no_artifacts(
    job_id: str, dest: Path, state: JobState, found: tuple[dict[str, Any], bytes]
) -> PullResult:
    """Nothing to copy: a pull that is verified as it stands, so the gate need not wait."""
    if state not in TERMINAL:
        raise JobError(
            f"job {job_id} has not ended (state {state.value}); nothing to pull yet",
            job_id=job_id,
            fix="wait for it to end (`rgt watch JOB`)",
        )
    manifest, raw = found
    skipped = manifest.get("skipped") or []
    report = {"ok": True, "note": NO_ARTIFACTS, "files": [], "missing": [], "unexpected": []}
    if skipped:
        report["skipped"] = skipped
    # the manifest itself, as evidence of "nothing"
    with Destination(dest) as target, target.guard():
        target.need = need_of([])
        target.open_staging()
        target.write_manifest(raw)
        target.clean_staging()
    return PullResult(job_id, os.path.abspath(dest), 0, 0, 0, True, report, note=NO_ARTIFACTS)


def _record(
    store: Store,
    job_id: str,
    where: str,
    files: dict[str, Any],
    manifest_sha: str,
    ok: bool,
    report: dict[str, Any],
) -> None:
    """Store the verdict. A state.db that cannot take it (a full disk, a read-only mount)
    raises ``StateWriteError`` from the store, naming the mount and the re-run that records it."""
    store.record_pull(job_id, where, files, manifest_sha, ok, report)


def checked_entries(manifest: dict[str, Any]) -> list[dict[str, Any]]:
    """Every manifest entry, checked before anything is written: a safe relative path
    (``rgt._confine``: no ``..``, absolute path, NUL, backslash or drive, empty or ``.``
    component; none of rgt's own names), 64 hex
    digits of sha256, a byte count; no path twice and no path that is another's directory."""
    files = manifest.get("files") if isinstance(manifest, dict) else None
    if not isinstance(files, list):
        raise _unsafe("manifest has no 'files' list", "")
    entries = [_checked_entry(e) for e in files]
    paths: set[str] = set()
    for entry in entries:
        if entry["path"] in paths:
            raise _unsafe(f"manifest names {entry['path']!r} twice", entry["path"])
        paths.add(entry["path"])
    dirs = {p.rsplit("/", i)[0] for p in paths for i in range(1, p.count("/") + 1)}
    if clash := sorted(paths & dirs):
        raise _unsafe(f"manifest names {clash[0]!r} as a file and a directory", clash[0])
    return entries


def _checked_entry(entry: Any) -> dict[str, Any]:
    if not isinstance(entry, dict):
        raise _unsafe("manifest entry is not an object", "")
    path = entry.get("path")
    if not isinstance(path, str) or not path:
        raise _unsafe("manifest entry has no path", "")
    from rgt._confine import why_unsafe  # the one check of every name chosen outside rgt
    from rgt.errors import UnsafeNameError

    reason = why_unsafe(path)
    if reason is None and (path.split("/")[0] == STAGING or path == "manifest.json"):
        reason = "one of rgt's own names in the destination"
    if reason is not None:
        raise UnsafeNameError(
            f"manifest names an unsafe path {path!r}: {reason}",
            name=path,
            reason=reason,
            fix="the remote manifest was tampered with or corrupted; inspect it (nothing was "
            "copied)",
        )
    sha, size = entry.get("sha256"), entry.get("bytes")
    if not isinstance(sha, str) or not _SHA256.fullmatch(sha):
        raise _unsafe(f"manifest entry {path!r} has no sha256", path)
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        raise _unsafe(f"manifest entry {path!r} has no byte count", path)
    return entry


def _unsafe(message: str, path: str) -> VerifyError:
    return VerifyError(
        message,
        path=path,
        fix="the remote manifest was tampered with or corrupted; inspect it (nothing was copied)",
    )


def _verify(
    target: Destination, manifest: dict[str, Any], refused: dict[str, str]
) -> dict[str, Any]:
    from rgt.verify.artifacts import verify_tree

    found = verify_tree(target.real, manifest).to_json()
    report: dict[str, Any] = json.loads(json.dumps(found, default=str))
    escaped = {
        e["path"]: why
        for e in manifest["files"]
        if e["path"] not in refused and (why := target.landed(e["path"])) and why != "missing"
    }
    report["refused"] = [{"path": p, "why": w} for p, w in sorted(refused.items())]
    report["not_confined"] = [{"path": p, "why": w} for p, w in sorted(escaped.items())]
    report["ok"] = bool(report["ok"]) and not refused and not escaped
    return report
