"""The job's own working directory ``work/``, populated once per job from the code snapshot.

The snapshot ``code/<hash>/`` is shared by every job (every sweep cell) launched from the same
tree and must never change (invariant 6); scripts write relative to their cwd all the time
(``out/ckpt.pt``, ``wandb/``, ``data/train.bin``). So each job runs in ``work/``, filled file by
file with the cheapest form that keeps the snapshot safe:

1. a reflink (``FICLONE``: btrfs, XFS with reflink, bcachefs): a copy-on-write clone, no extra
   disk, and a write to it can never reach the snapshot, not even as root;
2. a copy, for files up to 1 MiB that are not code (configs, CSVs, JSON, small data: what a
   script may rewrite or append to);
3. a hard link for the rest (code, weights, data files): free and instant, the inode stays
   read-only (0444). A non-root job gets EACCES if it writes one in place (replace it instead:
   write a new file and rename). Root ignores permission bits, so an in-place write by root WOULD
   change the snapshot: the size, mtime and mode of every hard-linked file are recorded in
   ``work.links.json`` and re-checked after each attempt (``check_links``); a change is an
   error event naming the file, and a ``code/<hash>.damaged`` marker makes the next launch
   upload the snapshot again and every later job refuse the damaged one.

Set up once per job (a retry sees what the previous attempt wrote), in ``work.partial`` and
renamed into place, so a crash half-way leaves no half-populated ``work/``.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import shutil
import stat
import time
from typing import Any, Dict, List, Optional, Union

from rgt import _fs
from rgt.agent.paths import JobPaths, damaged_marker

FICLONE = 0x40049409  # _IOW(0x94, 9, int) from linux/fs.h
# Copied: small files a script may rewrite or append to (configs, CSVs, JSON, small data).
# Code and suffix-less files (Makefile, LICENSE) are read, not written, by a training run, and
# are most of a snapshot's files: sharing them keeps a 10,000-file work/ cheap.
COPY_MAX_BYTES = 1024 * 1024
# fmt: off
CODE_SUFFIXES = frozenset((
    ".py", ".pyi", ".pyx", ".pxd", ".c", ".cc", ".cpp", ".h", ".hpp", ".cu", ".cuh", ".sh",
    ".bash", ".md", ".rst", ".js", ".ts", ".html", ".css", ".go", ".rs", ".java", ".lua", ".jl",
))
# fmt: on
NO_SPACE = (errno.ENOSPC, errno.EDQUOT)
# FICLONE's answers on a filesystem (or pair of files) that cannot share extents.
NO_REFLINK = (errno.EOPNOTSUPP, errno.ENOTTY, errno.EXDEV, errno.EINVAL, errno.ENOSYS, errno.EPERM)


class WorkDirFailure(object):
    """Why ``work/`` could not be set up; ``label`` is a triage label."""

    def __init__(self, label: str, cause: str, remedy: str) -> None:
        self.label = label
        self.cause = cause
        self.remedy = remedy


def snapshot_of(paths: JobPaths) -> Optional[str]:
    """The snapshot directory ``code`` points at, or None for a job without code."""
    return os.path.realpath(paths.code) if os.path.isdir(paths.code) else None


def ensure(paths: JobPaths) -> Union[Dict[str, Any], WorkDirFailure, None]:
    """Create ``work/`` unless it exists. Returns what was done (None: it existed already)
    or a ``WorkDirFailure``."""
    if os.path.isdir(paths.work):
        return None
    snapshot = snapshot_of(paths)
    if snapshot is None and os.path.lexists(paths.code):
        return WorkDirFailure(
            "unknown",
            "the code snapshot %s is missing" % os.path.realpath(paths.code),
            "launch again: `rgt run` uploads the snapshot",
        )
    if snapshot and os.path.exists(damaged_marker(snapshot)):
        return WorkDirFailure(
            "unknown",
            "the code snapshot %s was changed by an earlier job (see %s)"
            % (snapshot, damaged_marker(snapshot)),
            "launch again: `rgt run` uploads a fresh snapshot",
        )
    partial = paths.work + ".partial"
    try:
        remove_tree(partial)
        started = time.monotonic()
        counts = populate(snapshot, partial) if snapshot else _empty(partial)
        links = counts.pop("links")
        _write_links(paths, {"snapshot": snapshot, "links": links})
        os.rename(partial, paths.work)
    except OSError as exc:
        remove_tree(partial)  # free what we took; the snapshot itself was only read
        return _failure(paths, exc)
    counts["seconds"] = round(time.monotonic() - started, 3)
    return counts


def _empty(partial: str) -> Dict[str, Any]:
    os.makedirs(partial)
    return {"reflinked": 0, "copied": 0, "linked": 0, "copied_bytes": 0, "links": []}


def _failure(paths: JobPaths, exc: OSError) -> WorkDirFailure:
    where = "%s (%s)" % (paths.work, exc.strerror or exc)
    if exc.errno in NO_SPACE:
        return WorkDirFailure(
            "disk_full",
            "no space to set up the job's working directory %s" % where,
            "free space (or inodes) on the durable disk, or rent a bigger one, then launch "
            "again; the code snapshot is intact",
        )
    return WorkDirFailure(
        "unknown",
        "cannot set up the job's working directory %s" % where,
        "check the permissions and the disk of the durable root, then launch again",
    )


def populate(snapshot: str, dest: str) -> Dict[str, Any]:
    counts = {"reflinked": 0, "copied": 0, "linked": 0, "copied_bytes": 0}  # type: Dict[str, Any]
    links = []  # type: List[List[Any]]
    can_clone = [True]  # until the filesystem says otherwise
    for dirpath, _dirnames, filenames in os.walk(snapshot):
        rel_dir = os.path.relpath(dirpath, snapshot)
        target_dir = dest if rel_dir == "." else os.path.join(dest, rel_dir)
        os.makedirs(target_dir, 0o755, exist_ok=True)
        for name in filenames:
            src, dst = dirpath + "/" + name, target_dir + "/" + name
            st = os.lstat(src)
            if not stat.S_ISREG(st.st_mode):
                continue  # a snapshot holds regular files only
            how = _place(src, dst, st, can_clone)
            counts[how] += 1
            if how == "copied":
                counts["copied_bytes"] += st.st_size
            elif how == "linked":
                rel = name if rel_dir == "." else rel_dir + "/" + name
                links.append([rel, st.st_size, st.st_mtime_ns, st.st_mode])
    counts["links"] = links
    return counts


def _place(src: str, dst: str, st: os.stat_result, can_clone: List[bool]) -> str:
    suffix = os.path.splitext(dst)[1].lower()
    small = st.st_size <= COPY_MAX_BYTES and suffix != "" and suffix not in CODE_SUFFIXES
    if small or can_clone[0]:
        how = _clone_or_copy(src, dst, st, can_clone, small)
        if how:
            return how
    try:
        os.link(src, dst)
    except OSError as exc:  # another filesystem, or the inode's link count is full
        if exc.errno not in (errno.EXDEV, errno.EMLINK, errno.EPERM):
            raise
        return str(_clone_or_copy(src, dst, st, [False], True))
    return "linked"


def _clone_or_copy(
    src: str, dst: str, st: os.stat_result, can_clone: List[bool], copy: bool
) -> Optional[str]:
    """One open of each file: a reflink when the filesystem shares extents, else (``copy``)
    a sendfile copy, else None and no file. Created writable, with the snapshot's mtime."""
    src_fd = os.open(src, os.O_RDONLY)
    try:
        mode = 0o755 if st.st_mode & 0o111 else 0o644
        dst_fd = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
        try:
            how = "reflinked" if can_clone[0] and _clone(dst_fd, src_fd, can_clone) else None
            if how is None and copy:
                how = "copied"
                _sendfile(dst_fd, src_fd, st.st_size)
            if how:
                os.utime(dst_fd, ns=(st.st_atime_ns, st.st_mtime_ns))
        finally:
            os.close(dst_fd)
    finally:
        os.close(src_fd)
    if how is None:
        os.unlink(dst)
    return how


