"""Each pulled cell's run-time knobs: the job's ``runtime.json`` (written on the machine by the
sitecustomize hook, ``rgt.agent._runtime_hook``) copied beside the cell as ``rgt-runtime.json``
and linked into its group folder, where `rgt verify compare` finds it (``rgt.verify.runtime``).

The file is job metadata, not an artifact: it is read with a bounded ``head -c`` and kept only
when it parses as a capture, so a machine cannot make the pull write anything else.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rgt._fs import atomic_write_bytes
from rgt.backends import backend_for
from rgt.errors import RgtError
from rgt.state.store import Store
from rgt.verify import runtime


def fetch(store: Store, job_id: str, target: Path) -> dict[str, Any] | None:
    """Copy the job's capture to ``target/rgt-runtime.json``; its knobs, or None without one."""
    try:
        backend = backend_for(store, store.job(job_id).machine)
        path = f"{backend.job_paths(job_id).root}/runtime.json"
        result = backend.transport.run(["head", "-c", str(runtime.MAX_BYTES + 1), "--", path])
    except (RgtError, OSError, AttributeError):
        return None
    capture = runtime.parse(result.stdout) if result.ok else None
    if capture is None:
        return None
    atomic_write_bytes(str(target / runtime.FILENAME), result.stdout)
    return runtime.from_capture(capture).to_json()


def link(cell_folder: Path, pulled: Path) -> None:
    """``by-group/<group>/<cell>/rgt-runtime.json`` -> the pulled cell's copy (relative)."""
    source = pulled / runtime.FILENAME
    if not source.is_file():
        return
    link_path = cell_folder / runtime.FILENAME
    relative = Path(_relpath(source, cell_folder))
    if link_path.is_symlink() or link_path.exists():
        link_path.unlink()
    link_path.symlink_to(relative)


def _relpath(path: Path, start: Path) -> str:
    import os

    return os.path.relpath(path, start)
