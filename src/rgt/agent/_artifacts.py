"""Which files are the job's artifacts: what it produced, not what it was given.

By default: every file under ``ckpt/`` (RGT_CKPT_DIR) and ``outputs/`` (RGT_OUTPUT_DIR), and
every file in ``work/`` that the job created or changed relative to the code snapshot (size or
mtime differ from the snapshot's; a hard-linked file when it differs from its recorded state).
``exclude`` globs drop default files; declared ``artifacts`` globs add files and win over both
the excludes and the caps. Globs are relative to ``work/``, except those that start with
``ckpt/``, ``outputs/`` or ``work/`` (relative to the job directory, as before work/ existed).
A glob without ``/`` matches a name at any depth (``*.log``, ``wandb``); a matched directory
takes everything below it.

Only the ``work/`` part is capped (``max_files``, ``max_bytes``): a script that writes a
dataset cache or 100k small files into its cwd must not turn pull and the teardown gate into
an hour of copying. ckpt/ and outputs/ are outputs by rgt's contract and never capped. What
the cap leaves out is listed (count, bytes, first paths, how to include it).
"""

from __future__ import annotations

import glob
import os
import re
import stat
from typing import Any, Dict, List, Optional, Pattern, Sequence, Set, Tuple

from rgt.agent import _workdir
from rgt.agent.paths import JobPaths

# 10,000 files: pull fetches, hashes and load-verifies each one, and the gate waits for all of
# them; past this a directory is a cache or a dataset, not results. 20 GiB: a few large
# checkpoints fit; a downloaded dataset (torchvision's ./data, an HF cache) does not.
DEFAULT_MAX_FILES = 10000
DEFAULT_MAX_BYTES = 20 * 1024**3
# Python writes these next to any module imported from the cwd: never results.
DEFAULT_EXCLUDE = ("__pycache__", "*.pyc", ".ipynb_checkpoints")
JOB_ROOT_DIRS = ("ckpt", "outputs", "work")
FIRST_LEFT_OUT = 20

Entry = Dict[str, Any]


class Collection(object):
    def __init__(self) -> None:
        self.found = set()  # type: Set[str]
        self.skipped = []  # type: List[Entry]
        self.missing = []  # type: List[str]
        self.left_out = {"count": 0, "bytes": 0, "paths": []}  # type: Dict[str, Any]

    def sorted_found(self) -> List[str]:
        return sorted(self.found)


def collect(
    paths: JobPaths,
    declared: Sequence[str],
    exclude: Sequence[str] = (),
    caps: Optional[Dict[str, Any]] = None,
) -> Collection:
    out = Collection()
    excludes = list(DEFAULT_EXCLUDE) + list(exclude)
    for top in ("ckpt", "outputs"):
        if os.path.lexists(os.path.join(paths.root, top)):
            found = set()  # type: Set[str]
            walk(paths.root, top, found, out.skipped)
            out.found |= {rel for rel in found if not excluded(rel, excludes)}
    for pattern in declared:  # first: what was declared never counts against the cap
        _declared(paths, pattern, out)
    changed = work_changes(paths, out.skipped, excludes)
    _cap(paths, [r for r in changed if r not in out.found and not excluded(r, excludes)], caps, out)
    out.skipped = _unique(out.skipped)
    return out


def _cap(paths: JobPaths, changed: List[str], caps: Any, out: Collection) -> None:
    max_files = _int(caps, "max_files", DEFAULT_MAX_FILES)
    max_bytes = _int(caps, "max_bytes", DEFAULT_MAX_BYTES)
    kept, kept_bytes, left = 0, 0, out.left_out
    for rel in sorted(changed):
        size = os.lstat(os.path.join(paths.root, rel)).st_size
        if kept < max_files and kept_bytes + size <= max_bytes:
            out.found.add(rel)
            kept, kept_bytes = kept + 1, kept_bytes + size
            continue
        left["count"] += 1
        left["bytes"] += size
        if len(left["paths"]) < FIRST_LEFT_OUT:
            left["paths"].append(rel)
    if left["count"]:
        left.update(max_files=max_files, max_bytes=max_bytes)
        left["fix"] = (
            "declare what you need with --artifact GLOB (declared artifacts are never capped), "
            "write results to $RGT_OUTPUT_DIR, or --exclude what is a cache"
        )


def _int(caps: Any, key: str, default: int) -> int:
    value = caps.get(key) if isinstance(caps, dict) else None
    return value if isinstance(value, int) and value >= 0 else default


def _declared(paths: JobPaths, pattern: str, out: Collection) -> None:
    norm = pattern.replace("\\", "/")
    if os.path.isabs(pattern) or ".." in norm.split("/"):
        out.skipped.append({"path": pattern, "reason": "pattern leaves the job directory"})
        return
    in_root = norm.split("/", 1)[0] in JOB_ROOT_DIRS
    base = paths.root if in_root else paths.work
    prefix = "" if in_root else "work/"
    matches = glob.glob(os.path.join(glob.escape(base), pattern), recursive=True)
    if not matches:
        out.missing.append(pattern)
    for match in sorted(matches):
        walk(paths.root, prefix + os.path.relpath(match, base), out.found, out.skipped)


