"""status.json, events.jsonl and the webhook: everything the agent tells the outside world.

status.json is the current truth about the job and is only ever replaced atomically, so the
CLI reading it over ssh never sees a torn file. events.jsonl is the history, appended one line
per write. Secret values (given on stdin) are redacted from both and from the webhook: a log
line quoted as triage evidence may contain a token the job printed.

A full disk (ENOSPC, EDQUOT) or an I/O error never kills the agent: the state stays in memory
and the next write that succeeds carries it. The terminal state has a last resort when even an
atomic replace fails (no free inode or block for the temp file): the existing status.json is
overwritten in place with its compact form, which reuses the file's own blocks.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any, Dict, List, Optional

from rgt import _fs
from rgt.agent import _system, jobfiles
from rgt.agent.paths import JobPaths

REDACTED = "***"
NOTIFY_TIMEOUT_S = 5.0
# Events a phone should hear about when no laptop is open.
NOTIFY_KINDS = frozenset(
    [
        "retrying",
        "succeeded",
        "failed",
        "cancelled",
        "nan_loss",
        "log_stalled",
        "step_blocked",
        "ranks_hung",
        "loss_spike",
        "disk_nearly_full",
        "memory_near_limit",
        "gpu_idle",
    ]
)

STATUS_FIELDS = (
    "job_id",
    "state",
    "attempt",
    "pid",
    "agent_pid",
    "heartbeat",
    "started",
    "ended",
    "exit_code",
    "signal",
    "boot_id",
    "label",
    "reason",
    "host",
    "retries_left",
)


def log(message: str) -> None:
    """One line to the agent's own log (stderr is redirected to JOB_DIR/agent.log)."""
    try:
        sys.stderr.write("%s rgt-agent[%d]: %s\n" % (_system.now_iso(), os.getpid(), message))
        sys.stderr.flush()
    except (OSError, ValueError):
        pass  # the agent must outlive a closed stderr


def read_status(paths: JobPaths) -> Optional[Dict[str, Any]]:
    """status.json, or None when it is missing or cannot be believed (``jobfiles``)."""
    return jobfiles.read_status(paths.status, paths.job_id).doc


def previous_status(paths: JobPaths) -> Optional[Dict[str, Any]]:
    """What an agent starting on this job must continue from: status.json, or, when that is
    cut or garbled, the job's story rebuilt from events.jsonl (a corrupt file must not make
    an ended job run again, nor reset its retry budget)."""
    read = jobfiles.read_status(paths.status, paths.job_id)
    if read.problem is None:
        return read.doc
    log("%s; rebuilding the job's state from events.jsonl" % read.problem.message())
    raw, _problem = jobfiles.read_bytes(paths.events)
    events, _skipped = jobfiles.parse_events((raw or b"").decode("utf-8", "replace"))
    return jobfiles.rebuild_status(events, os.path.exists(paths.done))


def overwrite_in_place(path: str, data: bytes) -> None:
    """Rewrite an existing file without a temp file: no new inode, and truncation frees the
    file's blocks for the new bytes. Not atomic (a reader may see it cut, which the tolerant
    reader reports as such); only for the terminal status when nothing else can land."""
    fd = os.open(path, os.O_WRONLY | os.O_TRUNC)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


