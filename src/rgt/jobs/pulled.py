"""What a pull left on this computer, recorded and re-checked.

A verified pull is evidence only while the copy is still what was verified: a deleted
checkpoint or an edited metrics file makes the record stale. So each pull records, per file,
its size, ``mtime_ns`` and sha256 as they landed, and the teardown gate re-checks presence,
size and mtime of every file (cheap: one ``lstat`` each) and, with ``rgt down --rehash``, the
hash. Records written before sizes were kept (a bare sha256 per path) are checked for presence,
and for their hash with ``--rehash``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from rgt._fs import sha256_file
from rgt.jobs._pull_dest import confined


def file_records(
    root: Path, entries: list[dict[str, Any]], report: dict[str, Any]
) -> dict[str, dict[str, Any]]:
    """path -> {sha256, bytes, mtime_ns} of every manifest file that landed as a regular file
    inside ``root`` (the sha256 is the one verification computed from the landed bytes)."""
    hashed = {f["path"]: f.get("sha256") for f in report.get("files", [])}
    records = {}
    for entry in entries:
        rel = entry["path"]
        if confined(root, rel) is not None or not hashed.get(rel):
            continue
        st = os.lstat(root / rel)
        records[rel] = {"sha256": hashed[rel], "bytes": st.st_size, "mtime_ns": st.st_mtime_ns}
    return records


def recheck(dest: str, files: dict[str, Any], *, rehash: bool = False) -> list[str]:
    """What changed in the pulled copy since it was verified, one phrase per file."""
    root = Path(dest)
    if files and not root.is_dir():
        return [f"the pulled copy {dest} is gone"]
    changes = []
    for rel, recorded in sorted(files.items()):
        change = _changed(root, rel, recorded, rehash)
        if change:
            changes.append(f"{rel} {change}")
    return changes


def _changed(root: Path, rel: str, recorded: Any, rehash: bool) -> str | None:
    where = confined(root, rel)
    if where == "missing":
        return "was deleted"
    if where is not None:
        return where
    if isinstance(recorded, str):  # a record from before sizes and times were kept
        recorded = {"sha256": recorded}
    st = os.lstat(root / rel)
    if "bytes" in recorded and st.st_size != recorded["bytes"]:
        return f"changed size ({recorded['bytes']} -> {st.st_size} bytes)"
    if "mtime_ns" in recorded and st.st_mtime_ns != recorded["mtime_ns"]:
        return "was modified after it was verified (mtime changed)"
    if rehash and sha256_file(str(root / rel)) != recorded.get("sha256"):
        return "has different content (sha256 changed)"
    return None


def failure_reasons(report: dict[str, Any]) -> list[str]:
    """Every reason a pull's verification failed, each naming its file."""
    refused = {r["path"] for r in [*report.get("refused", []), *report.get("not_confined", [])]}
    reasons = [f"{f['path']}: {f['detail']}" for f in report.get("files", []) if not f["ok"]]
    reasons += [r["why"] for r in report.get("refused", [])]
    reasons += [f"{r['path']}: {r['why']}" for r in report.get("not_confined", [])]
    reasons += [
        f"{p}: listed in the manifest, missing after the pull"
        for p in report.get("missing", [])
        if p not in refused
    ]
    reasons += [
        f"{p}: in the destination but not in the manifest (remove it, or pull into an empty "
        "directory)"
        for p in report.get("unexpected", [])
    ]
    reasons += [  # a checkpoint folder whose files are fine but which is incomplete
        f"{u['path']}/: {u['detail']}"
        for u in report.get("units", [])
        if u.get("verdict") == "bad" and str(u.get("detail", "")).startswith("incomplete")
    ]
    if not reasons and not report.get("ok"):
        reasons.append("nothing was verified")
    return reasons
