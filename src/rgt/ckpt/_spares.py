"""Recycled shard files: a rotated-out shard is kept as a spare and the next save writes over it.

Writing a new file through the page cache costs more than the copy: every page of the file is a
freshly allocated page-cache page (zeroed, charged, put on the LRU, and, on a VM whose host
lazily backs guest memory or takes freed pages back, faulted in by the host). Measured on the
2-core VM, a 264 MB buffered write and fsync: a new file 0.8-2.8 s and 0.4-1.7 CPU-seconds; the
same bytes over a recycled file whose pages are still cached 0.13-0.15 s and 0.04-0.06
CPU-seconds, about what ``O_DIRECT`` costs. Recycling also keeps the checkpoint's page-cache
footprint to the files it keeps: a new file per save makes the kernel evict something else (the
data set's pages) to cache it.

So ``_shards.remove`` renames the data files of a step it deletes to ``.tmp-spare-*.part`` in
the checkpoint directory (an in-flight name: every reader of checkpoint folders, pull and the
agent ignore those), and a rank's next save renames one to its temp name and overwrites it. A
file someone still has open (a pull copying an old step) is never recycled: that reader must
keep the bytes it started on, as it does when the file is unlinked. The check is a write
lease, which the kernel grants only when no other descriptor for the file is open. Spares hold
disk space (one shard per rank) until the next save reuses it; a save whose disk-budget check
fails drops them and checks again, so the budget is what it was without them.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time

PREFIX, SUFFIX = ".tmp-spare-", ".part"


def keep(path: str, directory: str, limit: int) -> None:
    """Move the data file ``path`` into ``directory``'s spares, or delete it when ``limit``
    spares are already waiting (one per rank is all the next save can use)."""
    if len(_spares(directory)) < limit:
        spare = os.path.join(directory, f"{PREFIX}{time.time_ns():x}{os.getpid():x}{SUFFIX}")
        with contextlib.suppress(OSError):
            os.rename(path, spare)
            return
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


def take(directory: str, temp: str) -> bool:
    """Rename a spare of ``directory`` to ``temp`` if one is free: True when ``temp`` is now a
    recycled file no other process has open (the caller overwrites and truncates it)."""
    for spare in _spares(directory):
        try:
            os.rename(spare, temp)  # atomic: of two ranks after one spare, one gets it
        except OSError:
            continue
        if _unshared(temp):
            return True
        with contextlib.suppress(OSError):
            os.unlink(temp)  # a reader has it open: it keeps its bytes, we start afresh
    return False


def drop(directory: str) -> bool:
    """Delete ``directory``'s spares (the disk is short: the space is the save's, as it was
    before spares); whether there were any."""
    found = _spares(directory)
    for spare in found:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(spare)
    return bool(found)


def _spares(directory: str) -> list[str]:
    try:
        names = os.listdir(directory)
    except OSError:
        return []
    return [
        os.path.join(directory, n) for n in names if n.startswith(PREFIX) and n.endswith(SUFFIX)
    ]


def _unshared(path: str) -> bool:
    """Whether no other open descriptor refers to ``path`` (a write lease is granted only
    then); False where leases are not supported (NFS, some FUSE): no recycling there."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_WRLCK)
        fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_UNLCK)
        return True
    except OSError:  # EAGAIN: open elsewhere; EINVAL/ENOLCK/EACCES: no leases here
        return False
    finally:
        os.close(fd)