class JobRecorder(object):
    """Owns status.json and events.jsonl of one job for the lifetime of one agent."""

    def __init__(
        self, paths: JobPaths, secret_values: List[str], notify_url: Optional[str] = None
    ) -> None:
        self.paths = paths
        self.notify_url = notify_url
        self._secrets = sorted((v for v in secret_values if v), key=len, reverse=True)
        self.status = dict.fromkeys(STATUS_FIELDS)  # type: Dict[str, Any]
        self.status.update(job_id=paths.job_id, state="queued", attempt=0)
        self.status.update(agent_pid=os.getpid(), host=_system.hostname())
        self.status["boot_id"] = _system.boot_id()
        self.write_error = None  # type: Optional[str]
        self.status_landed = False  # the last status write reached the disk
        self._event_cut = False  # the last append failed, maybe half-written

    def adopt(self, previous: Dict[str, Any]) -> None:
        """Carry the counters of an earlier agent's run (resume after an interruption)."""
        for key in ("attempt", "started", "retries_left", "label", "reason"):
            if previous.get(key) is not None:  # a CLI-written "queued" file has no counters
                self.status[key] = previous[key]

    def update(self, **fields: Any) -> None:
        self.status.update(fields)
        self.status["heartbeat"] = _system.now_iso()
        doc = self.redact(self.status)
        self.status_landed = self._survive(_fs.atomic_write_json, self.paths.status, doc)

    def land(self) -> bool:
        """Write the status once more, falling back to an in-place overwrite of the existing
        file (the terminal state's last resort). True once it is on disk."""
        self.update()
        if self.status_landed or not os.path.exists(self.paths.status):
            return self.status_landed
        data = json.dumps(self.redact(self.status), sort_keys=True, separators=(",", ":"))
        self.status_landed = self._survive(overwrite_in_place, self.paths.status, data.encode())
        return self.status_landed

    def _survive(self, write: Any, path: str, payload: Any) -> bool:
        """A full disk (ENOSPC, EDQUOT) or an I/O error must not kill the supervisor: the job
        keeps running, the state stays in memory, and the next write that succeeds (after the
        user frees space) carries it. A dead agent would leave the job unsupervised."""
        try:
            write(path, payload)
        except OSError as exc:
            if self.write_error is None:
                log("cannot write %s (%s); the job keeps running, retrying" % (path, exc))
            self.write_error = str(exc)
            return False
        if self.write_error is not None:
            log("writing works again after: %s" % self.write_error)
            self.write_error = None
        return True

    def heartbeat(self) -> None:
        self.update()

    def event(
        self,
        kind: str,
        detail: Optional[Dict[str, Any]] = None,
        next_step: Optional[str] = None,
        severity: str = "info",
    ) -> Dict[str, Any]:
        """Append one event. ``severity`` is ``info``, ``warning`` (the user should look:
        a restart from zero, a job that wrote nothing) or ``error``."""
        record = {
            "time": _system.now_iso(),
            "job_id": self.paths.job_id,
            "kind": kind,
            "attempt": self.status.get("attempt"),
            "severity": severity,
            "detail": detail or {},
            "next": next_step,
        }
        record = dict(self.redact(record))
        line = json.dumps(record, sort_keys=True, ensure_ascii=False)
        # After a failed append the file may end in half a line: start on a fresh one so
        # only that half is lost (readers skip and count it), never this event too.
        line = "\n" + line if self._event_cut else line
        self._event_cut = not self._survive(_fs.append_line, self.paths.events, line)
        if kind in NOTIFY_KINDS and self.notify_url:
            self.notify(record)
        return record

    def notify(self, record: Dict[str, Any]) -> None:
        """POST the event in the webhook's format (``_webhook``); a dead hook never stops
        the job."""
        import urllib.request  # only an agent with a webhook pays for importing it

        from rgt.agent import _webhook

        try:
            request = _webhook.request(str(self.notify_url), record)
            with urllib.request.urlopen(request, timeout=NOTIFY_TIMEOUT_S) as response:
                response.read()
        except Exception as exc:  # a dead webhook must never stop the job
            problem = self.redact("%s: %s" % (type(exc).__name__, exc))  # the URL is a secret
            log("webhook POST failed (%s); continuing" % problem)

    def redact(self, obj: Any) -> Any:
        if isinstance(obj, str):
            for secret in self._secrets:
                obj = obj.replace(secret, REDACTED)
            return obj
        if isinstance(obj, dict):
            return {key: self.redact(value) for key, value in obj.items()}
        if isinstance(obj, (list, tuple)):
            return [self.redact(value) for value in obj]
        return obj
