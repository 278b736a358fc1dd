"""`rgt sweep run`: launch the cells that need it, a bounded number in flight per machine.

The loop: observe (``_sweep_state``), launch into free slots, sleep, repeat, until no cell can
still change. Which cells are launched is decided only from the observation:

- ``missing`` (never launched, or every launch never reached a machine) and ``failed`` with a
  retryable label are launched; a non-retryable failure only with ``retry_failed``;
- ``done``, ``succeeded``, ``running``, ``queued`` and ``unreachable`` are left alone — an
  unreachable machine's jobs may well be finishing, so they are never started elsewhere;
- a cell is launched at most once per run (the agent's retry budget covers retryable failures
  inside a job); a launch that raised ``TransportError`` may be repeated once the machine that
  refused it has answered that the job is not there.

A machine that raises ``TransportError`` gets no new cells; the cells waiting for a slot go to
the machines that answer, and the ones already on it stay there and are read again when it
comes back. On a backend that runs arrays (``Backend.arrays``: Slurm) the cells go out in one
``submit_many`` (a job array, ``%per_machine`` throttle) and the scheduler does the rest.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from rgt.backends import backend_class
from rgt.errors import BackendError, SpecError, TransportError
from rgt.models import JobSpec, RetryPolicy
from rgt.state.store import Store, utcnow
from rgt.status import cache as status_cache
from rgt.sweep._file import Cell, Sweep
from rgt.sweep._state import CellView, Observation, observe


@dataclass(frozen=True)
class RunOptions:
    retry_failed: bool = False
    detach: bool = False  # launch what fits now and return
    poll_s: float = 1.0
    unreachable_wait_s: float = 600.0  # give up waiting for a machine that stays down


@dataclass
class RunLog:
    """What this run did, for the report next to the final table."""

    launched: list[dict[str, str]] = field(default_factory=list)
    moved: list[dict[str, Any]] = field(default_factory=list)  # launched while a machine was down
    errors: list[dict[str, str]] = field(default_factory=list)
    down_since: dict[str, float] = field(default_factory=dict)


Tick = Callable[[Observation, RunLog], None]


def check_machines(store: Store, sweep: Sweep) -> str:
    """The sweep's machines exist and are active; returns how the cells go out: "array" (one
    submission on a backend that runs arrays, ``Backend.arrays``) or "fanout"."""
    released = [n for n in sweep.machines if not store.machine(n).active]
    if released:
        raise SpecError(
            f"{sweep.path}: machine {released[0]!r} was released",
            path=str(sweep.path),
            field="machines",
            fix="register it again with `rgt up`, or drop it",
        )
    arrays = [n for n in sweep.machines if backend_class(store.machine(n).backend).arrays]
    if arrays and len(sweep.machines) > 1:
        raise SpecError(
            f"{sweep.path}: {arrays[0]!r} runs the cells as one job array; it must be the only "
            "machine in 'machines'",
            path=str(sweep.path),
            field="machines",
            fix="its cells become one job array: give that machine alone, or only machines "
            "without a scheduler",
        )
    return "array" if arrays else "fanout"


def run_sweep(
    store: Store, sweep: Sweep, options: RunOptions, on_tick: Tick | None = None
) -> tuple[Observation, RunLog]:
    kind = check_machines(store, sweep)
    launcher = Launcher(store, sweep)
    log = RunLog()
    while True:
        seen = observe(store, sweep)
        _track_down(seen, log)
        launcher.refused = set(seen.unreachable)
        todo = [
            c for c in seen.cells if c.needs_launch(options.retry_failed) and launcher.may_launch(c)
        ]
        if kind == "array":
            launcher.array([c.cell for c in todo], log)
        else:
            _fan_out(launcher, seen, todo, log)
        if on_tick:
            on_tick(seen, log)
        if options.detach or _settled(seen, todo, log, options):
            return observe(store, sweep) if todo else seen, log
        time.sleep(options.poll_s)


def _track_down(seen: Observation, log: RunLog) -> None:
    now = time.monotonic()
    for name in list(log.down_since):
        if name not in seen.unreachable:
            del log.down_since[name]
    for name in seen.unreachable:
        log.down_since.setdefault(name, now)


def _settled(seen: Observation, todo: Sequence[CellView], log: RunLog, options: RunOptions) -> bool:
    """Nothing left that this run could still see change (or only machines long down)."""
    busy = [c for c in seen.cells if c.state in ("running", "queued")]
    if busy or (todo and not _all_down(log, options)):
        return False
    # In doubt on a machine that answers (a damaged status.json and no agent): nothing this
    # run waits for will change it; `rgt resume` or a human does. Only a machine that may
    # come back keeps the run waiting.
    doubt = [c for c in seen.cells if c.state == "unreachable" and _on_a_down_machine(c, seen)]
    return not doubt or _all_down(log, options)


def _on_a_down_machine(view: CellView, seen: Observation) -> bool:
    return any(j.state == "unreachable" and j.machine in seen.unreachable for j in view.jobs)


def _all_down(log: RunLog, options: RunOptions) -> bool:
    if not log.down_since:
        return False
    return time.monotonic() - min(log.down_since.values()) > options.unreachable_wait_s


def _fan_out(launcher: Launcher, seen: Observation, todo: Sequence[CellView], log: RunLog) -> None:
    sweep = launcher.sweep
    free = {
        m: sweep.per_machine - seen.in_flight(m)
        for m in sweep.machines
        if m not in seen.unreachable and m not in launcher.refused
    }
    for view in todo:
        open_ = [m for m, n in free.items() if n > 0]
        if not open_:
            return
        previous = view.machine
        target = previous if previous in open_ else max(open_, key=lambda m: free[m])
        if not launcher.launch(view.cell, target, log, resume_from=_resumable(view, target)):
            free.pop(target, None)
            continue
        free[target] -= 1
        if launcher.refused:
            log.moved.append(
                {
                    "cell_id": view.cell.cell_id,
                    "machine": target,
                    "away_from": sorted(launcher.refused),
                }
            )


def _resumable(view: CellView, machine: str) -> str | None:
    """The cell's last job that ran on ``machine``: its checkpoints seed the new job, so a
    relaunched cell resumes instead of starting over (invariant 1). Checkpoints on another
    machine are not copied across."""
    ran = [j.job_id for j in view.jobs if j.machine == machine and j.state not in ("absent",)]
    return ran[-1] if ran else None


class Launcher:
    """Creates the jobs of cells; one code snapshot per run, pushed once per machine."""

    def __init__(self, store: Store, sweep: Sweep) -> None:
        self.store = store
        self.sweep = sweep
        self.tried: set[str] = set()  # cells launched by this run
        self.lost: set[str] = set()  # of those, launches that raised TransportError
        self.refused: set[str] = set()  # machines down now (unreadable, or refused a launch)
        self._snapshot: Any = None

    def may_launch(self, view: CellView) -> bool:
        cell_id = view.cell.cell_id
        return cell_id not in self.tried or (cell_id in self.lost and view.state == "missing")

    def launch(self, cell: Cell, machine: str, log: RunLog, resume_from: str | None = None) -> bool:
        from rgt.jobs.launch import LaunchOptions, launch

        self.tried.add(cell.cell_id)
        job_id = self.next_job_id(cell)
        options = LaunchOptions(
            command=cell.argv,
            cwd=self.sweep.code,
            env={**self.network_env(machine), **self.env(cell)},
            artifacts=self.sweep.artifacts,
            exclude=self.sweep.exclude,
            job_id=job_id,
            retry=RetryPolicy(max_retries=self.sweep.retries),
            resume_from=resume_from,
            resume=self.resume(cell),
        )
        try:
            launch(self.store, machine, options)
        except TransportError as exc:
            self.lost.add(cell.cell_id)
            self.refused.add(machine)
            log.errors.append({"cell_id": cell.cell_id, "machine": machine, "error": exc.message})
            return False
        except BackendError as exc:
            log.errors.append({"cell_id": cell.cell_id, "machine": machine, "error": exc.message})
            return False
        self.lost.discard(cell.cell_id)
        log.launched.append({"cell_id": cell.cell_id, "job_id": job_id, "machine": machine})
        return True

    def array(self, cells: Sequence[Cell], log: RunLog) -> None:
        """All of ``cells`` as one submission (a Slurm job array) on the sweep's one machine."""
        if not cells:
            return
        from rgt.backends import backend_for
        from rgt.transport.snapshot import take_snapshot

        machine = self.sweep.machines[0]
        backend = backend_for(self.store, machine)
        snapshot = take_snapshot(self.sweep.code)
        backend.push_snapshot(snapshot)
        specs = [self.spec(c, machine, snapshot.digest) for c in cells]
        for spec in specs:
            self.store.add_job(spec)
        self.tried.update(c.cell_id for c in cells)
        try:
            array_id = backend.submit_many(specs, self.sweep.resources, self.sweep.per_machine or 0)
        except BaseException:
            status_cache.never_submitted(self.store, [s.job_id for s in specs])
            raise
        for spec, cell in zip(specs, cells, strict=True):
            log.launched.append(
                {
                    "cell_id": cell.cell_id,
                    "job_id": spec.job_id,
                    "machine": machine,
                    "slurm_array": str(array_id),  # an arrays backend names its array
                }
            )

    def spec(self, cell: Cell, machine: str, snapshot: str) -> JobSpec:
        return JobSpec(
            job_id=self.next_job_id(cell),
            machine=machine,
            command=cell.argv,
            code_snapshot=snapshot,
            env=self.env(cell),
            artifacts=self.sweep.artifacts,
            exclude=self.sweep.exclude,
            retry=RetryPolicy(max_retries=self.sweep.retries),
            created=utcnow(),
            resume=self.resume(cell),
        )

    def resume(self, cell: Cell) -> dict[str, str] | None:
        from rgt.jobs.resume_form import for_cell

        values = {**cell.overrides, "seed": cell.seed, "cell_id": cell.cell_id}
        return for_cell(self.sweep.resume, values)

    def network_env(self, machine: str) -> dict[str, str]:
        """The machine's mirrors and no_proxy (``rgt.profiles.network``); the sweep's env wins."""
        from rgt.profiles.network import machine_plan

        record = self.store.machine(machine)
        return machine_plan(record.profile, record.connection, machine, record.registered).env

    def env(self, cell: Cell) -> dict[str, str]:
        import json

        return {
            **self.sweep.env,
            "RGT_SWEEP": self.sweep.name,
            "RGT_CELL_ID": cell.cell_id,
            "RGT_SEED": str(cell.seed),
            "RGT_OVERRIDES": json.dumps(cell.overrides, sort_keys=True),
        }

    def next_job_id(self, cell: Cell) -> str:
        """``<cell id>-<n>``: the n-th job of the cell (ids already taken are skipped)."""
        taken = {r.job_id for r in self.store.jobs() if r.job_id.startswith(cell.cell_id + "-")}
        n = len(taken) + 1
        while f"{cell.cell_id}-{n}" in taken:
            n += 1
        return f"{cell.cell_id}-{n}"
