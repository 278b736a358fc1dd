"""The autostop files on the machine, and what ``patrol`` reports of them.

    <durable>/.rgt/autostop/
      policy.json        the armed policy (written by `rgt approve NAME --autostop`, at a terminal)
      state.json         the watcher's memory for this arming: idle clock, warnings given, the
                         checkpoint request, the last reason it did not fire (atomic writes)
      events.jsonl       append-only, the job events' shape with ``job_id`` "autostop"
      fired-<arm>.json   created once (O_EXCL) before the stop runs: an arming fires at most once,
                         whatever kills or restarts the watcher
      watcher.lock       flock held by the one live watcher (the kernel drops it on SIGKILL)
      watcher.log

The policy lives on the machine, so it acts with the laptop closed. Python 3.8, stdlib only.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from typing import Any, Dict, List, Optional

from rgt import _fs
from rgt.agent import _system

DIRNAME = "autostop"
POLICY_SCHEMA = "rgt.autostop/1"
EVENTS_SHOWN = 8
JOB_ID = "autostop"  # the ``job_id`` of the watcher's events, so readers of job events read them


class AutostopFiles(object):
    def __init__(self, root: str) -> None:
        self.root = root
        self.dir = os.path.join(root, DIRNAME)

    def _p(self, name: str) -> str:
        return os.path.join(self.dir, name)

    @property
    def policy(self) -> str:
        return self._p("policy.json")

    @property
    def state(self) -> str:
        return self._p("state.json")

    @property
    def events(self) -> str:
        return self._p("events.jsonl")

    @property
    def lock(self) -> str:
        return self._p("watcher.lock")

    @property
    def log(self) -> str:
        return self._p("watcher.log")

    @property
    def takeover(self) -> str:
        """Created by a newer arming's watcher: the running one exits at its next tick."""
        return self._p("takeover")

    def fired(self, arm_id: str) -> str:
        return self._p("fired-%s.json" % arm_id)


def read_policy(files: AutostopFiles) -> Optional[Dict[str, Any]]:
    try:
        doc = _fs.read_json(files.policy)
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict) or doc.get("schema") != POLICY_SCHEMA or not doc.get("arm_id"):
        return None
    return doc


def read_state(files: AutostopFiles, arm_id: str) -> Dict[str, Any]:
    """This arming's state; a state of an earlier arming is forgotten (fresh clocks)."""
    try:
        doc = _fs.read_json(files.state)
    except (OSError, ValueError):
        doc = None
    if not isinstance(doc, dict) or doc.get("arm_id") != arm_id:
        return {"arm_id": arm_id, "warned": []}
    return doc


def save_state(files: AutostopFiles, state: Dict[str, Any]) -> None:
    try:
        _fs.atomic_write_json(files.state, state)
    except OSError as exc:  # a full disk: the state is memory until it frees
        log(files, "cannot write state.json (%s)" % exc)


def fired_record(files: AutostopFiles, arm_id: str) -> Optional[Dict[str, Any]]:
    try:
        doc = _fs.read_json(files.fired(arm_id))
    except ValueError:
        return {"time": None, "damaged": True}  # the marker exists: it fired
    except OSError:
        return None
    return doc if isinstance(doc, dict) else {"time": None}


