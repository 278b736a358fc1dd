"""Records shared across rgt: frozen dataclasses and string enums.

The agent on the machine does not import this module (it must run on Python 3.8 with nothing
installed); it reads and writes the same JSON shapes, which are pinned by the schemas in
``rgt/schemas/``. ``JobSpec.to_json`` / ``from_json`` are the one translation between the two.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Any

from rgt.agent import jobfiles
from rgt.errors import SpecError

SPEC_SCHEMA = "rgt.spec/1"
JOB_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}\Z")
MACHINE_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}\Z")


class JobState(str, Enum):
    QUEUED = "queued"
    RUNNING = "running"
    RETRYING = "retrying"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def ended(self) -> bool:
        return self in TERMINAL


TERMINAL = frozenset(JobState(s) for s in jobfiles.TERMINAL)  # the agent's one spelling

# The approval action that releases a machine (`rgt approve NAME`, then `rgt down NAME`).
ACTION_DOWN = "down"


@dataclass(frozen=True)
class RetryPolicy:
    """How the agent may restart a job. Only retryable failure classes are ever retried."""

    max_retries: int = 3
    backoff_s: float = 2.0

    def __post_init__(self) -> None:
        if self.max_retries < 0 or self.backoff_s < 0:
            raise SpecError("retry policy values must be >= 0", field="retry")


@dataclass(frozen=True)
class JobSpec:
    """What to run. Written once as ``spec.json`` in the job directory; never changed after."""

    job_id: str
    machine: str
    command: tuple[str, ...]
    code_snapshot: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    secret_env: tuple[str, ...] = ()
    artifacts: tuple[str, ...] = ()
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    smoke: bool = False
    created: str = ""
    notify: str | None = None  # where the webhook URL is read (`env:NAME`), never the URL
    # How a restart resumes a script with its own resume flag: {"with": ARGS or COMMAND,
    # "ckpt": GLOB}, either may be absent (rgt.jobs.resume_form; the agent's _resume).
    resume: dict[str, str] | None = None
    exclude: tuple[str, ...] = ()  # globs dropped from the default artifacts
    artifact_caps: dict[str, int] = field(default_factory=dict)  # max_files, max_bytes
    # `--gpus [TYPE:]N` on an ssh/local machine: the agent picks N free GPUs and sets
    # CUDA_VISIBLE_DEVICES ("0": none). None where a scheduler assigns GPUs (rgt.agent._gpus).
    gpus: str | None = None
    # A fleet (`rgt run A,B -- CMD`): its machines by node rank, the first the master; each
    # node's spec names its own ``machine`` and rendezvous env (rgt.jobs.fleet). () on one machine.
    nodes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not JOB_ID_RE.match(self.job_id):
            raise SpecError(
                f"bad job id {self.job_id!r}",
                field="job_id",
                fix="use letters, digits, '.', '_' or '-' (max 128)",
            )
        if not self.command or not all(isinstance(a, str) for a in self.command):
            raise SpecError(
                "the job command is empty",
                field="command",
                fix="give the command after `--`: `rgt run NAME -- python train.py`",
            )
        overlap = set(self.env) & set(self.secret_env)
        if overlap:
            raise SpecError(f"{sorted(overlap)} given both as plain env and as secret", field="env")

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["schema"] = SPEC_SCHEMA
        data["command"] = list(self.command)
        data["secret_env"] = list(self.secret_env)
        data["artifacts"] = list(self.artifacts)
        data["exclude"] = list(self.exclude)
        data["nodes"] = list(self.nodes)
        if not self.nodes:  # one machine: its spec.json stays as it always was
            del data["nodes"]
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any], *, path: str | None = None) -> JobSpec:
        if data.get("schema") != SPEC_SCHEMA:
            raise SpecError(
                f"spec schema is {data.get('schema')!r}, expected {SPEC_SCHEMA!r}",
                path=path,
                field="schema",
            )
        known = {f for f in cls.__dataclass_fields__}
        unknown = set(data) - known - {"schema", "notify_url"}
        if unknown:
            raise SpecError(
                f"unknown spec fields {sorted(unknown)}",
                path=path,
                field=sorted(unknown)[0],
                fix=f"allowed: {sorted(known)}",
            )
        # ``notify_url``: a plain-text webhook URL written by rgt < 0.x; it is a secret, dropped.
        kwargs = {k: v for k, v in data.items() if k not in ("schema", "notify_url")}
        try:
            kwargs["command"] = tuple(kwargs.get("command") or ())
            kwargs["secret_env"] = tuple(kwargs.get("secret_env") or ())
            kwargs["artifacts"] = tuple(kwargs.get("artifacts") or ())
            kwargs["exclude"] = tuple(kwargs.get("exclude") or ())
            kwargs["nodes"] = tuple(kwargs.get("nodes") or ())
            kwargs["retry"] = RetryPolicy(**(kwargs.get("retry") or {}))
            return cls(**kwargs)
        except TypeError as exc:
            raise SpecError(f"malformed spec: {exc}", path=path) from exc


@dataclass(frozen=True)
class Machine:
    """A machine rgt knows: rented, registered or this one."""

    name: str
    backend: str
    profile: str
    connection: dict[str, Any]
    durable_root: str
    price_per_hour: float | None = None
    registered: str = ""
    released: str | None = None

    @property
    def active(self) -> bool:
        return self.released is None


@dataclass(frozen=True)
class JobRecord:
    """The local cache of a job; the agent's status.json on the machine is the truth."""

    job_id: str
    machine: str
    spec: JobSpec
    state: JobState
    attempts: int = 0
    created: str = ""
    ended: str | None = None
    label: str | None = None
