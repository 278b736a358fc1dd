"""What the kernel says about OOM kills: the host's counter and its log lines.

The cgroup ``oom_kill`` counter (``rgt.agent.probes.cgroup``) is the best evidence: it rises exactly
when the OOM killer fired inside the job's memory cgroup. Two weaker readings back it up when
it cannot be read (cgroup v1 without ``oom_control``, an unusual mount):

``/proc/vmstat`` ``oom_kill``
    every OOM kill on the host (kernel >= 4.13); in a container this is the whole host's count,
    so it is used only when the cgroup's own counter is unreadable;
the kernel log (``/dev/kmsg``, else ``dmesg``)
    ``Out of memory: Killed process 1234 (python)`` names the victim's pid, so a rank the
    launcher reports as SIGKILLed can be matched to a line. Most containers may not read it
    (no CAP_SYSLOG); then there is simply no such evidence.
"""

from __future__ import annotations

import errno
import os
import re
import subprocess
from typing import List, Optional, Tuple

_KILLED = re.compile(r"(?:Out of memory|out of memory)[^:]*: Killed process (\d+)")
_KMSG_RECORD = 8192
MAX_RECORDS = 20000


def host_oom_count() -> Optional[int]:
    try:
        with open("/proc/vmstat", "r", encoding="ascii", errors="replace") as handle:
            for line in handle:
                if line.startswith("oom_kill "):
                    return int(line.split()[1])
    except (OSError, ValueError):
        return None
    return None


def uptime_s() -> Optional[float]:
    try:
        with open("/proc/uptime", "r", encoding="ascii") as handle:
            return float(handle.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def oom_kills(since_uptime_s: Optional[float]) -> List[Tuple[int, str]]:
    """(victim pid, kernel line) of every OOM kill logged since ``since_uptime_s`` seconds
    after boot; empty when the kernel log is unreadable."""
    found = []  # type: List[Tuple[int, str]]
    for seconds, text in _records():
        if since_uptime_s is not None and seconds is not None and seconds < since_uptime_s:
            continue
        match = _KILLED.search(text)
        if match:
            found.append((int(match.group(1)), text.strip()[:300]))
    return found


def _records() -> List[Tuple[Optional[float], str]]:
    records = _kmsg()
    return records if records is not None else _dmesg()


def _kmsg() -> Optional[List[Tuple[Optional[float], str]]]:
    """``/dev/kmsg`` read without blocking: one record per read, "prio,seq,usec,flags;text"."""
    try:
        fd = os.open("/dev/kmsg", os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return None
    records = []  # type: List[Tuple[Optional[float], str]]
    try:
        while len(records) < MAX_RECORDS:
            try:
                raw = os.read(fd, _KMSG_RECORD)
            except OSError as exc:
                if exc.errno == errno.EPIPE:  # overwritten while we read: skip ahead
                    continue
                break  # EAGAIN: the end of the buffer
            if not raw:
                break
            head, _, text = raw.decode("utf-8", "replace").partition(";")
            fields = head.split(",")
            usec = fields[2] if len(fields) > 2 and fields[2].isdigit() else None
            records.append((int(usec) / 1e6 if usec else None, text))
    finally:
        os.close(fd)
    return records


def _dmesg() -> List[Tuple[Optional[float], str]]:
    try:
        done = subprocess.run(["dmesg"], capture_output=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return []
    records = []  # type: List[Tuple[Optional[float], str]]
    for line in done.stdout.decode("utf-8", "replace").splitlines():
        stamp = re.match(r"\[\s*(\d+\.\d+)\]\s*(.*)", line)
        records.append((float(stamp.group(1)), stamp.group(2)) if stamp else (None, line))
    return records
