"""Reconciliation: what each cell of a sweep is, from the state DB and the machines' word.

The state DB says which jobs belong to which cell (every sweep job carries ``RGT_SWEEP`` and
``RGT_CELL_ID`` in its spec) and which were pulled and verified; the machines say what each
job is now, read through the one status path (``status_cache.observe``: the backend's batched
read, ``read_jobs``, where Slurm's controller, which knows a pending array task, has its say).

A machine that cannot be read says nothing about its jobs. Their last state is kept only when
the agent itself recorded an end (a terminal ``status.json`` is final: the agent never runs a
job again after it); anything else becomes ``unreachable`` — in doubt — and a cell in doubt is
never launched anywhere else. That is the rule that keeps a cell from running twice to
completion: a new job for a cell is started only when every earlier job of it is known, from a
machine that answered, to have ended without success or never to have started.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from rgt.backends.jobstatus import DEFAULT_HEARTBEAT_LOST_S, heartbeat_limit_s
from rgt.backends.statusdoc import JobStatus
from rgt.errors import RgtError
from rgt.models import TERMINAL, JobRecord, JobState
from rgt.state.store import Store
from rgt.status import cache as status_cache
from rgt.status.cache import NEVER_LAUNCHED_S, age_s
from rgt.sweep._file import Cell, Sweep

ACTIVE = ("running", "retrying")
# Cell states, in the order the table shows them.
CELL_STATES = (
    "done",
    "succeeded",
    "running",
    "queued",
    "unreachable",
    "failed",
    "missing",
    "duplicate",
)


@dataclass(frozen=True)
class JobView:
    """One job of a cell. ``state`` is a JobState value, ``absent`` (the machine answered and
    has no such job: it never started) or ``unreachable`` (the machine did not answer)."""

    job_id: str
    machine: str
    state: str
    label: str | None
    reason: str | None
    pulled: bool

    def to_json(self) -> dict[str, Any]:
        return dict(vars(self))


@dataclass(frozen=True)
class CellView:
    cell: Cell
    state: str
    jobs: tuple[JobView, ...]
    label: str | None = None
    retryable: bool = False

    @property
    def machine(self) -> str | None:
        """Where the job that decides the cell's state lives."""
        deciding = [j for j in self.jobs if j.state not in ("absent",)]
        return deciding[-1].machine if deciding else None

    def needs_launch(self, retry_failed: bool) -> bool:
        if self.state == "missing":
            return True
        return self.state == "failed" and (self.retryable or retry_failed)

    def to_json(self) -> dict[str, Any]:
        return {
            "cell_id": self.cell.cell_id,
            "group": self.cell.group,
            "overrides": self.cell.overrides,
            "seed": self.cell.seed,
            "state": self.state,
            "label": self.label,
            "retryable": self.retryable,
            "machine": self.machine,
            "jobs": [j.to_json() for j in self.jobs],
        }


@dataclass(frozen=True)
class Observation:
    cells: tuple[CellView, ...]
    unreachable: dict[str, str]  # machine -> why it could not be read

    def in_flight(self, machine: str) -> int:
        return sum(1 for c in self.cells for j in c.jobs if j.machine == machine and _busy(j.state))

    def counts(self) -> dict[str, int]:
        return {s: sum(1 for c in self.cells if c.state == s) for s in CELL_STATES}


def sweep_jobs(store: Store, sweep: Sweep) -> dict[str, list[JobRecord]]:
    """cell id -> its jobs (oldest first), from the state DB."""
    wanted = {c.cell_id for c in sweep.cells}
    found: dict[str, list[JobRecord]] = {c: [] for c in wanted}
    for record in store.jobs():
        env = record.spec.env
        if env.get("RGT_SWEEP") == sweep.name and env.get("RGT_CELL_ID") in wanted:
            found[env["RGT_CELL_ID"]].append(record)
    return found


def observe(store: Store, sweep: Sweep) -> Observation:
    """Read every machine that holds a job of the sweep (in parallel) and classify each cell."""
    jobs = sweep_jobs(store, sweep)
    by_machine: dict[str, list[JobRecord]] = {}
    for record in (r for records in jobs.values() for r in records):
        by_machine.setdefault(record.machine, []).append(record)
    names = sorted(set(by_machine) | set(sweep.machines))
    with ThreadPoolExecutor(max_workers=max(1, min(16, len(names)))) as pool:
        answers = list(pool.map(lambda n: read_machine(store, n, by_machine.get(n, [])), names))
    statuses: dict[str, JobStatus] = {}
    unreachable: dict[str, str] = {}
    for name, answer in zip(names, answers, strict=True):
        if isinstance(answer, str):
            unreachable[name] = answer
        else:
            statuses.update(answer)
    limit_s = heartbeat_limit_s()
    cells = []
    for cell in sweep.cells:
        views = [
            _job_view(store, r, statuses.get(r.job_id), r.machine in unreachable, limit_s)
            for r in jobs[cell.cell_id]
        ]
        cells.append(classify(cell, views))
    return Observation(tuple(cells), unreachable)