def _clone(dst_fd: int, src_fd: int, can_clone: List[bool]) -> bool:
    try:
        fcntl.ioctl(dst_fd, FICLONE, src_fd)
    except OSError as exc:
        if exc.errno not in NO_REFLINK:
            raise
        can_clone[0] = False  # this filesystem cannot: never ask again for this job
        return False
    return True


def _sendfile(dst_fd: int, src_fd: int, size: int) -> None:
    offset = 0
    while offset < size:
        sent = os.sendfile(dst_fd, src_fd, offset, size - offset)
        if sent == 0:
            break  # the file shrank under us; the snapshot is read-only, so it will not
        offset += sent


def _write_links(paths: JobPaths, doc: Dict[str, Any]) -> None:
    """Compact JSON: one entry per shared file, thousands of them in a large snapshot."""
    _fs.atomic_write_bytes(paths.work_links, json.dumps(doc, separators=(",", ":")).encode())


def load_links(paths: JobPaths) -> Dict[str, Any]:
    try:
        doc = _fs.read_json(paths.work_links)
    except (OSError, ValueError):
        return {"snapshot": None, "links": []}
    return doc if isinstance(doc, dict) else {"snapshot": None, "links": []}


def check_links(paths: JobPaths) -> List[Dict[str, Any]]:
    """Hard-linked snapshot files whose size, mtime or mode changed (a root job wrote one in
    place). Each change is reported once (``reported``); the recorded state stays the
    original, which is what ``_artifacts`` compares against."""
    doc = load_links(paths)
    snapshot, changed = doc.get("snapshot"), []  # type: Any, List[Dict[str, Any]]
    reported = doc.setdefault("reported", {})  # type: Dict[str, List[int]]
    for rel, size, mtime_ns, mode in doc.get("links") or []:
        try:
            st = os.stat(os.path.join(str(snapshot), rel))
        except OSError:
            continue  # a link the snapshot no longer has cannot be judged here
        now = [st.st_size, st.st_mtime_ns, st.st_mode]
        if now != reported.get(rel, [size, mtime_ns, mode]):
            changed.append({"path": rel, "bytes_before": size, "bytes_now": st.st_size})
            reported[rel] = now
    if changed:
        marker = {"job_id": paths.job_id, "files": [c["path"] for c in changed]}
        try:
            _fs.atomic_write_json(damaged_marker(str(snapshot)), marker)
            _write_links(paths, doc)
        except OSError as exc:  # a full disk: the event still says it; the marker may not
            for change in changed:
                change["marker_not_written"] = str(exc)
    return changed


def remove_tree(path: str) -> None:
    """rm -rf that also gets through directories a job made read-only."""
    if not os.path.lexists(path):
        return
    for dirpath, dirnames, _files in os.walk(path):
        for name in dirnames:
            full = os.path.join(dirpath, name)
            if not os.path.islink(full):
                os.chmod(full, 0o755)
    os.chmod(path, 0o755)
    shutil.rmtree(path)
