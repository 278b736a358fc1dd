"""Facts about the machine that only the agent can read, and process-group control.

A rented machine tells you little about why a process died. Three readings are trustworthy:
the kernel boot id (it changes exactly when the host restarted), the cgroup ``oom_kill``
counter (it rises exactly when the kernel OOM killer fired inside our memory cgroup; a bare
``Killed`` in a log does not tell a preemption from an OOM kill, the counter does), and the
process group of the job (started with its own session so that one signal reaches the
trainer and every DataLoader worker it forked).
"""

from __future__ import annotations

import datetime
import os
import signal
import socket
import time
from typing import Callable, List, Optional

# The readings live in rgt.agent.probes (shared with `rgt audit` and the patrol); re-exported here.
from rgt.agent.probes.cgroup import oom_kill_count
from rgt.agent.probes.host import BOOT_ID_FILE, boot_id

__all__ = ["BOOT_ID_FILE", "boot_id", "oom_kill_count"]


def now_iso() -> str:
    """UTC time as ISO-8601 with a ``Z``: one format in every file the agent writes."""
    now = datetime.datetime.now(datetime.timezone.utc)
    return now.strftime("%Y-%m-%dT%H:%M:%S.") + "%03dZ" % (now.microsecond // 1000)


def hostname() -> str:
    return socket.gethostname()


def pid_alive(pid: Optional[int]) -> bool:
    if not pid or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, owned by someone else
    return not _is_zombie(pid)


def _is_zombie(pid: int) -> bool:
    try:
        with open("/proc/%d/stat" % pid, "r", encoding="utf-8") as handle:
            stat = handle.read()
    except OSError:
        return False
    return stat.rsplit(")", 1)[-1].split()[:1] == ["Z"]


def process_belongs_to_job(pid: int, job_dir: str) -> bool:
    """True if ``pid`` is a live process started by an agent for this job (after a pid reuse
    it is an unrelated process that must not be signalled)."""
    try:
        with open("/proc/%d/environ" % pid, "rb") as handle:
            environ = handle.read().split(b"\0")
    except OSError:
        return False
    marker = ("RGT_JOB_DIR=" + job_dir).encode("utf-8", "surrogateescape")
    return marker in environ


def env_float(name: str, default: float) -> float:
    try:
        return float(os.environ.get(name, default))
    except ValueError:
        return default


def group_alive(pgid: int) -> bool:
    """True while a non-zombie process of the group exists. Zombies are excluded: an
    orphaned worker may wait for a reaper that a container's PID 1 never runs."""
    if not os.path.isdir("/proc/self"):
        try:
            os.killpg(pgid, 0)
        except (ProcessLookupError, PermissionError):
            return False
        return True
    for name in os.listdir("/proc"):
        if name.isdigit() and _pgrp_if_running(int(name)) == pgid:
            return True
    return False


def _pgrp_if_running(pid: int) -> Optional[int]:
    try:
        with open("/proc/%d/stat" % pid, "r", encoding="utf-8", errors="replace") as handle:
            fields = handle.read().rsplit(")", 1)[-1].split()
    except OSError:
        return None
    if len(fields) < 3 or fields[0] in ("Z", "X"):
        return None
    return int(fields[2])


def signal_group(pgid: int, signum: int) -> bool:
    try:
        os.killpg(pgid, signum)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def terminate_group(
    pgid: int, grace_s: float, poll: Optional[Callable[[], object]] = None
) -> List[int]:
    """SIGTERM the whole group, then SIGKILL whatever is left after ``grace_s``.

    Returns the signals that were sent. Zombies still count as members until reaped, so the
    wait is bounded rather than open-ended.
    """
    sent = []  # type: List[int]
    if signal_group(pgid, signal.SIGTERM):
        sent.append(int(signal.SIGTERM))
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        if poll is not None:
            poll()  # reap our own child, or it stays a zombie member of the group
        if not group_alive(pgid):
            break
        time.sleep(0.05)
    if group_alive(pgid) and signal_group(pgid, signal.SIGKILL):
        sent.append(int(signal.SIGKILL))
    return sent