def read_machine(
    store: Store, name: str, records: Sequence[JobRecord]
) -> dict[str, JobStatus] | str:
    """job id -> status for ``records`` on machine ``name`` (the one status path, which also
    caches what the machine proves), or why it could not be read."""
    from rgt.backends import backend_for

    try:
        return status_cache.observe(store, backend_for(store, name), records)
    except RgtError as exc:
        return exc.message


def _job_view(
    store: Store,
    record: JobRecord,
    status: JobStatus | None,
    unreachable: bool,
    limit_s: float = DEFAULT_HEARTBEAT_LOST_S,
) -> JobView:
    pull = store.last_pull(record.job_id)
    pulled = bool(pull and pull["verified"])
    if unreachable or status is None:
        # Only an end the agent recorded is final; our own launch-failure mark is not.
        final = record.state in TERMINAL and (record.attempts > 0 or record.label is not None)
        state = record.state.value if final else "unreachable"
        return JobView(record.job_id, record.machine, state, record.label, None, pulled)
    if not status.exists:
        launch_failed = record.state == JobState.FAILED and record.attempts == 0
        absent = launch_failed or age_s(record.created) > NEVER_LAUNCHED_S
        state = "absent" if absent else "queued"
        return JobView(record.job_id, record.machine, state, None, None, pulled)
    if _never_started(status):
        return JobView(record.job_id, record.machine, "absent", None, None, pulled)
    lost = _lost(status, limit_s) if status.live and not status.waiting else None
    if lost is not None:
        # Its agent is gone without recording an end (`heartbeat_lost`, the rule `rgt status`
        # uses): the job's process may live on, so it is in doubt (never launched elsewhere)
        # until `rgt resume` restarts its agent.
        why = f"{lost['why']}; {lost['next']}"
        return JobView(record.job_id, record.machine, "unreachable", "heartbeat_lost", why, pulled)
    # A status nothing proves (a damaged status.json, no agent) is in doubt, like a machine
    # that did not answer: the cell is never launched again meanwhile.
    state = status.state.value if status.state is not None else "unreachable"
    return JobView(record.job_id, record.machine, state, status.label, status.reason, pulled)


def _lost(status: JobStatus, limit_s: float) -> dict[str, Any] | None:
    from rgt.agent.jobfiles import heartbeat_lost

    return heartbeat_lost(status.to_doc(), status.now, limit_s)


def _never_started(status: JobStatus) -> bool:
    """The job's directory is on the machine but no agent ever ran it: the launch was cut
    between writing the spec and starting the agent (the machine's sshd died, the launching
    rgt process was killed). Nothing will run it, so its cell may be launched again: no
    status.json, no events, no agent and no scheduler holding it, ``NEVER_LAUNCHED_S`` after
    its spec was written (an agent takes its lock within seconds of the spec)."""
    age = status.extra.get("spec_age_s")
    if (
        status.status_file != "missing"
        or status.state != JobState.QUEUED
        or status.agent_alive is not False
        or status.waiting
        or not isinstance(age, (int, float))
    ):
        return False
    return age > NEVER_LAUNCHED_S


def classify(cell: Cell, jobs: Sequence[JobView]) -> CellView:
    from rgt.triage.labels import LABEL_RETRYABLE

    views = tuple(jobs)
    succeeded = [j for j in views if j.state == JobState.SUCCEEDED.value]
    if len(succeeded) > 1:
        return CellView(cell, "duplicate", views)
    if succeeded:
        return CellView(cell, "done" if succeeded[0].pulled else "succeeded", views)
    for wanted in (("running", "retrying"), ("queued",), ("unreachable",)):
        if any(j.state in wanted for j in views):
            return CellView(cell, wanted[0], views)
    ended = [j for j in views if j.state in (JobState.FAILED.value, JobState.CANCELLED.value)]
    if not ended:
        return CellView(cell, "missing", views)
    last = ended[-1]
    retryable = last.state == JobState.FAILED.value and LABEL_RETRYABLE.get(last.label or "", False)
    return CellView(cell, "failed", views, last.label or last.state, bool(retryable))


def _busy(state: str) -> bool:
    return state in (*ACTIVE, "queued")
