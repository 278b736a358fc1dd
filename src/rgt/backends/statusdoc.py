"""``JobStatus``: one job's status as the CLI reads it, frozen and typed.

Every reader of a job's state (``refresh`` behind `rgt status`, `rgt watch`, a sweep's cells,
the teardown gate, adopt) gets these records in a ``MachineRead`` from the one read
(``Backend.read_jobs``, called by ``rgt.status.read``) and hands them to ``rgt.status.cache``,
the one writer of the local cache. The wire form is the agent's
status document (``agent status`` / one job of ``agent patrol``), validated by
``schemas/status.schema.json``; ``from_doc`` is tolerant: a field of the wrong type reads as
absent (the agent's ``jobfiles`` reader already reported a damaged file as ``problem``), and
every field it does not know is kept in ``extra`` so ``--json`` shows it unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from types import MappingProxyType
from typing import Any

from rgt import clip
from rgt.models import TERMINAL, JobState

ABSENT: Mapping[str, Any] = MappingProxyType({"state": "queued", "exists": False})
UNKNOWN = "unknown"  # the state shown when nothing on the machine proves one
EMPTY: Mapping[str, Any] = MappingProxyType({})
LIVENESS = ("agent", "slurm", "kubernetes", "kaggle")  # who decided agent_alive


@dataclass(frozen=True)
class JobStatus:
    """``state`` None is *unknown*: status.json cannot be believed and nothing proves an end.
    ``agent_alive`` is decided by the backend (``liveness``): the agent's pid and lock on the
    machine, or the scheduler's word where the agent runs on a node the reader cannot see."""

    job_id: str
    state: JobState | None
    exists: bool = True
    attempt: int = 0
    label: str | None = None
    reason: str | None = None
    exit_code: int | None = None
    signal: int | None = None
    heartbeat: str | None = None
    started: str | None = None
    ended: str | None = None
    agent_alive: bool | None = None
    liveness: str = "agent"
    waiting: bool = False  # the scheduler holds it in its queue: no heartbeat is due
    boot_id: str | None = None
    boot_id_now: str | None = None
    now: str | None = None
    done: bool | None = None
    status_file: str | None = None
    state_source: str | None = None
    problem: Mapping[str, str] | None = None
    step: int | None = None
    manifest_sha256: str | None = None
    scheduler: Mapping[str, Any] | None = None  # Slurm's or Kubernetes' view (also in extra)
    # The scheduler ended the job and its agent, killed with it, recorded no end (a plain
    # `scancel`): ``rgt.status.read`` records it on the machine (``Backend.cancel``).
    unrecorded_end: bool = False
    extra: Mapping[str, Any] = field(default_factory=lambda: EMPTY, compare=False)

    @property
    def has_ended(self) -> bool:
        """The job has ended (recorded by its agent, or proven by events.jsonl/DONE)."""
        return self.state in TERMINAL

    @property
    def live(self) -> bool:
        return self.state in (JobState.RUNNING, JobState.RETRYING)

    @property
    def state_name(self) -> str:
        return self.state.value if self.state is not None else UNKNOWN

    @classmethod
    def absent(cls, job_id: str) -> JobStatus:
        """The machine answered and has no directory for the job."""
        return cls.from_doc(absent_doc(job_id))

    @classmethod
    def from_doc(cls, doc: Mapping[str, Any], job_id: str | None = None) -> JobStatus:
        """The machine's document; every string field clipped to 2 KB (``rgt.clip``: a
        reason of 100 MB costs every reader 2 KB, visibly cut). The whole document was
        bounded where it was read (``machine_call``, ``Backend.agent_call``)."""
        known = {f.name for f in fields(cls)} | {"progress"}  # a scheduler's view stays too
        progress = _mapping(doc.get("progress"))
        return cls(
            job_id=str(doc.get("job_id") or job_id or ""),
            state=_state(doc.get("state")),
            exists=doc.get("exists") is not False,
            attempt=_int(doc.get("attempt")) or 0,
            label=_str(doc.get("label")),
            reason=_str(doc.get("reason")),
            exit_code=_int(doc.get("exit_code")),
            signal=_int(doc.get("signal")),
            heartbeat=_str(doc.get("heartbeat")),
            started=_str(doc.get("started")),
            ended=_str(doc.get("ended")),
            agent_alive=_bool(doc.get("agent_alive")),
            liveness=_str(doc.get("liveness")) or "agent",
            waiting=doc.get("waiting") is True,
            boot_id=_str(doc.get("boot_id")),
            boot_id_now=_str(doc.get("boot_id_now")),
            now=_str(doc.get("now")),
            done=_bool(doc.get("done")),
            status_file=_str(doc.get("status_file")),
            state_source=_str(doc.get("state_source")),
            problem=_problem(doc.get("problem")),
            step=_int(progress.get("step")) if progress else _int(doc.get("step")),
            manifest_sha256=_str(doc.get("manifest_sha256")),
            scheduler=_mapping(doc.get("slurm")) or _mapping(doc.get("kubernetes")) or None,
            unrecorded_end=doc.get("unrecorded_end") is True,
            extra=MappingProxyType({k: v for k, v in doc.items() if k not in known}),
        )

    def to_doc(self) -> dict[str, Any]:
        """The document form (what ``--json`` prints): ``extra`` first, typed fields over it."""
        out: dict[str, Any] = dict(self.extra)
        for f in fields(self):
            if f.name not in ("extra", "state", "problem", "scheduler", "unrecorded_end"):
                out[f.name] = getattr(self, f.name)
        if self.unrecorded_end:  # shown only when it holds: what rgt is about to record
            out["unrecorded_end"] = True
        out["state"] = self.state_name
        out["problem"] = dict(self.problem) if self.problem else None
        return out

    def with_(self, **changes: Any) -> JobStatus:
        return replace(self, **changes)


