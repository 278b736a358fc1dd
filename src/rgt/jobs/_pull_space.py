"""The local side's resources: free space before a pull, and every local ``OSError`` as rgt's
own error.

A pull needs bytes for the files it copies and inodes for each file, each directory it creates,
its staging directory and the manifest. :func:`check_free_space` refuses before copying when the
destination's filesystem cannot hold that; :func:`local_error` turns a failure met anyway (the
disk filled while copying, a lock that cannot be taken, an over-long path) into a
:class:`DiskBudgetError` or :class:`UsageError` naming the path, the mount, what is needed and
the fix.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rgt.errors import DiskBudgetError, RgtError, UsageError

SLACK_BYTES = 1 << 20  # rsync's temp file, the manifest, directory blocks
OWN_INODES = 2  # the staging directory and the manifest
DEST = "the pull destination"


@dataclass(frozen=True)
class Need:
    """What a pull still has to write: bytes, files, and the inodes of both plus its dirs."""

    bytes: int = 0
    files: int = 0
    inodes: int = 0

    def text(self) -> str:
        return f"{_size(self.bytes)} and {self.inodes} inodes"


def need_of(entries: Iterable[dict[str, Any]]) -> Need:
    """The bytes and inodes to copy ``entries`` (checked manifest entries) into a destination
    that does not hold them yet (an upper bound: directories that exist are counted too)."""
    listed = list(entries)
    dirs = {p.rsplit("/", 1)[0] for e in listed if "/" in (p := e["path"])}
    parents = {"/".join(d.split("/")[:i]) for d in dirs for i in range(1, d.count("/") + 2)}
    size = sum(int(e["bytes"]) for e in listed)
    return Need(size, len(listed), len(listed) + len(parents) + OWN_INODES)


def check_free_space(dest: Path, need: Need) -> None:
    """Refuse before copying when the destination's filesystem cannot hold what is left."""
    free, inodes = _free(dest)
    short_bytes = need.bytes + SLACK_BYTES > free
    short_inodes = inodes is not None and need.inodes > inodes
    if not (short_bytes or short_inodes):
        return
    mount = mount_of(dest)
    what = (
        f"{_size(need.bytes)} needed, {_size(free)} free"
        if short_bytes
        else f"{need.files} files needed ({need.inodes} inodes with their directories), "
        f"{inodes} inodes free"
    )
    raise DiskBudgetError(
        f"not enough space to pull into {dest}: {what} on {mount}",
        path=str(dest),
        mount=str(mount),
        need_bytes=need.bytes,
        free_bytes=free,
        free_inodes=inodes,
        fix=f"free {need.text()} on {mount}, or pull somewhere bigger with `--to DIR`",
    )


def local_error(exc: OSError, path: Path, need: Need = Need(), what: str = DEST) -> RgtError:
    """An OSError of the local side as an rgt error that names the path and the fix."""
    name = exc.filename if isinstance(exc.filename, str) else None
    where = f"{name!r} under {path}" if name and name != str(path) else str(path)
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        mount = mount_of(path)
        free, inodes = _free(path)
        left = f"{_size(free)} and {inodes if inodes is not None else 'unknown'} inodes free"
        kind = "quota is used up" if exc.errno == errno.EDQUOT else "disk is full"
        return DiskBudgetError(
            f"{what}'s {kind} ({mount}) while writing {where}: {need.text()} still needed, {left}",
            path=str(path),
            mount=str(mount),
            need_bytes=need.bytes,
            free_bytes=free,
            free_inodes=inodes,
            fix=f"free {need.text()} on {mount} and pull again (files already copied are "
            "kept)" + (", or pull somewhere bigger with `--to DIR`" if what == DEST else ""),
        )
    if exc.errno == errno.ENAMETOOLONG:
        return UsageError(
            f"the destination path is too long for this filesystem ({len(str(path))} "
            "characters, or one name over 255 bytes)",
            fix="pull into a shorter directory with `--to DIR`",
        )
    return UsageError(
        f"cannot write {what}: {where}: {exc.strerror or exc}",
        fix=f"check {path} (permissions, a read-only or failing disk), or choose a directory "
        "you can write with `--to DIR`",
    )


def mount_of(path: Path) -> Path:
    """The mount point holding ``path`` (the first existing ancestor's)."""
    here = Path(os.path.abspath(path))
    while not here.exists():
        here = here.parent
    here = Path(os.path.realpath(here))
    while not os.path.ismount(here):
        here = here.parent
    return here


def _free(path: Path) -> tuple[int, int | None]:
    """Free bytes and inodes (None where the filesystem reports no inodes) at ``path``."""
    try:
        info = os.statvfs(mount_of(path) if not os.path.exists(path) else path)
    except OSError:
        return 0, None
    return info.f_bavail * info.f_frsize, (info.f_favail if info.f_files else None)


def _size(n: int) -> str:
    if n < 1024:
        return f"{n} B"
    value = float(n)
    for unit in ("KiB", "MiB", "GiB"):
        value /= 1024
        if value < 1024:
            return f"{value:.1f} {unit}"
    return f"{value / 1024:.1f} TiB"
