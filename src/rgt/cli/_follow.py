"""``rgt logs JOB -f``: print the log as it grows, across attempts, until the job ends.

The exit status is the job's outcome (0 succeeded, 1 failed or cancelled). Following never
waits for ever: a job whose agent is lost, whose directory vanished or whose status file is
unreadable with no agent to rewrite it ends the follow with 1 and says what to do (the same
judgement as ``rgt watch``).
"""

from __future__ import annotations

import sys
import time
from typing import Any

import click

from rgt.backends import jobstatus
from rgt.backends.base import Backend
from rgt.jobs.launch import refresh
from rgt.models import JobState
from rgt.state.store import Store

POLL_S = 1.0


def follow_log(
    store: Store, backend: Backend, job_id: str, attempt: int | None, follow: bool
) -> int:
    status = refresh(store, job_id, backend)
    which = attempt or int(status.get("attempt") or 1)
    offset = _emit(backend, job_id, which, 0)
    while follow:
        status = refresh(store, job_id, backend)
        offset = _emit(backend, job_id, which, offset)
        newest = int(status.get("attempt") or which)
        if attempt is None and newest > which:  # a retry: the next attempt's log
            which, offset = newest, _emit(backend, job_id, newest, 0)
            continue
        if jobstatus.ended(status):
            return 0 if status["state"] == JobState.SUCCEEDED.value else 1
        if jobstatus.stuck(status):
            _say_stuck(job_id, status)
            return 1
        time.sleep(POLL_S)
    return 0


def _emit(backend: Backend, job_id: str, attempt: int, offset: int) -> int:
    chunk = backend.log(job_id, attempt, offset)
    sys.stdout.buffer.write(chunk)
    sys.stdout.flush()
    return offset + len(chunk)


def _say_stuck(job_id: str, status: dict[str, Any]) -> None:
    lost = status.get("heartbeat_lost") or {}
    why = lost.get("why") or status.get("reason") or "the job can no longer be followed"
    click.echo(f"rgt: stopped following {job_id}: {why}", err=True)
    click.echo(f"fix: {lost.get('next') or f'rgt resume {job_id}'}", err=True)
