"""``Checkpointer``: atomic, verified, budgeted checkpoints for a training loop.

One code path serves both modes. ``save`` lays the state out, checks the disk budget and copies
it into the staging arena (the snapshot); then the same ``_persist_and_commit`` writes the data
file, commits the record and rotates old checkpoints, either right away in the caller
(synchronous) or in a background writer thread (``asynchronous=True``), in which case ``save``
returns as soon as the snapshot is taken and ``wait`` returns once that save is durable.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time
from typing import Any

from rgt.ckpt import _persist, _ranks, _store
from rgt.ckpt._arena import Arena, stage
from rgt.ckpt._budget import check_budget
from rgt.ckpt._cadence import Cadence
from rgt.ckpt._format import plan
from rgt.ckpt._load import load_one
from rgt.ckpt._plan import IntervalPlanner
from rgt.ckpt._signals import StopRequest
from rgt.ckpt._store import CheckpointInfo
from rgt.ckpt.mirror import ENV as MIRROR_ENV
from rgt.ckpt.mirror import Mirror, committed
from rgt.errors import CheckpointError, UsageError

log = logging.getLogger("rgt.ckpt")

MODES = ("max", "min")


class Checkpointer(Cadence):
    """Saves and loads the checkpoints of one run in one directory (one writer at a time).

    ``keep_last`` newest checkpoints are kept (``None``: all), plus the best one by the
    ``metric`` passed to ``save`` when ``best_metric`` names it (``mode`` "max" or "min").
    ``every_steps`` / ``every_seconds`` set the cadence that ``due`` checks; with neither and
    ``mtbf_s`` given, ``due`` picks Daly's interval from the save cost it measures. With
    ``asynchronous=True`` a save returns after the snapshot and persists in the background.

    In a multi-process run (torchrun, accelerate, DeepSpeed: ``RANK`` and ``WORLD_SIZE``; a
    multi-task ``srun``: ``SLURM_PROCID`` and ``SLURM_NTASKS``) only global rank 0 writes the
    checkpoint; the other ranks keep just their own RNG, loader generator and local gradients
    (see ``_ranks``), and every rank loads rank 0's newest checkpoint with its own parts put
    back. ``rank=`` overrides the environment.
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        keep_last: int | None = 3,
        best_metric: str | None = None,
        mode: str = "max",
        every_steps: int | None = None,
        every_seconds: float | None = None,
        asynchronous: bool = False,
        mtbf_s: float | None = None,
        rank: int | None = None,
        mirror: str | os.PathLike[str] | None = None,
    ) -> None:
        if mode not in MODES:
            raise UsageError(f"mode must be one of {MODES}, not {mode!r}", fix="use max or min")
        if keep_last is not None and keep_last < 1:
            raise UsageError(
                f"keep_last must be >= 1 or None, not {keep_last}",
                fix="keep at least the newest checkpoint",
            )
        self.directory = os.fspath(directory)
        self.rank = _ranks.rank_from_env() if rank is None else rank
        self.keep_last, self.best_metric, self.mode = keep_last, best_metric, mode
        self.every_steps, self.every_seconds = every_steps, every_seconds
        # Set by rgt smoke / rgt demo: checkpoint every batch, and die by SIGKILL after save N.
        self.smoke = os.environ.get("RGT_SMOKE") == "1"
        kill_after = os.environ.get("RGT_SMOKE_KILL_AFTER_SAVE", "")
        self.kill_after_save = int(kill_after) if kill_after.strip() else None
        self.saves = 0
        self.last_save_seconds: float | None = None
        self.loaded: CheckpointInfo | None = None
        self._last_save_clock = time.monotonic()
        self.asynchronous = asynchronous
        self.planner = IntervalPlanner(mtbf_s) if mtbf_s else None
        self.last_persist_seconds: float | None = None
        self.last_durable_at: float | None = None  # perf_counter() when the last save committed
        self._arena = Arena()
        self._writer: threading.Thread | None = None
        self._reserving: threading.Thread | None = None
        self._outcome: CheckpointInfo | BaseException | None = None
        self._stop = StopRequest()
        self._own: Checkpointer | None = None  # this rank's own parts, on ranks > 0
        self.mirror = None if mirror is None else Mirror(mirror)  # a lagging durable folder

    @classmethod
    def from_env(
        cls, default_dir: str | os.PathLike[str] | None = None, **options: Any
    ) -> Checkpointer:
        """The directory rgt's agent chose (``RGT_CKPT_DIR``), else ``default_dir`` or
        ``./checkpoints`` so the same script runs without rgt around. ``RGT_CKPT_ASYNC=1`` and
        ``RGT_MTBF_S`` (the platform profile's preemption rate) and ``RGT_CKPT_MIRROR`` (a
        durable folder every checkpoint is copied to with a verified flush, ``mirror``) apply
        unless passed here."""
        directory = os.environ.get("RGT_CKPT_DIR") or default_dir or "checkpoints"
        if "asynchronous" not in options and os.environ.get("RGT_CKPT_ASYNC"):
            options["asynchronous"] = os.environ["RGT_CKPT_ASYNC"] == "1"
        if "mtbf_s" not in options and os.environ.get("RGT_MTBF_S", "").strip():
            options["mtbf_s"] = float(os.environ["RGT_MTBF_S"])
        if "mirror" not in options and os.environ.get(MIRROR_ENV, "").strip():
            options["mirror"] = os.environ[MIRROR_ENV].strip()
        return cls(directory, **options)

    # --- loading -------------------------------------------------------------------------

    def load_latest(self, map_location: Any = None) -> Any:
        """The newest committed checkpoint whose hash verifies; ``None`` on a fresh start.

        Falls back over corrupt, truncated or missing files with a warning. If checkpoints were
        committed but none verifies, raises ``CheckpointError`` rather than silently training
        from zero.
        """
        committed = self._committed()
        for info in committed:
            state = load_one(info, map_location)
            if state is not None:
                if not self.writes:
                    state = _ranks.overlay(state, self.directory, self.rank, info.step)
                self.loaded = info
                if self.asynchronous and self.writes:
                    self.reserve(info.bytes)  # the next save will be about this size
                return state
        if committed:
            raise CheckpointError(
                f"none of the {len(committed)} committed checkpoints in {self.directory} verifies",
                path=self.directory,
                fix="restore the checkpoint directory from a copy, or move it away to "
                "deliberately start from scratch",
            )
        return None

    def resume(self, loop: Any) -> bool:
        """Load the newest valid checkpoint into ``loop`` (a ``TrainLoop`` or anything with
        ``load(state)``); False on a fresh start."""
        state = self.load_latest()
        if state is None:
            return False
        loop.load(state)
        return True

    def latest_info(self, verify: bool = True) -> CheckpointInfo | None:
        """The newest committed checkpoint's record (hash-verified unless ``verify=False``),
        without unpickling any tensors; ``None`` if there is none."""
        for info in self._committed():
            if not verify or _store.read_verified(info) is not None:
                return info
        return None

    def _committed(self) -> list[CheckpointInfo]:
        """Local records, plus the mirror's (a new session's local disk is empty)."""
        return committed(self.directory, self.mirror.directory if self.mirror else None)

    # --- saving --------------------------------------------------------------------------

    def reserve(self, state_or_bytes: Any) -> None:
        """Allocate the staging arena now, in the background, for a state like this one (or
        this many bytes), so the first asynchronous save blocks only for its memcpy.

        A fresh arena has to be faulted in page by page (~0.25-0.3 s per 500 MB on a VM);
        ``load_latest`` reserves by itself in asynchronous mode, a fresh run can call this once
        its model and optimizer state exist. The next ``save`` waits for the allocation."""
        if not self.writes:
            return
        self.wait()
        nbytes = state_or_bytes if isinstance(state_or_bytes, int) else plan(state_or_bytes).total
        self._reserving = threading.Thread(
            target=self._reserve, args=(nbytes,), name="rgt-ckpt-reserve", daemon=True
        )
        self._reserving.start()

    def _reserve(self, nbytes: int) -> None:
        try:
            self._arena.ensure(nbytes)
        except (OSError, MemoryError) as exc:  # the save itself will try again, and raise
            log.warning("could not reserve a %d-byte checkpoint staging buffer: %s", nbytes, exc)

    def save(self, state: Any, step: int, metric: float | None = None) -> CheckpointInfo:
        """Checkpoint ``state`` as ``step``: atomic, verified, old ones rotated after commit.

        Synchronous: returns the committed record. Asynchronous: returns once the state is
        snapshotted (training may then change it); the record's ``file_hash``/``state_digest``
        are empty until ``wait()`` returns the committed one. An error of the previous
        background save is raised here (or by ``wait``).
        """
        started = time.perf_counter()
        if not self.writes:  # rank 0 writes this step's checkpoint; this rank its own parts
            local = _ranks.rank_local(state)
            if local is not None:
                self._own_store().save(local, step)
            self._after_save(started)
            return CheckpointInfo(step, "", "", "", _float(metric), time.time(), 0)
        self.wait()  # never two writes in flight: the arena belongs to the writer until durable
        os.makedirs(self.directory, exist_ok=True)
        layout = plan(state)
        check_budget(self.directory, layout.total)
        stage(self._arena, layout)
        pending = CheckpointInfo(step, "", "", "", _float(metric), time.time(), layout.total)
        if self.asynchronous:
            self._writer = threading.Thread(
                target=self._write_in_background, args=(pending, layout), name="rgt-ckpt-writer"
            )
            self._writer.start()
            info = pending
        else:
            info = self._persist_and_commit(pending, layout)
        self._after_save(started)
        return info

    def wait(self) -> CheckpointInfo | None:
        """Block until the last save is durable and committed; its record (``None`` if no save
        ran). Raises that save's error, once."""
        if self._reserving is not None:
            self._reserving.join()
            self._reserving = None
        if self._writer is not None:
            self._writer.join()
            self._writer = None
        outcome, self._outcome = self._outcome, None
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    def _own_store(self) -> Checkpointer:
        if self._own is None:
            own = _ranks.rank_directory(self.directory, self.rank)
            self._own = Checkpointer(own, keep_last=self.keep_last, rank=0)
        return self._own

    @property
    def writes(self) -> bool:
        """Whether this process writes checkpoints (global rank 0)."""
        return self.rank == 0

    @property
    def writing(self) -> bool:
        """Whether a background save is still being persisted."""
        return self._writer is not None and self._writer.is_alive()

    def _write_in_background(self, pending: CheckpointInfo, layout: Any) -> None:
        try:
            self._outcome = self._persist_and_commit(pending, layout)
        except BaseException as exc:  # handed to the training thread by wait()/save()
            log.error("background checkpoint of step %s failed: %s", pending.step, exc)
            self._outcome = exc

    def _persist_and_commit(self, pending: CheckpointInfo, layout: Any) -> CheckpointInfo:
        """The path both modes share: data file, commit record, rotation, in that order."""
        started = time.perf_counter()
        done = _persist.persist(self.directory, pending.step, self._arena, layout)
        info = CheckpointInfo(
            pending.step,
            done.path,
            done.file_hash,
            done.state_digest,
            pending.metric,
            pending.time,
            done.bytes,
        )
        info = _store.commit_whole(self.directory, info)
        _persist._hold("committed")
        # Retention only after the new checkpoint is committed: a crash in it loses nothing.
        _store.rotate(self.directory, info, self.keep_last, self.best_metric, self.mode)
        self.last_durable_at = time.perf_counter()
        self.last_persist_seconds = self.last_durable_at - started
        if self.mirror is not None:  # local first, then the verified copy to the durable folder
            self.mirror.flush(info, self.keep_last, self.best_metric, self.mode)
        return info

    def _after_save(self, started: float) -> None:
        self._count_save(started)
        if self.kill_after_save is not None and self.saves == self.kill_after_save:
            # The smoke/demo resume check: a real kill -9 at a deterministic point, once the
            # save it follows is durable.
            self.wait()
            sys.stdout.flush()
            sys.stderr.flush()
            os.kill(os.getpid(), signal.SIGKILL)


def _float(metric: float | None) -> float | None:
    return None if metric is None else float(metric)
