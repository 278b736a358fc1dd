"""cgroup v1 and v2: memory used and allowed, the OOM-kill counter, the CPU quota.

On a rented container ``free``, ``top`` and ``nproc`` describe the whole physical host (a
noisy neighbour at load 400 looks like your job dying); the cgroup files describe what *your*
job may use. The ``oom_kill`` counter rises exactly when the kernel OOM killer fired inside
the cgroup, which a bare "Killed" in a log cannot tell apart from a preemption.

Every reader takes ``mount`` (default ``/sys/fs/cgroup``) and ``proc_cgroup`` so tests can
point it at a real directory laid out like a cgroup tree.
"""

from __future__ import annotations

import os
from typing import Any

CGROUP_MOUNT = "/sys/fs/cgroup"
# cgroup v1 reports "no limit" as a huge page-aligned number rather than "max".
V1_UNLIMITED = 1 << 60


def _proc_cgroup(pid: int | None) -> str:
    return "/proc/%s/cgroup" % (pid if pid else "self")


def _lines(path: str) -> list[str]:
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read().splitlines()
    except OSError:
        return []


def _dirs(pid: int | None, mount: str, proc_cgroup: str | None) -> tuple[list[str], list[str]]:
    """Candidate directories of this process's cgroup: (v2 dirs, v1 memory dirs). Inside a
    container the cgroup namespace may hide the path, so the mount root is tried last."""
    v2, v1 = [], []  # type: list[str], list[str]
    for line in _lines(proc_cgroup or _proc_cgroup(pid)):
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        rel = parts[2].strip().lstrip("/")
        if parts[0] == "0" and parts[1] == "":
            v2 += [os.path.join(mount, rel), os.path.join(mount, "unified", rel)]
        elif "memory" in parts[1].split(","):
            v1.append(os.path.join(mount, "memory", rel))
    return [*v2, mount], [*v1, os.path.join(mount, "memory")]


def _read_int(path: str) -> int | None:
    lines = _lines(path)
    if not lines:
        return None
    value = lines[0].strip()
    if value == "max":
        return -1
    return int(value) if value.isdigit() else None


def _keyed(path: str, key: str) -> int | None:
    for line in _lines(path):
        name, _, value = line.partition(" ")
        if name == key and value.strip().isdigit():
            return int(value.strip())
    return None


def oom_kill_count(
    pid: int | None = None, mount: str = CGROUP_MOUNT, proc_cgroup: str | None = None
) -> int | None:
    """The cgroup ``oom_kill`` counter of ``pid`` (default: this process); None if unreadable."""
    v2, v1 = _dirs(pid, mount, proc_cgroup)
    for directory in v2:
        value = _keyed(os.path.join(directory, "memory.events"), "oom_kill")
        if value is not None:
            return value
    for directory in v1:
        value = _keyed(os.path.join(directory, "memory.oom_control"), "oom_kill")
        if value is not None:
            return value
    return None


def memory(
    pid: int | None = None, mount: str = CGROUP_MOUNT, proc_cgroup: str | None = None
) -> dict[str, Any]:
    """Memory use and limit of the cgroup of ``pid``; ``limit_bytes`` None means unlimited."""
    v2, v1 = _dirs(pid, mount, proc_cgroup)
    reading: dict[str, Any] = {"version": None, "current_bytes": None, "limit_bytes": None}
    for directory in v2:
        current = _read_int(os.path.join(directory, "memory.current"))
        if current is not None:
            limit = _read_int(os.path.join(directory, "memory.max"))
            reading.update(version=2, current_bytes=current, limit_bytes=_limit(limit))
            break
    else:
        for directory in v1:
            current = _read_int(os.path.join(directory, "memory.usage_in_bytes"))
            if current is not None:
                limit = _read_int(os.path.join(directory, "memory.limit_in_bytes"))
                reading.update(version=1, current_bytes=current, limit_bytes=_limit(limit))
                break
    reading["oom_kill"] = oom_kill_count(pid, mount, proc_cgroup)
    reading["pct"] = None
    if reading["limit_bytes"] and reading["current_bytes"] is not None:
        reading["pct"] = round(100.0 * reading["current_bytes"] / reading["limit_bytes"], 1)
    return reading


def _limit(value: int | None) -> int | None:
    if value is None or value < 0 or value >= V1_UNLIMITED:
        return None
    return value


def cpu_quota(mount: str = CGROUP_MOUNT, proc_cgroup: str | None = None) -> float | None:
    """CPUs this cgroup may use (quota / period), None when unlimited. Thread pools sized
    from ``nproc`` on a 12-vCPU slice of a 128-core host thrash (OMP_NUM_THREADS)."""
    for line in _lines(proc_cgroup or _proc_cgroup(None)):
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        rel = parts[2].strip().lstrip("/")
        if parts[0] == "0" and parts[1] == "":
            found = _cpu_max(os.path.join(mount, rel, "cpu.max"))
        elif "cpu" in parts[1].split(","):
            found = _cfs(os.path.join(mount, "cpu,cpuacct", rel), os.path.join(mount, "cpu", rel))
        else:
            continue
        if found is not None:
            return found
    return _cpu_max(os.path.join(mount, "cpu.max"))


def _cpu_max(path: str) -> float | None:
    fields = (_lines(path) or [""])[0].split()
    if len(fields) == 2 and fields[0].isdigit() and fields[1].isdigit() and int(fields[1]):
        return round(int(fields[0]) / int(fields[1]), 2)
    return None


def _cfs(*dirs: str) -> float | None:
    for directory in dirs:
        quota = _read_int(os.path.join(directory, "cpu.cfs_quota_us"))
        period = _read_int(os.path.join(directory, "cpu.cfs_period_us"))
        if quota is not None and period:
            return round(quota / period, 2) if quota > 0 else None
    return None
