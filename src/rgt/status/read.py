"""The one entry point to a machine's job states: the backend's read, then what it proves.

``Backend.read_jobs`` never changes the machine. A status may still say that something ought
to be written there: Slurm's ``unrecorded_end`` (the controller says ``CANCELLED``: a plain
``scancel`` killed the job's agent before it could record the end). Left alone, the answer
would vanish when Slurm forgets the job (``MinJobAge``, 300 s by default) and the job would
read as ended without a word. So every read through here records it, with the agent's own
code (``Backend.cancel``: the agent writes ``cancelled`` and its event; on Slurm the
``scancel`` of a job already ended is a no-op), once: the next read finds it recorded.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from rgt.backends.base import Backend
from rgt.backends.statusdoc import MachineRead
from rgt.errors import RgtError

LOG = logging.getLogger(__name__)


def read(
    backend: Backend, job_ids: Sequence[str] | None = None, *, events: int = 0, gpu: bool = False
) -> MachineRead:
    """``backend.read_jobs`` (module docstring), with the ends only the scheduler saw
    recorded on the machine (``record_ends``)."""
    found = backend.read_jobs(job_ids, events=events, gpu=gpu)
    record_ends(backend, found)
    return found


def record_ends(backend: Backend, found: MachineRead) -> list[str]:
    """Record each end that ``found`` says its agent could not (``unrecorded_end``) through
    ``Backend.cancel``; returns those job ids. A failure is logged, never raised: the read
    already has the answer, and the next read tries again."""
    recorded = []
    for job_id, status in found.statuses.items():
        if not status.unrecorded_end:
            continue
        try:
            backend.cancel(job_id)
        except RgtError as exc:
            LOG.warning("%s: the end its scheduler saw is not recorded yet: %s", job_id, exc)
            continue
        recorded.append(job_id)
    return recorded
