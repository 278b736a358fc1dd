"""The UI's one background patrol: every machine read through the same path as `rgt watch`.

All browsers share it: one ``rgt.watch.patrol.patrol`` call per interval (one agent round trip
per machine, the backend judging liveness, ``rgt.status.cache`` caching what the machine proves),
however many pages are open. A machine that does not answer keeps its last good readings and
the time they were taken: unreachable is never "dead". The teardown gate (a few more reads per
machine) is evaluated again only when its inputs changed (a job's state, a pull, an approval)
or every ten minutes. Job logs and metrics files are fetched here too, for the jobs someone
looks at (``fetched``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from rgt.errors import RgtError
from rgt.state.store import Store, utcnow
from rgt.ui.fetched import JobFiles
from rgt.watch.patrol import MAX_THREADS, PatrolOptions, patrol

GATE_EVERY_S = 600.0  # a pulled copy edited by hand is seen this late (the gate rechecks)
log = logging.getLogger("rgt.ui")
JOB_KEYS = ("state", "attempt", "label", "step", "reason", "ended")


class UiPatrol:
    """Holds the last patrol's picture; ``tick`` runs in a worker thread, the rest in the loop."""

    def __init__(self, store: Store, interval_s: float = 5.0) -> None:
        self.store, self.interval_s = store, interval_s
        self.machines: dict[str, dict[str, Any]] = {}
        self.last_good: dict[str, dict[str, Any]] = {}
        self.jobs: dict[str, dict[str, Any]] = {}
        self.gates: dict[str, dict[str, Any]] = {}
        self.files = JobFiles()
        self.at: str | None = None
        self.ticks = 0
        self._gate_at: dict[str, float] = {}
        self._gate_inputs: dict[str, tuple[Any, ...]] = {}
        self._subscribers: set[asyncio.Queue[dict[str, Any]]] = set()

    # -- the loop ---------------------------------------------------------------------------

    async def run(self) -> None:
        while True:
            try:
                update = await asyncio.to_thread(self.tick)
            except Exception as exc:
                log.warning("rgt ui patrol failed: %s", exc, exc_info=True)
                message = exc.message if isinstance(exc, RgtError) else repr(exc)
                update = {"machines": False, "jobs": [], "at": utcnow(), "error": message}
            if update.get("machines") or update.get("jobs") or update.get("error"):
                self.publish(update)
            await asyncio.sleep(self.interval_s)

    def subscribe(self) -> asyncio.Queue[dict[str, Any]]:
        queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue(maxsize=64)
        self._subscribers.add(queue)
        return queue

    def unsubscribe(self, queue: asyncio.Queue[dict[str, Any]]) -> None:
        self._subscribers.discard(queue)

    def publish(self, update: dict[str, Any]) -> None:
        for queue in list(self._subscribers):
            if queue.full():  # a stalled client loses old updates, never blocks the patrol
                queue.get_nowait()
            queue.put_nowait(update)

    # -- one patrol (worker thread) ----------------------------------------------------------

    def tick(self) -> dict[str, Any]:
        """One patrol; the new picture replaces the old one at the end, all at once, so a
        page never shows a job's new state beside the gate's old verdict."""
        report = patrol(self.store, options=PatrolOptions(events=20))
        jobs, changed_jobs = self._take_jobs(report["jobs"])
        machines, last_good, moved = self._take_machines(report["machines"], report["time"])
        gates = self._refresh_gates(machines, {jobs[j].get("machine") for j in changed_jobs})
        gates_changed = gates != self.gates
        self.jobs, self.machines, self.last_good, self.gates = jobs, machines, last_good, gates
        changed_jobs += self.files.refresh(self.store, self.jobs)
        self.at, self.ticks = report["time"], self.ticks + 1
        return {
            "machines": moved or gates_changed or self.ticks == 1,
            "jobs": sorted(set(changed_jobs)),
            "at": self.at,
        }

    def _take_jobs(
        self, views: list[dict[str, Any]]
    ) -> tuple[dict[str, dict[str, Any]], list[str]]:
        jobs, changed = dict(self.jobs), []
        for view in views:
            old = jobs.get(view["job_id"])
            if old is None or any(old.get(k) != view.get(k) for k in JOB_KEYS):
                changed.append(view["job_id"])
            if not view.get("events") and old and old.get("events"):
                view["events"] = old["events"]  # an ended job's last events stay shown
            jobs[view["job_id"]] = view
        return jobs, changed

    def _take_machines(
        self, rows: list[dict[str, Any]], at: str
    ) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]], bool]:
        machines, last_good, moved = dict(self.machines), dict(self.last_good), False
        for row in rows:
            old = machines.get(row["name"])
            moved |= old is None or old.get("reachable") != row.get("reachable")
            if row.get("reachable") and not row.get("error"):
                last_good[row["name"]] = {"at": at, "row": row}
            machines[row["name"]] = row
        return machines, last_good, moved

    def _refresh_gates(
        self, machines: dict[str, dict[str, Any]], moved: set[Any]
    ) -> dict[str, dict[str, Any]]:
        """Re-read the gate of each reachable machine whose inputs changed: a job's state
        (seen by this patrol), a pull or an approval (the local DB), or after GATE_EVERY_S.
        In steady state that is no round trip beyond `rgt watch`'s own."""
        due = []
        for name, row in machines.items():
            inputs = local_inputs(self.store, name)
            stale = time.monotonic() - self._gate_at.get(name, -GATE_EVERY_S) >= GATE_EVERY_S
            changed = name in moved or inputs != self._gate_inputs.get(name)
            if row.get("reachable") and (stale or changed):
                due.append(name)
                self._gate_inputs[name] = inputs
        gates = dict(self.gates)
        with ThreadPoolExecutor(max_workers=max(1, min(MAX_THREADS, len(due)))) as pool:
            for name, verdict in zip(
                due, pool.map(lambda n: gate_of(self.store, n), due), strict=True
            ):
                gates[name] = verdict
                self._gate_at[name] = time.monotonic()
        return gates


def local_inputs(store: Store, name: str) -> tuple[Any, ...]:
    """What the gate reads from this side: each job's last pull and the pending approval."""
    from rgt.models import ACTION_DOWN

    pulls = []
    for record in store.jobs(name):
        pull = store.last_pull(record.job_id)
        pulls.append((record.job_id, pull["time"] if pull else None))
    approval = store.pending_approval(name, ACTION_DOWN)
    return (tuple(pulls), approval["id"] if approval else None)


def gate_of(store: Store, name: str) -> dict[str, Any]:
    """The teardown gate's verdict for one machine (``rgt.lifecycle.gate``), as JSON; an error
    is kept."""
    from rgt.backends import backend_for
    from rgt.lifecycle.gate import evaluate as gate_evaluate

    try:
        verdict = gate_evaluate(store, backend_for(store, name))
    except RgtError as exc:
        return {"ok": False, "error": exc.message, "checks": []}
    doc: dict[str, Any] = verdict.to_json()
    return doc
