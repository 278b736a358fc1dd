"""Hash the job's artifacts, re-read them, and only then write manifest.json (and DONE).

"saved" in a log is a claim; DONE is a promise that every artifact listed in manifest.json was
read back from disk with the recorded hash after the job ended. Files named ``.tmp-*`` or
``*.part`` are writes still in flight (rgt's atomic writers use these names) and are never
artifacts. Symlinks are not followed: they are listed under ``skipped`` with the reason, since
a link can point at anything (another job, a scratch disk that does not survive a release).
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import shlex
import subprocess
from typing import Any, Dict, List, Optional, Set, Tuple

from rgt import _fs
from rgt.agent import _system
from rgt.jobs.paths import JobPaths

MANIFEST_SCHEMA = "rgt.manifest/1"
# The agent's own bookkeeping is never an artifact (and some of it changes while we hash).
AGENT_FILES = frozenset(
    [
        "status.json",
        "events.jsonl",
        "manifest.json",
        "DONE",
        "agent.log",
        "agent.lock",
        "agent.pid",
        "CANCEL",
    ]
)

Entry = Dict[str, Any]


class ManifestResult(object):
    def __init__(
        self,
        ok: bool,
        reason: str,
        files: int = 0,
        total_bytes: int = 0,
        skipped: Optional[List[Entry]] = None,
        digest: str = "",
    ) -> None:
        self.ok = ok
        self.reason = reason
        self.files = files
        self.total_bytes = total_bytes
        self.skipped = skipped or []
        self.digest = digest

    def to_json(self) -> Dict[str, Any]:
        return {
            "ok": self.ok,
            "reason": self.reason,
            "files": self.files,
            "bytes": self.total_bytes,
            "skipped": self.skipped,
        }


def finalize(paths: JobPaths, state: str, patterns: List[str]) -> ManifestResult:
    """Collect, hash, re-read, write manifest.json; on ``succeeded`` also write DONE."""
    rels, skipped, missing = collect(paths.root, patterns)
    if missing and state == "succeeded":
        return ManifestResult(False, "declared artifact %r matched no file" % missing[0])
    entries = [hash_entry(paths.root, rel) for rel in rels]
    _test_hook_after_hash(paths.root)
    problem = verify(paths.root, entries)
    if problem:
        return ManifestResult(False, problem, skipped=skipped)
    digest = write_manifest(paths, state, entries, skipped)
    if state == "succeeded":
        _fs.atomic_write_bytes(paths.done, (digest + "\n").encode("ascii"))
    total = sum(int(e["bytes"]) for e in entries)
    return ManifestResult(True, "", len(entries), total, skipped, digest)


def collect(job_dir: str, patterns: List[str]) -> Tuple[List[str], List[Entry], List[str]]:
    """Relative paths of every artifact: all of ckpt/ and outputs/, plus the declared globs.

    Returns (sorted paths, skipped entries with a reason, patterns that matched nothing).
    """
    found = set()  # type: Set[str]
    skipped = []  # type: List[Entry]
    missing = []  # type: List[str]
    for top in ("ckpt", "outputs"):
        if os.path.lexists(os.path.join(job_dir, top)):
            _add(job_dir, top, found, skipped)
    for pattern in patterns:
        if os.path.isabs(pattern) or ".." in pattern.replace("\\", "/").split("/"):
            skipped.append({"path": pattern, "reason": "pattern leaves the job directory"})
            continue
        matches = glob.glob(os.path.join(glob.escape(job_dir), pattern), recursive=True)
        if not matches:
            missing.append(pattern)
        for match in sorted(matches):
            _add(job_dir, os.path.relpath(match, job_dir), found, skipped)
    return sorted(found), _unique(skipped), missing


def _add(job_dir: str, rel: str, found: Set[str], skipped: List[Entry]) -> None:
    rel = rel.replace(os.sep, "/")
    link = _symlink_in(job_dir, rel)
    if link:
        target = os.readlink(os.path.join(job_dir, link))
        skipped.append({"path": link, "reason": "symlink to %r, not followed" % target})
    elif os.path.isdir(os.path.join(job_dir, rel)):
        for name in sorted(os.listdir(os.path.join(job_dir, rel))):
            _add(job_dir, rel + "/" + name, found, skipped)
    elif os.path.isfile(os.path.join(job_dir, rel)) and _is_artifact(rel):
        found.add(rel)


def _symlink_in(job_dir: str, rel: str) -> Optional[str]:
    """The first component of ``rel`` (walking down from the job dir) that is a symlink."""
    parts = rel.split("/")
    for depth in range(1, len(parts) + 1):
        prefix = "/".join(parts[:depth])
        if os.path.islink(os.path.join(job_dir, prefix)):
            return prefix
    return None


def _is_artifact(rel: str) -> bool:
    name = rel.rsplit("/", 1)[-1]
    if rel in AGENT_FILES:
        return False
    return not (name.startswith(".tmp-") or name.endswith(".part"))


def _unique(entries: List[Entry]) -> List[Entry]:
    seen = {}  # type: Dict[str, Entry]
    for entry in entries:
        seen.setdefault(entry["path"], entry)
    return [seen[key] for key in sorted(seen)]


def hash_entry(job_dir: str, rel: str) -> Entry:
    path = os.path.join(job_dir, rel)
    return {"path": rel, "bytes": os.path.getsize(path), "sha256": _fs.sha256_file(path)}


def verify(job_dir: str, entries: List[Entry]) -> Optional[str]:
    """Re-read every file; the first one that differs from its entry is named in the reason."""
    for entry in entries:
        try:
            again = hash_entry(job_dir, entry["path"])
        except OSError as exc:
            return "artifact %s could not be re-read (%s)" % (entry["path"], exc.strerror)
        if again != entry:
            return "artifact %s changed between hashing and re-reading (sha256 %s... -> %s...)" % (
                entry["path"],
                entry["sha256"][:12],
                again["sha256"][:12],
            )
    return None


def write_manifest(paths: JobPaths, state: str, entries: List[Entry], skipped: List[Entry]) -> str:
    """Write manifest.json atomically; return the sha256 of exactly the bytes written."""
    manifest = {
        "schema": MANIFEST_SCHEMA,
        "job_id": paths.job_id,
        "created": _system.now_iso(),
        "state": state,
        "files": entries,
        "totals": {"files": len(entries), "bytes": sum(int(e["bytes"]) for e in entries)},
        "skipped": skipped,
    }
    data = (json.dumps(manifest, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode()
    _fs.atomic_write_bytes(paths.manifest, data)
    return hashlib.sha256(data).hexdigest()


def _test_hook_after_hash(job_dir: str) -> None:
    """Tests mutate an artifact here to prove the re-read catches it. Honoured only when
    RGT_AGENT_TESTING=1 as well, so a stray variable on a real machine does nothing."""
    hook = os.environ.get("RGT_AGENT_TEST_HOOK_AFTER_HASH")
    if not hook or os.environ.get("RGT_AGENT_TESTING") != "1":
        return
    env = dict(os.environ, RGT_JOB_DIR=job_dir)
    subprocess.run(shlex.split(hook), env=env, check=False, timeout=60)