@dataclass(frozen=True)
class MachineRead:
    """One read of a machine (``Backend.read_jobs``): the agent's ``patrol`` document (the
    machine's readings and each job's files, as the agent found them) and the backend's
    status of each job asked, liveness decided by the backend (``interpret``)."""

    patrol: Mapping[str, Any]
    statuses: Mapping[str, JobStatus]

    def agent_docs(self) -> dict[str, Mapping[str, Any]]:
        """job id -> the agent's own document, for every job directory on the machine."""
        jobs = self.patrol.get("jobs") or []
        return {str(j.get("job_id")): j for j in jobs if isinstance(j, Mapping)}

    def job(self, job_id: str) -> JobStatus:
        """The job's status; absent (``exists`` False) when the read did not find it."""
        return self.statuses.get(job_id) or JobStatus.absent(job_id)


def absent_doc(job_id: str) -> dict[str, Any]:
    """What a machine without the job's directory says of it."""
    return {"job_id": job_id, **ABSENT}


def _state(value: Any) -> JobState | None:
    try:
        return JobState(value) if isinstance(value, str) else None
    except ValueError:
        return None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _bool(value: Any) -> bool | None:
    return value if isinstance(value, bool) else None


def _str(value: Any) -> str | None:
    return clip.text(value) if isinstance(value, str) else None


def _mapping(value: Any) -> Mapping[str, Any]:
    return MappingProxyType(dict(value)) if isinstance(value, Mapping) else EMPTY


# What a reader of ``problem`` needs (``jobstatus.problem_reason``, the CLI): a machine that
# sends a problem without them gets these, never a KeyError.
PROBLEM_DEFAULTS = {
    "kind": "unknown",
    "path": "?",
    "detail": "the machine reported a problem without details",
    "fix": "look at the job directory on the machine",
}


def _problem(value: Any) -> Mapping[str, str] | None:
    if not isinstance(value, Mapping) or not value:
        return None
    given = {clip.text(str(k), clip.KEY_BYTES): clip.text(str(v)) for k, v in value.items()}
    return MappingProxyType({**PROBLEM_DEFAULTS, **given})