def claim_fire(files: AutostopFiles, arm_id: str, detail: Dict[str, Any]) -> bool:
    """Create the fired marker; False when it already exists (this arming fired before)."""
    try:
        fd = os.open(files.fired(arm_id), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        return False
    with os.fdopen(fd, "w") as handle:
        handle.write(json.dumps(detail, sort_keys=True) + "\n")
        handle.flush()
        os.fsync(handle.fileno())
    _fs.fsync_dir(files.dir)
    return True


def event_record(
    kind: str, detail: Dict[str, Any], next_step: Any, severity: str
) -> Dict[str, Any]:
    return {
        "time": _system.now_iso(),
        "job_id": JOB_ID,
        "kind": kind,
        "attempt": None,
        "severity": severity,
        "detail": detail,
        "next": next_step,
    }


def append_event(files: AutostopFiles, record: Dict[str, Any]) -> None:
    try:
        _fs.append_line(files.events, json.dumps(record, sort_keys=True, ensure_ascii=False))
    except OSError as exc:
        log(files, "cannot append an event (%s): %s" % (exc, record["kind"]))


def log(files: AutostopFiles, message: str) -> None:
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    with contextlib.suppress(OSError):
        _fs.append_line(files.log, "%s %s" % (stamp, message))


def lock_watcher(files: AutostopFiles, wait_s: float = 0.0) -> Optional[int]:
    """The one watcher's flock, held until the process exits; None when another holds it.
    ``wait_s`` > 0: ask the holder to hand over (``takeover``) and wait that long for it."""
    os.makedirs(files.dir, exist_ok=True)
    fd = os.open(files.lock, os.O_RDWR | os.O_CREAT, 0o644)
    deadline = time.monotonic() + wait_s
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except OSError:
            if time.monotonic() >= deadline:
                os.close(fd)
                return None
            _touch(files.takeover)
            time.sleep(0.1)
    with contextlib.suppress(OSError):
        os.remove(files.takeover)
    return fd


def _touch(path: str) -> None:
    with contextlib.suppress(OSError):
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o644))


def watcher_alive(files: AutostopFiles) -> bool:
    if not os.path.exists(files.lock):
        return False
    fd = lock_watcher(files)
    if fd is None:
        return True
    os.close(fd)
    return False


def spent(policy: Dict[str, Any], now: float) -> Optional[float]:
    """The money clock: what was spent when armed (the ledger's price × time) plus the price ×
    the hours since; None without a price."""
    money = policy.get("money") or {}
    price = money.get("price_per_hour")
    if price is None:
        return None
    hours = max(0.0, now - float(money.get("since_epoch") or now)) / 3600.0
    return round(float(money.get("spent_at_arm") or 0.0) + float(price) * hours, 4)


def time_to_cap_s(policy: Dict[str, Any], now: float) -> Optional[float]:
    budget = (policy.get("triggers") or {}).get("budget")
    price = (policy.get("money") or {}).get("price_per_hour")
    so_far = spent(policy, now)
    if not budget or not price or so_far is None:
        return None
    return round(max(0.0, (float(budget["amount"]) - so_far) / float(price) * 3600.0), 1)


def report(root: str) -> Dict[str, Any]:
    """What `rgt status`, `watch`, the UI and MCP show: the armed policy, the money so far, the
    time to the cap, the last reason autostop did not fire, and whether it fired."""
    files = AutostopFiles(root)
    policy = read_policy(files)
    if policy is None:
        return {"armed": False}
    now = time.time()
    state = read_state(files, str(policy["arm_id"]))
    return {
        "armed": True,
        "arm_id": policy["arm_id"],
        "armed_at": policy.get("armed_at"),
        "triggers": policy.get("triggers"),
        "stop": (policy.get("stop") or {}).get("command"),
        "currency": (policy.get("money") or {}).get("currency"),
        "spent": spent(policy, now),
        "time_to_cap_s": time_to_cap_s(policy, now),
        "last_refusal": state.get("last_refusal"),
        "fired": fired_record(files, str(policy["arm_id"])),
        "preemption": state.get("preemption"),
        "watcher_alive": watcher_alive(files),
        "watcher_pid": state.get("watcher_pid"),
        "events": tail_events(files, EVENTS_SHOWN),
    }


def tail_events(files: AutostopFiles, count: int) -> List[Dict[str, Any]]:
    """The last ``count`` events (the file's last 32 KiB; a cut line is skipped)."""
    try:
        with open(files.events, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            handle.seek(max(0, handle.tell() - 32 * 1024))
            lines = handle.read().decode("utf-8", "replace").splitlines()
    except OSError:
        return []
    found = []
    for line in lines[-count:]:
        try:
            doc = json.loads(line)
        except ValueError:
            continue
        if isinstance(doc, dict):
            found.append(doc)
    return found
