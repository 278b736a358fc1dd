"""Hash the job's artifacts, re-read them, and only then write manifest.json (and DONE).

"saved" in a log is a claim; DONE is a promise that every artifact listed in manifest.json was
read back from disk with the recorded hash after the job ended. Which files are artifacts is
``_artifacts``' business: in-flight writes (``.tmp-*``, ``*.part``) never are, symlinks are
listed under ``skipped`` with the reason (a link can point at anything: another job, a scratch
disk that does not survive a release), and what a cap left out is listed under ``left_out``.
A job that produced nothing gets a manifest with ``files: []``.

The re-read is the verdict pass of ``rgt.agent.verdicts``, the same verifier ``pull`` runs: each
entry gets its ``verdict`` (ok / hash_only / bad) and ``detail``, the manifest a ``verdicts``
count and its checkpoint folders as ``units``, so ``rgt watch`` and ``rgt pull`` say the same
numbers.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import subprocess
from typing import Any, Dict, List, Optional

from rgt import _fs
from rgt.agent import _artifacts, _system
from rgt.agent.paths import JobPaths
from rgt.agent.verdicts import check_tree, say_counts

MANIFEST_SCHEMA = "rgt.manifest/1"
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
        left_out: Optional[Entry] = None,
    ) -> None:
        self.ok = ok
        self.reason = reason
        self.files = files
        self.total_bytes = total_bytes
        self.skipped = skipped or []
        self.digest = digest
        self.left_out = left_out or {"count": 0, "bytes": 0, "paths": []}
        self.missing = []  # type: List[str]  # declared artifact globs that matched nothing
        self.verdicts = {"ok": 0, "hash_only": 0, "bad": 0}  # type: Dict[str, int]
        self.bad = []  # type: List[str]
        self.entries = []  # type: List[Entry]

    def to_json(self) -> Dict[str, Any]:
        return {
            "ok": self.ok,
            "reason": self.reason,
            "files": self.files,
            "bytes": self.total_bytes,
            "skipped": self.skipped,
            "left_out": self.left_out,
        }


def finalize(
    paths: JobPaths, state: str, patterns: List[str], spec: Optional[Dict[str, Any]] = None
) -> ManifestResult:
    """Collect (``_artifacts``), hash, re-read, write manifest.json; on ``succeeded`` also
    write DONE. ``spec`` brings ``exclude`` and ``artifact_caps``."""
    spec = spec or {}
    found = _artifacts.collect(
        paths, patterns, list(spec.get("exclude") or []), spec.get("artifact_caps")
    )
    if found.missing and state == "succeeded":
        # Not a success, but what the job did write is still listed (and can be pulled), so
        # the gate never waits on a manifest that will not come.
        state = "failed"
    entries = [hash_entry(paths.root, rel) for rel in found.sorted_found()]
    _test_hook_after_hash(paths.root)
    problem, units = judge(paths.root, entries)
    if problem:
        return ManifestResult(False, problem, skipped=found.skipped)
    digest = write_manifest(paths, state, entries, found.skipped, found.left_out, units)
    if state == "succeeded":
        _fs.atomic_write_bytes(paths.done, (digest + "\n").encode("ascii"))
    total = sum(int(e["bytes"]) for e in entries)
    result = ManifestResult(True, "", len(entries), total, found.skipped, digest, found.left_out)
    result.missing = list(found.missing)
    _count(result, entries)
    return result


def judge(job_dir: str, entries: List[Entry]) -> "tuple[Optional[str], List[Entry]]":
    """Re-read every file through the verifier (its sha256 is compared with the entry's) and
    record each verdict in its entry; the first file that changed since it was hashed is named
    in the reason. Returns (reason or None, the checkpoint folders as unit records)."""
    tree = check_tree(job_dir, entries, scan=False)
    by_path = {v.path: v for v in tree.files}
    for entry in entries:
        verdict = by_path.get(entry["path"])
        if verdict is None:
            return "artifact %s could not be re-read (it vanished)" % entry["path"], []
        if verdict.sha256 != entry["sha256"] or verdict.bytes != entry["bytes"]:
            return "artifact %s changed between hashing and re-reading (sha256 %s... -> %s...)" % (
                entry["path"],
                entry["sha256"][:12],
                (verdict.sha256 or "unreadable")[:12],
            ), []
        entry.update(verdict=verdict.verdict, detail=verdict.detail, kind=verdict.kind)
        if verdict.unit is not None:
            entry["unit"] = verdict.unit
    units = [
        {
            "path": u.path,
            "layout": u.layout,
            "verdict": u.verdict,
            "files": u.files,
            "detail": u.detail,
        }
        for u in tree.units
    ]
    return None, units


def _count(result: ManifestResult, entries: List[Entry]) -> None:
    result.entries = entries
    for entry in entries:
        verdict = entry.get("verdict", "ok")
        result.verdicts[verdict] = result.verdicts.get(verdict, 0) + 1
        said = "%s: %s" % (entry["path"], entry.get("detail", ""))
        if verdict == "bad":
            result.bad.append(said)


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


def write_manifest(
    paths: JobPaths,
    state: str,
    entries: List[Entry],
    skipped: List[Entry],
    left_out: Optional[Entry] = None,
    units: Optional[List[Entry]] = None,
) -> str:
    """Write manifest.json atomically; return the sha256 of exactly the bytes written."""
    counts = {"ok": 0, "hash_only": 0, "bad": 0}
    for entry in entries:
        if entry.get("verdict") in counts:
            counts[entry["verdict"]] += 1
    manifest = {
        "schema": MANIFEST_SCHEMA,
        "job_id": paths.job_id,
        "created": _system.now_iso(),
        "state": state,
        "files": entries,
        "totals": {"files": len(entries), "bytes": sum(int(e["bytes"]) for e in entries)},
        "skipped": skipped,
        "left_out": left_out or {"count": 0, "bytes": 0, "paths": []},
        "verdicts": counts,
        "units": units or [],
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


def artifacts_said(reason: str, state: str, result: ManifestResult) -> str:
    """Never "its artifacts verified" for 0 files: a job that produced nothing says so."""
    if not result.files:
        return "%s; no artifacts (nothing in outputs/ or ckpt/, nothing new in work/)" % reason
    said = "%s; %s" % (reason, say_counts(result.entries))
    if result.bad:
        said += " (bad: %s)" % _first(result.bad)
    if result.left_out.get("count"):
        said += ", %d more left out by the cap (see manifest left_out)" % result.left_out["count"]
    return said if state == "succeeded" else reason


def _first(items: List[str]) -> str:
    text = "; ".join(items[:2]) + ("; ..." if len(items) > 2 else "")
    return text if len(text) <= 300 else text[:297] + "..."
