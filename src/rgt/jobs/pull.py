"""Pulling a job's artifacts: copy, check every sha256 against the agent's manifest, load-verify.

The manifest is fetched first and is the roster: a file missing locally or present locally but
absent from the manifest fails the pull. A file already present with the right hash is not
copied again, so re-running ``pull`` after a drop is the resume. The verdict is stored in the
state DB, where the teardown gate reads it.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rgt._fs import atomic_write_bytes, sha256_file
from rgt.errors import JobError, VerifyError
from rgt.jobs.store import Store
from rgt.machines import backend_for
from rgt.models import TERMINAL, JobState

# progress(file_path, bytes_done_total, bytes_total)
PullProgress = Callable[[str, int, int], None]


@dataclass(frozen=True)
class PullResult:
    job_id: str
    dest: str
    copied: int
    skipped: int
    bytes: int
    ok: bool
    report: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {
            "job_id": self.job_id,
            "dest": self.dest,
            "copied": self.copied,
            "skipped": self.skipped,
            "bytes": self.bytes,
            "ok": self.ok,
            "verify": self.report,
        }


def pull(store: Store, job_id: str, dest: Path, progress: PullProgress | None = None) -> PullResult:
    record = store.job(job_id)
    backend = backend_for(store, record.machine)
    state = JobState(backend.status(job_id).get("state", record.state.value))
    found = backend.manifest(job_id)
    if found is None:
        hint = (
            "wait for it to end (`rgt watch JOB`)"
            if state not in TERMINAL
            else "the agent wrote no manifest; check `rgt logs JOB`"
        )
        raise JobError(
            f"job {job_id} has no manifest yet (state {state.value})", job_id=job_id, fix=hint
        )
    manifest, raw = found
    entries = [_checked_entry(e) for e in manifest.get("files", [])]
    dest.mkdir(parents=True, exist_ok=True)
    total = sum(int(e["bytes"]) for e in entries)
    copied = skipped = done = 0
    for entry in entries:
        target = dest / entry["path"]
        if target.is_file() and sha256_file(str(target)) == entry["sha256"]:
            skipped += 1
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            backend.fetch(job_id, entry["path"], target)
            copied += 1
        done += int(entry["bytes"])
        if progress:
            progress(entry["path"], done, total)
    atomic_write_bytes(str(dest / "manifest.json"), raw)
    report = _verify(dest, manifest)
    files = {e["path"]: e["sha256"] for e in entries}
    store.record_pull(
        job_id, str(dest), files, hashlib.sha256(raw).hexdigest(), bool(report["ok"]), report
    )
    return PullResult(
        job_id=job_id,
        dest=str(dest),
        copied=copied,
        skipped=skipped,
        bytes=total,
        ok=bool(report["ok"]),
        report=report,
    )


def _checked_entry(entry: dict[str, Any]) -> dict[str, Any]:
    path = str(entry.get("path", ""))
    norm = posixpath.normpath(path)
    if not path or path.startswith("/") or norm.startswith("..") or norm != path:
        raise VerifyError(
            f"manifest names an unsafe path {path!r}",
            path=path,
            fix="the remote manifest was tampered with or corrupted; inspect it",
        )
    return entry


def _verify(dest: Path, manifest: dict[str, Any]) -> dict[str, Any]:
    from rgt.verify.artifacts import verify_tree

    report: dict[str, Any] = verify_tree(dest, manifest).to_json()
    clean: dict[str, Any] = json.loads(json.dumps(report, default=str))
    return clean
