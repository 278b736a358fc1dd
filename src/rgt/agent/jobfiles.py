"""The tolerant reader of a job's state files: status.json, manifest.json, events.jsonl.

The agent (on the machine) and the CLI read these files through this one module. Atomic
writes protect a reader from a torn file, not from a filesystem that lost a file's tail (a
full disk, a crashed filesystem, a hand edit), so every read ends in exactly one of:

- the document (checked field by field, so a wrong type is caught here, not three calls later);
- *missing*: the file does not exist, a legal state (no agent has written it yet);
- a ``FileProblem`` naming the path, what is wrong with it and the fix.

A problem is never turned into a different state, never raises and never waits. Bad lines of
events.jsonl are skipped and counted. ``heartbeat_lost`` is the one rule, used by ``watch``,
``status`` and their JSON, for "this job's agent is gone".

Python 3.8 syntax and stdlib only: the agent bundles this module.
"""

from __future__ import annotations

import datetime
import errno
import json
from typing import Any, Dict, List, NamedTuple, Optional, Tuple

STATES = ("queued", "running", "retrying", "succeeded", "failed", "cancelled")
TERMINAL = ("succeeded", "failed", "cancelled")
LIVE_STATES = ("running", "retrying")
# The write errors that mean "the disk cannot take this" (label disk_full), not a bug.
DISK_ERRNOS = frozenset([errno.ENOSPC, errno.EDQUOT, errno.EIO])

FIX_STATUS = (
    "status.json is rewritten by the job's agent at its next heartbeat; if no agent runs, "
    "`rgt resume {job}` starts one, which rebuilds the file from events.jsonl"
)
FIX_MANIFEST = (
    "manifest.json is written once when the job ends: free space on the machine, then "
    "`rgt resume {job}` lets the agent write it again (or `rgt logs {job}` to see why it ended)"
)
FIX_JOB_DIR = (
    "the job's files were deleted or the disk was replaced: check the machine's durable root "
    "(`rgt status`); results not pulled before are lost, `rgt run` launches the job again"
)
FIX_STATUS_ENDED = (
    "the job has ended ({state}, as {source} on the machine records), so no agent will "
    "rewrite status.json and none is needed: its results are pulled as usual (`rgt pull {job}`)"
)
NEXT_RESUME = (
    "the job is not being supervised: `rgt resume {job}` starts its agent again (the next "
    "attempt runs the resume form from the newest checkpoint, or restarts from zero with a "
    "warning when there is none); `rgt logs {job}` shows where it stopped"
)


class FileProblem(NamedTuple):
    """A state file that exists but cannot be believed (or a job dir that is gone)."""

    kind: str  # "corrupt" | "unreadable" | "missing" | "job_dir_missing"
    path: str
    detail: str
    fix: str

    def to_json(self) -> Dict[str, str]:
        return dict(self._asdict())

    def message(self) -> str:
        return "%s: %s" % (self.path, self.detail)


class DocRead(NamedTuple):
    doc: Optional[Dict[str, Any]]  # None: missing or a problem
    problem: Optional[FileProblem]


def job_dir_missing(path: str) -> FileProblem:
    return FileProblem("job_dir_missing", path, "job directory missing on the machine", FIX_JOB_DIR)


def status_missing(path: str, job_id: str) -> FileProblem:
    """status.json is gone although the job's other files show that an agent ran it."""
    detail = "the file is missing, yet events.jsonl or DONE show that the job ran"
    return FileProblem("missing", path, detail, FIX_STATUS.format(job=job_id))


def parse_doc(raw: Optional[bytes], path: str, fix: str) -> DocRead:
    """One JSON object from ``raw`` (None: the file does not exist)."""
    if raw is None:
        return DocRead(None, None)
    if not raw.strip():
        return DocRead(None, FileProblem("corrupt", path, "the file is empty (0 bytes)", fix))
    try:
        doc = json.loads(raw.decode("utf-8"))
    except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError
        detail = "the file is cut or garbled (%d bytes, %s)" % (len(raw), exc)
        return DocRead(None, FileProblem("corrupt", path, detail, fix))
    if not isinstance(doc, dict):
        detail = "holds a JSON %s, not an object" % type(doc).__name__
        return DocRead(None, FileProblem("corrupt", path, detail, fix))
    return DocRead(doc, None)