def walk(job_dir: str, rel: str, found: Set[str], skipped: List[Entry]) -> None:
    """Add ``rel`` (a file, or every file below a directory) to ``found``; symlinks are
    skipped with their target named, never followed."""
    rel = rel.replace(os.sep, "/")
    link = _symlink_in(job_dir, rel)
    if link:
        target = os.readlink(os.path.join(job_dir, link))
        skipped.append({"path": link, "reason": "symlink to %r, not followed" % target})
    elif os.path.isdir(os.path.join(job_dir, rel)):
        for name in sorted(os.listdir(os.path.join(job_dir, rel))):
            walk(job_dir, rel + "/" + name, found, skipped)
    elif os.path.isfile(os.path.join(job_dir, rel)) and not in_flight(rel):
        found.add(rel)


def work_changes(paths: JobPaths, skipped: List[Entry], excludes: Sequence[str] = ()) -> List[str]:
    """``work/<rel>`` of every regular file the job created or changed in its cwd; excluded
    directories are not even walked (a dataset cache can hold millions of files)."""
    if not os.path.isdir(paths.work) or os.path.islink(paths.work):
        return []
    doc = _workdir.load_links(paths)
    snapshot = doc.get("snapshot") or _workdir.snapshot_of(paths)
    links = {str(e[0]): e[1:] for e in doc.get("links") or []}
    changed = []  # type: List[str]
    for dirpath, dirnames, filenames in os.walk(paths.work):
        rel_dir = os.path.relpath(dirpath, paths.work)
        prefix = "work/" if rel_dir == "." else "work/" + rel_dir.replace(os.sep, "/") + "/"
        dirnames[:] = [d for d in dirnames if not excluded(prefix + d, excludes)]
        for name in sorted(dirnames + filenames):
            rel = name if rel_dir == "." else os.path.join(rel_dir, name)
            st = os.lstat(os.path.join(paths.work, rel))
            if stat.S_ISLNK(st.st_mode):
                target = os.readlink(os.path.join(paths.work, rel))
                reason = "symlink to %r, not followed" % target
                skipped.append({"path": "work/" + rel, "reason": reason})
            elif _is_new(snapshot, rel, st, links.get(rel)):
                changed.append("work/" + rel.replace(os.sep, "/"))
    return changed


def _is_new(snapshot: Optional[str], rel: str, st: os.stat_result, link: Any) -> bool:
    """A regular file, not in flight, that the snapshot does not have in this state."""
    if not stat.S_ISREG(st.st_mode) or in_flight(rel):
        return False
    if not snapshot:
        return True
    try:
        orig = os.stat(os.path.join(snapshot, rel))
    except OSError:
        return True  # not in the snapshot: the job created it
    if link is not None and (orig.st_ino, orig.st_dev) == (st.st_ino, st.st_dev):
        return [st.st_size, st.st_mtime_ns, st.st_mode] != list(link)
    return (st.st_size, st.st_mtime_ns) != (orig.st_size, orig.st_mtime_ns)


def excluded(rel: str, patterns: Sequence[str]) -> bool:
    """``rel`` is relative to the job dir (``work/…``, ``ckpt/…``); work-relative patterns
    are tried against the part below ``work/`` as well."""
    return bool(compile_globs(patterns).search(rel)) or (
        rel.startswith("work/") and bool(compile_globs(patterns).search(rel[len("work/") :]))
    )


_COMPILED: Dict[Tuple[str, ...], "Pattern[str]"] = {}


def compile_globs(patterns: Sequence[str]) -> "Pattern[str]":
    """One regex for all globs (gitignore-like): ``*`` and ``?`` stay within a name, ``**``
    crosses directories, a glob without ``/`` matches a name at any depth, and a match on a
    directory covers everything below it."""
    key = tuple(patterns)
    if key not in _COMPILED:
        parts = []
        for pattern in patterns:
            body = pattern.replace("\\", "/").strip("/")
            if not body:
                continue
            lead = "(?:^|/)" if "/" not in body else "^"
            parts.append(lead + _translate(body) + "(?:/|$)")
        _COMPILED[key] = re.compile("|".join(parts) or "(?!)")
    return _COMPILED[key]


def _translate(glob_text: str) -> str:
    out, i = [], 0
    while i < len(glob_text):
        if glob_text.startswith("**", i):
            out.append(".*")
            i += 2
        elif glob_text[i] in "*?":
            out.append("[^/]*" if glob_text[i] == "*" else "[^/]")
            i += 1
        elif glob_text[i] == "[" and "]" in glob_text[i + 2 :]:
            end = glob_text.index("]", i + 2)
            inner = glob_text[i + 1 : end]
            out.append("[" + ("^" + inner[1:] if inner.startswith("!") else inner) + "]")
            i = end + 1
        else:
            out.append(re.escape(glob_text[i]))
            i += 1
    return "".join(out)


def in_flight(rel: str) -> bool:
    """``.tmp-*``/``*.part``: a write still in flight (rgt's atomic writers use these names)."""
    name = rel.rsplit("/", 1)[-1]
    return name.startswith(".tmp-") or name.endswith(".part")


def _symlink_in(job_dir: str, rel: str) -> Optional[str]:
    """The first component of ``rel`` (walking down from the job dir) that is a symlink."""
    parts = rel.split("/")
    for depth in range(1, len(parts) + 1):
        prefix = "/".join(parts[:depth])
        if os.path.islink(os.path.join(job_dir, prefix)):
            return prefix
    return None


def _unique(entries: List[Entry]) -> List[Entry]:
    seen = {}  # type: Dict[str, Entry]
    for entry in entries:
        seen.setdefault(entry["path"], entry)
    return [seen[key] for key in sorted(seen)]
