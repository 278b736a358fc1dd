"""Job files the patrol fetches for the pages: a bounded log tail, the metrics file, the events.

Pages never reach a machine themselves: a request for a job's log or curves marks the job
*wanted*, and the next patrol tick fetches what changed (the log from the last offset, so a
running job costs only its new bytes) and tells the browsers by SSE. A job is dropped from the
wanted set two minutes after the last request; an ended job's files are fetched once more and
then kept. Failed jobs are fetched once on their own, for the remedy their events name.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field, replace
from typing import Any

from rgt import clip
from rgt.agent import jobfiles
from rgt.errors import RgtError
from rgt.state.store import Store, utcnow

MAX_LOG_BYTES = 256 * 1024
MAX_METRICS_BYTES = 16 * 1024 * 1024
WANTED_FOR_S = 120.0
PER_TICK = 20
METRICS_FILE = "metrics.jsonl"
ENDED = jobfiles.TERMINAL  # the one spelling of a job that ended


@dataclass(frozen=True)
class Fetched:
    attempt: int = 0
    offset: int = 0  # bytes of the attempt's log read so far
    tail: bytes = b""  # its last MAX_LOG_BYTES
    at: str | None = None
    metrics: bytes | None = None
    events: tuple[dict[str, Any], ...] = ()
    final: bool = False
    error: str | None = None


@dataclass
class JobFiles:
    _wanted: dict[str, float] = field(default_factory=dict)
    _got: dict[str, Fetched] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def want(self, job_id: str) -> None:
        with self._lock:
            self._wanted[job_id] = time.monotonic()

    def get(self, job_id: str) -> Fetched | None:
        with self._lock:
            return self._got.get(job_id)

    def refresh(self, store: Store, jobs: dict[str, dict[str, Any]]) -> list[str]:
        """Fetch what the wanted jobs wrote since the last tick; the ids whose files changed."""
        changed = []
        for job_id in self._due(jobs):
            view = jobs.get(job_id) or {}
            if view.get("reachable") is False:
                continue  # the patrol could not reach its machine: nothing new to read
            before = self.get(job_id) or Fetched()
            after = _fetch(store, job_id, view, before)
            with self._lock:
                self._got[job_id] = after
            if _key(after) != _key(before):
                changed.append(job_id)
        return changed

    def _due(self, jobs: dict[str, dict[str, Any]]) -> list[str]:
        now = time.monotonic()
        with self._lock:
            for job_id in [j for j, t in self._wanted.items() if now - t > WANTED_FOR_S]:
                del self._wanted[job_id]
            failed = [j for j, v in jobs.items() if v.get("state") == "failed"]
            due = [j for j in [*self._wanted, *failed] if not self._final(j)]
        return list(dict.fromkeys(due))[:PER_TICK]

    def _final(self, job_id: str) -> bool:
        got = self._got.get(job_id)
        return got is not None and got.final


def _fetch(store: Store, job_id: str, view: dict[str, Any], before: Fetched) -> Fetched:
    from rgt.backends import backend_for

    try:
        record = store.job(job_id)
        backend = backend_for(store, record.machine)
        attempt = int(view.get("attempt") or record.attempts or 1)
        got = _log(backend, job_id, max(attempt, 1), before)
        paths = backend.job_paths(job_id)
        metrics = backend.transport.read_bytes(f"{paths.output_dir}/{METRICS_FILE}")
        # The machine writes events.jsonl: each string clipped, the whole bounded (rgt.clip).
        events = tuple(clip.document({"events": backend.events(job_id)[-50:]})["events"])
    except (RgtError, OSError) as exc:  # an ended job is not asked again: its files are gone
        ended = str(view.get("state")) in ENDED
        return replace(before, error=getattr(exc, "message", str(exc)), final=ended)
    if metrics is not None and len(metrics) > MAX_METRICS_BYTES:
        metrics = metrics[-MAX_METRICS_BYTES:]
    final = str(view.get("state") or record.state.value) in ENDED
    return replace(got, metrics=metrics, events=events, final=final, error=None)


def _log(backend: Any, job_id: str, attempt: int, before: Fetched) -> Fetched:
    if attempt != before.attempt:
        before = Fetched(attempt=attempt)
    new = backend.log(job_id, attempt, before.offset)
    tail = (before.tail + new)[-MAX_LOG_BYTES:]
    return replace(before, offset=before.offset + len(new), tail=tail, at=utcnow())


def _key(got: Fetched) -> tuple[Any, ...]:
    return (got.attempt, got.offset, got.metrics, got.events, got.final, got.error)