def read_bytes(path: str) -> Tuple[Optional[bytes], Optional[FileProblem]]:
    try:
        with open(path, "rb") as handle:
            return handle.read(), None
    except FileNotFoundError:
        return None, None
    except OSError as exc:
        detail = "cannot be read (%s)" % (exc.strerror or exc)
        return None, FileProblem("unreadable", path, detail, "check the file's permissions")


def parse_status(raw: Optional[bytes], path: str, job_id: str) -> DocRead:
    read = parse_doc(raw, path, FIX_STATUS.format(job=job_id))
    if read.doc is None:
        return read
    bad = _status_field_problem(read.doc)
    if bad:
        return DocRead(None, FileProblem("corrupt", path, bad, FIX_STATUS.format(job=job_id)))
    return read


def _status_field_problem(doc: Dict[str, Any]) -> Optional[str]:
    if doc.get("state") not in STATES:
        return "field 'state' is %r, not one of %s" % (doc.get("state"), ", ".join(STATES))
    for key in ("attempt", "pid", "agent_pid", "exit_code", "retries_left"):
        value = doc.get(key)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
            return "field %r is %r, not an integer" % (key, value)
    for key in ("heartbeat", "started", "ended", "label", "reason", "boot_id"):
        if doc.get(key) is not None and not isinstance(doc[key], str):
            return "field %r is %r, not a string" % (key, doc[key])
    return None


def read_status(path: str, job_id: str) -> DocRead:
    raw, problem = read_bytes(path)
    return DocRead(None, problem) if problem else parse_status(raw, path, job_id)


def parse_manifest(raw: Optional[bytes], path: str, job_id: str) -> DocRead:
    read = parse_doc(raw, path, FIX_MANIFEST.format(job=job_id))
    if read.doc is None:
        return read
    files = read.doc.get("files")
    bad = not isinstance(files, list) or not all(_manifest_entry(e) for e in files)
    if bad:
        detail = "field 'files' is not a list of {path, bytes, sha256} entries"
        return DocRead(None, FileProblem("corrupt", path, detail, FIX_MANIFEST.format(job=job_id)))
    return read


def _manifest_entry(entry: Any) -> bool:
    return (
        isinstance(entry, dict)
        and isinstance(entry.get("path"), str)
        and isinstance(entry.get("bytes"), int)
        and isinstance(entry.get("sha256"), str)
    )


def parse_events(text: str) -> Tuple[List[Dict[str, Any]], int]:
    """(events, lines skipped): a line that is not a JSON object with a string ``kind`` (cut
    by a full disk, being appended right now, written by something else) is skipped."""
    events, skipped = [], 0
    for line in text.splitlines():
        if not line.strip():
            continue
        try:
            event = json.loads(line)
        except ValueError:
            skipped += 1
            continue
        if isinstance(event, dict) and isinstance(event.get("kind"), str):
            events.append(event)
        else:
            skipped += 1
    return events, skipped


def rebuild_status(events: List[Dict[str, Any]], done: bool) -> Optional[Dict[str, Any]]:
    """What events.jsonl says about the job, for an agent that found status.json corrupt:
    its counters, and its end if it ended. None when no attempt ever started."""
    attempts = [e["attempt"] for e in events if isinstance(e.get("attempt"), int)]
    started = [e for e in events if e["kind"] == "attempt_started"]
    if not started and not done:
        return None
    status = {"state": "running", "attempt": max(attempts or [0])}  # type: Dict[str, Any]
    status.update(rebuilt=True, started=started[0].get("time") if started else None)
    for event in events:
        detail = _detail(event)
        if event["kind"] == "retrying" and isinstance(detail.get("retries_left"), int):
            status["retries_left"] = detail["retries_left"]
        if event["kind"] in TERMINAL:
            status.update(state=event["kind"], ended=event.get("time"))
            status.update(label=detail.get("label"), reason=detail.get("reason"))
    if done:
        status["state"] = "succeeded"
    return status


