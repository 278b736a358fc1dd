"""Events a training process adds to its job's ``events.jsonl`` (next to the agent's own).

Under rgt's agent the job's environment carries ``RGT_JOB_DIR``, ``RGT_JOB_ID`` and
``RGT_ATTEMPT``; a line is appended with one ``write()`` (``rgt._fs.append_line``), so it never
interleaves with the agent's lines. Without rgt around there is no events file and the event
only goes to the ``rgt.ckpt`` logger. An event can never fail a save: a full disk or a vanished
job directory is logged and forgotten.
"""

from __future__ import annotations

import datetime
import json
import logging
import os
from typing import Any

from rgt._fs import append_line

log = logging.getLogger("rgt.ckpt")


def emit(kind: str, detail: dict[str, Any], next_step: str | None, severity: str = "info") -> None:
    log.info("%s: %s", kind, detail)
    job_dir = os.environ.get("RGT_JOB_DIR", "")
    if not job_dir:
        return
    record = {
        "time": _now_iso(),
        "job_id": os.environ.get("RGT_JOB_ID", ""),
        "kind": kind,
        "attempt": _attempt(),
        "severity": severity,
        "detail": detail,
        "next": next_step,
    }
    try:
        append_line(os.path.join(job_dir, "events.jsonl"), json.dumps(record, sort_keys=True))
    except OSError as exc:
        log.warning("could not record the %s event: %s", kind, exc)


def _attempt() -> int | None:
    raw = os.environ.get("RGT_ATTEMPT", "")
    return int(raw) if raw.isdigit() else None


def _now_iso() -> str:
    """The agent's format (``rgt.agent._system.now_iso``): UTC, milliseconds, ``Z``."""
    now = datetime.datetime.now(datetime.timezone.utc)
    return now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{now.microsecond // 1000:03d}Z"
