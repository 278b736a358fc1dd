"""A job's status as a reader on the machine sees it: status.json through the tolerant reader
(``jobfiles``), plus what only the machine knows: is the agent alive (its lock held by a live
process), the boot id and the clock now, how old the spec is.

The lock (``agent.lock``, an exclusive flock) is what makes one job have one agent: the kernel
drops it when the agent dies, even on SIGKILL, and children never inherit it.
"""

from __future__ import annotations

import fcntl
import os
import time
from typing import Any, Dict, Optional

from rgt.agent import _system, jobfiles
from rgt.agent.paths import JobPaths

LOCK_NAME = "agent.lock"


def try_lock(job_dir: str) -> Optional[int]:
    """Exclusive flock on agent.lock, held until this process exits (the kernel drops it even
    on SIGKILL, so a dead agent never blocks its successor). None if another holder exists."""
    fd = os.open(os.path.join(job_dir, LOCK_NAME), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


def lock_held(job_dir: str) -> bool:
    if not os.path.exists(os.path.join(job_dir, LOCK_NAME)):
        return False
    fd = try_lock(job_dir)
    if fd is None:
        return True
    os.close(fd)  # closing drops our probe lock
    return False


def status_doc(job_dir: str) -> Dict[str, Any]:
    """status.json plus what only a reader on the machine knows: is the agent alive (pid and
    lock), the boot id and the time now (a different boot id than the status's means the
    host restarted), and whether status.json is ``ok``, ``missing`` or ``corrupt``.

    Without a status.json to believe, ``state`` is only what the machine proves (``_derive``);
    a cut file is never read as a state, and ``problem`` names it with its fix."""
    paths = JobPaths(job_dir, os.path.basename(job_dir))
    read = jobfiles.read_status(paths.status, paths.job_id)
    alive = agent_alive(job_dir, (read.doc or {}).get("agent_pid"), paths.agent_pid)
    if not alive:
        # The agent may have recorded its end and exited between the read and the probe: the
        # first read would then be a live state of a dead agent ("lost"). Once it is dead it
        # writes nothing more, so this second read is its last word.
        read = jobfiles.read_status(paths.status, paths.job_id)
    doc = {"job_id": paths.job_id, "exists": True}  # type: Dict[str, Any]
    if read.doc is not None:
        doc.update(read.doc, exists=True, status_file="ok")
    doc["agent_alive"] = alive
    if read.doc is None:
        _derive(doc, paths, read.problem)
    doc["boot_id_now"] = _system.boot_id()
    doc["now"] = _system.now_iso()
    doc["done"] = os.path.exists(paths.done)
    # Seconds since the launch last wrote: the spec's age, or the directory's when the launch
    # was cut before the spec was written (so such a job, too, is seen as never started).
    doc["spec_age_s"] = _age_s(paths.spec) if os.path.exists(paths.spec) else _age_s(job_dir)
    return doc


def _derive(doc: Dict[str, Any], paths: JobPaths, problem: Optional[jobfiles.FileProblem]) -> None:
    """No status.json to believe: the end that events.jsonl or DONE prove (``state_source``),
    else ``running`` while an agent holds the job, else no state at all. A missing file is
    legal (``queued``) until something shows that an agent ran the job."""
    raw, _unreadable = jobfiles.read_bytes(paths.events)
    events, _skipped = jobfiles.parse_events((raw or b"").decode("utf-8", "replace"))
    end = jobfiles.proven_end(events, os.path.exists(paths.done))
    doc["status_file"] = "missing" if problem is None else "corrupt"
    if problem is None and end is None and (doc["agent_alive"] or not events):
        doc["state"] = "running" if doc["agent_alive"] else "queued"
        return
    if problem is None:
        problem = jobfiles.status_missing(paths.status, paths.job_id)
    if end is not None:
        doc.update(end)
        problem = jobfiles.ended_problem(problem, end, paths.job_id)
    elif doc["agent_alive"]:
        doc.update(state="running", state_source="agent_alive")
    doc["problem"] = problem.to_json()


def agent_alive(job_dir: str, status_pid: Any, pid_file: str) -> bool:
    """The lock is held and its holder is a live process. The holder is read from
    /proc/locks, so an agent that could not write status.json or agent.pid (a full disk)
    still counts as alive; the pids it recorded are the fallback off Linux."""
    if not lock_held(job_dir):
        return False
    pids = [_lock_holder(os.path.join(job_dir, LOCK_NAME)), _read_pid(pid_file), status_pid]
    return any(_system.pid_alive(p) for p in pids if isinstance(p, int))


def _lock_holder(lock_path: str) -> Optional[int]:
    try:
        inode = os.stat(lock_path).st_ino
        with open("/proc/locks", "r", encoding="ascii") as handle:
            lines = handle.read().splitlines()
    except (OSError, ValueError):
        return None
    for fields in (line.split() for line in lines):
        # "1: FLOCK  ADVISORY  WRITE 4242 08:01:1234 0 EOF"
        if len(fields) > 5 and fields[1] == "FLOCK" and fields[5].rsplit(":", 1)[-1] == str(inode):
            return int(fields[4]) if fields[4].isdigit() else None
    return None


def _age_s(path: str) -> Optional[float]:
    try:
        return round(time.time() - os.stat(path).st_mtime, 1)
    except OSError:
        return None


def _read_pid(path: str) -> Optional[int]:
    try:
        with open(path, "r", encoding="ascii") as handle:
            return int(handle.read().strip())
    except (OSError, ValueError):
        return None