def proven_end(events: List[Dict[str, Any]], done: bool) -> Optional[Dict[str, Any]]:
    """The end that the job's other files prove, for a reader whose status.json is missing or
    cannot be believed: the last terminal event (no attempt started after it), else DONE
    (written only on success, after the manifest). None: nothing proves that the job ended."""
    end = None  # type: Optional[Dict[str, Any]]
    for event in events:
        if event["kind"] in TERMINAL:
            end = event
        elif event["kind"] == "attempt_started":
            end = None
    attempts = [e["attempt"] for e in events if type(e.get("attempt")) is int]  # not bool
    proven = {"attempt": max(attempts)} if attempts else {}  # type: Dict[str, Any]
    if end is not None:
        detail = _detail(end)
        proven.update(state=end["kind"], state_source="events.jsonl", ended=_text(end.get("time")))
        proven.update(label=_text(detail.get("label")), reason=_text(detail.get("reason")))
        return proven
    if done:
        proven.update(state="succeeded", state_source="DONE", reason="DONE marker present")
        return proven
    return None


def ended_problem(problem: FileProblem, end: Dict[str, Any], job_id: str) -> FileProblem:
    """The damaged status.json of an ended job: its fix never sends the user to resume it."""
    fix = FIX_STATUS_ENDED.format(state=end["state"], source=end["state_source"], job=job_id)
    return problem._replace(fix=fix)


def _text(value: Any) -> Optional[str]:
    return value if isinstance(value, str) else None


def _detail(event: Dict[str, Any]) -> Dict[str, Any]:
    detail = event.get("detail")
    return detail if isinstance(detail, dict) else {}


def parse_time(stamp: Any) -> Optional[datetime.datetime]:
    if not isinstance(stamp, str) or not stamp:
        return None
    for fmt in ("%Y-%m-%dT%H:%M:%S.%fZ", "%Y-%m-%dT%H:%M:%SZ"):
        try:
            return datetime.datetime.strptime(stamp, fmt).replace(tzinfo=datetime.timezone.utc)
        except ValueError:
            continue
    return None


def age_s(stamp: Any, now: Any) -> Optional[float]:
    then, at = parse_time(stamp), parse_time(now)
    if then is None or at is None:
        return None
    return round((at - then).total_seconds(), 1)


def heartbeat_lost(doc: Dict[str, Any], now: Any, limit_s: float) -> Optional[Dict[str, Any]]:
    """The one rule for "this job's agent is gone", or None while it is not.

    ``doc`` is a job's status as the machine reports it (the agent's ``status`` or one job of
    ``patrol``): state, agent_alive, heartbeat, boot ids, status_file. ``now`` is the machine's
    clock (a skewed laptop clock cannot fake a lost heartbeat). A live job is lost when its
    agent's pid and lock are gone, its host restarted, or its heartbeat is older than
    ``limit_s``; a job whose status.json is unreadable, or was never written, is lost when no
    agent runs for it."""
    if doc.get("exists") is False or doc.get("state") in TERMINAL:
        return None
    age = age_s(doc.get("heartbeat"), now)
    why = _why_lost(doc, age, limit_s)
    if why is None:
        return None
    job = str(doc.get("job_id") or "JOB")
    alive = doc.get("agent_alive")
    return {"why": why, "heartbeat_age_s": age, "agent_alive": alive, "next": next_resume(job)}


def _why_lost(doc: Dict[str, Any], age: Optional[float], limit_s: float) -> Optional[str]:
    alive = doc.get("agent_alive")
    if doc.get("status_file") == "corrupt":
        return "status.json is unreadable and no agent runs for the job" if alive is False else None
    if doc.get("status_file") == "missing" and doc.get("problem"):
        return "status.json is missing and no agent runs for the job" if alive is False else None
    if doc.get("status_file") == "missing" and (doc.get("spec_age_s") or 0) > limit_s:
        return "no agent ever wrote status.json and none runs" if alive is False else None
    if doc.get("state") not in LIVE_STATES:
        return None
    if bool(doc.get("boot_id")) and doc.get("boot_id") != doc.get("boot_id_now"):
        return "the host restarted (boot id changed)"
    if alive is False:
        return "the agent is not running (its process and lock are gone)"
    if age is not None and age > limit_s:
        return "no heartbeat for %.0fs (agent frozen, or it cannot write to the disk)" % age
    return None


def next_resume(job_id: str) -> str:
    return NEXT_RESUME.format(job=job_id)
