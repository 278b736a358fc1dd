"""A machine that lies: job directories written by hand, with the manifest and the files the
test chooses (links, swaps, paths), for the pull and gate tests. Works for any backend whose
durable root is reachable from here (the local backend, and the sshd on 127.0.0.1)."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from rgt.backends.base import Backend
from rgt.models import JobSpec
from rgt.state.store import Store, utcnow


def entry(rel: str, data: bytes) -> dict[str, object]:
    return {"path": rel, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def write_manifest(job_dir: Path, entries: list[dict[str, object]], state: str) -> None:
    manifest = {
        "schema": "rgt.manifest/1",
        "job_id": job_dir.name,
        "state": state,
        "files": entries,
    }
    (job_dir / "manifest.json").write_text(json.dumps(manifest))


def machine_job(
    backend: Backend,
    job_id: str,
    files: dict[str, bytes],
    *,
    store: Store | None = None,
    state: str = "succeeded",
    listed: list[dict[str, object]] | None = None,
) -> Path:
    """Write a job directory on the machine (spec, status, files, manifest); record it in
    ``store`` unless None (a job launched from elsewhere). ``listed`` overrides the manifest."""
    job_dir = Path(backend.job_paths(job_id).root)
    job_dir.mkdir(parents=True)
    spec = JobSpec(
        job_id=job_id, machine=backend.machine.name, command=("echo", "hi"), created=utcnow()
    )
    (job_dir / "spec.json").write_text(json.dumps(spec.to_json()))
    status = {"job_id": job_id, "state": state, "attempt": 1, "ended": utcnow()}
    (job_dir / "status.json").write_text(json.dumps(status))
    for rel, data in files.items():
        (job_dir / rel).parent.mkdir(parents=True, exist_ok=True)
        (job_dir / rel).write_bytes(data)
    entries = listed if listed is not None else [entry(r, d) for r, d in sorted(files.items())]
    write_manifest(job_dir, entries, state)
    if store is not None:
        store.add_job(spec)
    return job_dir


def swap_for_link(path: Path, target: Path) -> None:
    """What a hostile machine (or a racing process) does: a directory or file becomes a link."""
    moved = path.with_name(path.name + ".moved")
    os.rename(path, moved)
    os.symlink(target, path)


def tree(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` with its content (to prove nothing there changed)."""
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.is_symlink()
    }
