"""Bytes and inodes of the filesystem that holds a path.

``df -h`` alone lies by omission: a shared filesystem with a hard inode cap (AutoDL's data
disk, many NFS quotas) reports "No space left on device" at 34 % bytes used because every
inode is taken. Both numbers come from one ``statvfs`` call, so a reading is never half old.
"""

from __future__ import annotations

import os
from typing import Any

MOUNTINFO = "/proc/self/mountinfo"


def usage(path: str) -> dict[str, Any]:
    """Bytes and inodes of the filesystem holding ``path`` (the nearest existing parent)."""
    target = _existing(path)
    reading = {"path": path, "mount": None, "fstype": None}  # type: dict[str, Any]
    try:
        st = os.statvfs(target)
    except OSError as exc:
        reading["error"] = "statvfs failed: %s" % exc.strerror
        return reading
    total, free = st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize
    used = total - st.f_bfree * st.f_frsize
    reading.update(
        bytes_total=total,
        bytes_free=free,
        bytes_used=used,
        bytes_pct=_pct(used, used + free),
        inodes_total=st.f_files,
        inodes_free=st.f_favail,
        inodes_used=st.f_files - st.f_ffree,
        inodes_pct=_pct(st.f_files - st.f_ffree, st.f_files - st.f_ffree + st.f_favail),
    )
    reading.update(mount_of(target))
    return reading


def _pct(used: int, capacity: int) -> float | None:
    """Percent used the way ``df`` computes it (used over used+available, so the blocks
    reserved for root count as full: that is what an unprivileged job runs into)."""
    if capacity <= 0:
        return None  # pseudo filesystems without inode accounting report 0 files
    return round(100.0 * used / capacity, 1)


def _existing(path: str) -> str:
    current = os.path.abspath(path)
    while not os.path.exists(current) and os.path.dirname(current) != current:
        current = os.path.dirname(current)
    return current


def mount_of(path: str, mountinfo: str = MOUNTINFO) -> dict[str, Any]:
    """The mount point and filesystem type holding ``path`` (longest matching mount)."""
    best = {"mount": None, "fstype": None}  # type: dict[str, Any]
    real = os.path.realpath(path)
    try:
        with open(mountinfo, encoding="utf-8", errors="replace") as handle:
            lines = handle.read().splitlines()
    except OSError:
        return best
    for line in lines:
        left, _, right = line.partition(" - ")
        fields = left.split()
        if len(fields) < 5 or not right:
            continue
        point = _unescape(fields[4])
        inside = real == point or real.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best["mount"] or ""):
            best = {"mount": point, "fstype": right.split()[0]}
    return best


def _unescape(field: str) -> str:
    """mountinfo escapes space, tab, newline and backslash as octal (``\\040``)."""
    for code, char in (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"), ("\\134", "\\")):
        field = field.replace(code, char)
    return field


def usage_by_mount(paths: list[str]) -> list[dict[str, Any]]:
    """One reading per distinct filesystem among ``paths`` (the job dir, ckpt, outputs…)."""
    seen = set()  # type: set[Any]
    out = []
    for path in paths:
        reading = usage(path)
        key = reading.get("mount") or path
        if key in seen:
            continue
        seen.add(key)
        out.append(reading)
    return out
