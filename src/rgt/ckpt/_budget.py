"""The disk budget check that runs before a checkpoint is written.

A full disk is the classic way to lose a run: ``torch.save`` writes straight to its target, the
write dies half way, and the only checkpoint left is truncated ("PytorchStreamReader failed
reading zip archive"). Rented machines add a second trap: small system disks and network volumes
with an inode cap (AutoDL's data disk, many NFS quotas), where ``df -h`` shows free space while
``df -i`` is at 100 %. So the check looks at free bytes *and* free inodes of the mount that
holds the checkpoint directory, before anything is written, and names the mount in its error.
"""

from __future__ import annotations

import errno
import os

from rgt.errors import DiskBudgetError

# Headroom for the commit record, directory blocks and filesystem metadata.
METADATA_BYTES = 64 * 1024
# A save creates the data file and the commit record before retention frees anything.
INODES_PER_SAVE = 2
# Errors that mean "the disk (or the user's quota, or a file size limit) is full".
FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})


def mount_point(path: str) -> str:
    """The mount point holding ``path``: walk up while the parent is on the same device."""
    current = os.path.realpath(path)
    device = os.stat(current).st_dev
    while current != os.path.dirname(current):
        parent = os.path.dirname(current)
        if os.stat(parent).st_dev != device:
            break
        current = parent
    return current


def check_budget(directory: str, need_bytes: int) -> None:
    """Raise ``DiskBudgetError`` unless ``directory``'s mount has room for one more save."""
    stats = os.statvfs(directory)
    free_bytes = stats.f_bavail * stats.f_frsize
    # Filesystems without an inode table (btrfs, some FUSE mounts) report f_files == 0.
    free_inodes = stats.f_favail if stats.f_files else None
    need = need_bytes + METADATA_BYTES
    short_of_inodes = free_inodes is not None and free_inodes < INODES_PER_SAVE
    if free_bytes >= need and not short_of_inodes:
        return
    what = f"{INODES_PER_SAVE} inodes" if short_of_inodes else f"{_size(need)}"
    raise DiskBudgetError(
        f"checkpoint not written: {what} needed on mount {mount_point(directory)} "
        f"(free: {_size(free_bytes)}, {_inodes(free_inodes)}); the previous checkpoint is intact",
        path=directory,
        mount=mount_point(directory),
        need_bytes=need,
        free_bytes=free_bytes,
        free_inodes=free_inodes,
        fix=budget_fix(),
    )


def check_room(directory: str, need_bytes: int, what: str, fix: str) -> None:
    """Raise ``DiskBudgetError`` unless ``directory``'s mount has ``need_bytes`` free for
    ``what`` (files other than a checkpoint save, such as a resume folder)."""
    stats = os.statvfs(directory)
    free_bytes = stats.f_bavail * stats.f_frsize
    need = need_bytes + METADATA_BYTES
    if free_bytes >= need:
        return
    mount = mount_point(directory)
    raise DiskBudgetError(
        f"{what} not written: {_size(need)} needed on mount {mount} (free: {_size(free_bytes)})",
        path=directory,
        mount=mount,
        need_bytes=need,
        free_bytes=free_bytes,
        free_inodes=stats.f_favail if stats.f_files else None,
        fix=fix,
    )


def full_disk_error(directory: str, need_bytes: int, exc: OSError) -> DiskBudgetError:
    """The error for a write that hit ENOSPC/EDQUOT/EFBIG after the budget check passed."""
    stats = os.statvfs(directory)
    mount = mount_point(directory)
    return DiskBudgetError(
        f"checkpoint write failed on mount {mount} ({os.strerror(exc.errno or 0)}); "
        "the partial file was removed and the previous checkpoint is intact",
        path=directory,
        mount=mount,
        need_bytes=need_bytes,
        free_bytes=stats.f_bavail * stats.f_frsize,
        free_inodes=stats.f_favail if stats.f_files else None,
        fix=budget_fix(),
    )


def budget_fix() -> str:
    return (
        "free space on that mount (prune older checkpoints or other files there), lower "
        "keep_last, or ask for a bigger disk; rgt never shrinks the experiment for you"
    )


def _size(nbytes: int) -> str:
    value = float(nbytes)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.1f} {unit}" if unit != "B" else f"{nbytes} B"
        value /= 1024
    return f"{nbytes} B"


def _inodes(free_inodes: int | None) -> str:
    return "inodes not limited" if free_inodes is None else f"{free_inodes} inodes"
