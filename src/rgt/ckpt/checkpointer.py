"""``Checkpointer``: atomic, verified, budgeted checkpoints for a training loop."""

from __future__ import annotations

import hashlib
import io
import math
import os
import signal
import sys
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from rgt.ckpt import _store
from rgt.ckpt._budget import check_budget
from rgt.ckpt._digest import payload_estimate, state_digest
from rgt.ckpt._signals import DEFAULT_SIGNALS, StopRequest
from rgt.ckpt._store import CheckpointInfo
from rgt.ckpt._writer import write_data
from rgt.errors import CheckpointError, UsageError

MODES = ("max", "min")


class Checkpointer:
    """Saves and loads the checkpoints of one run in one directory (one writer at a time).

    ``keep_last`` newest checkpoints are kept (``None``: all), plus the best one by the
    ``metric`` passed to ``save`` when ``best_metric`` names it (``mode`` "max" or "min").
    ``every_steps`` / ``every_seconds`` set the cadence that ``due`` checks.
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
    ) -> None:
        if mode not in MODES:
            raise UsageError(f"mode must be one of {MODES}, not {mode!r}", fix="use max or min")
        if keep_last is not None and keep_last < 1:
            raise UsageError(
                f"keep_last must be >= 1 or None, not {keep_last}",
                fix="keep at least the newest checkpoint",
            )
        self.directory = os.fspath(directory)
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
        self._last_bytes = 0
        self._stop = StopRequest()

    @classmethod
    def from_env(
        cls, default_dir: str | os.PathLike[str] | None = None, **options: Any
    ) -> Checkpointer:
        """The directory rgt's agent chose (``RGT_CKPT_DIR``), else ``default_dir`` or
        ``./checkpoints`` so the same script runs without rgt around."""
        directory = os.environ.get("RGT_CKPT_DIR") or default_dir or "checkpoints"
        return cls(directory, **options)

    # --- loading -------------------------------------------------------------------------

    def load_latest(self, map_location: Any = None) -> Any:
        """The newest committed checkpoint whose sha256 verifies; ``None`` on a fresh start.

        Falls back over corrupt, truncated or missing files with a warning. If checkpoints were
        committed but none verifies, raises ``CheckpointError`` rather than silently training
        from zero.
        """
        committed = _store.list_committed(self.directory)
        for info in committed:
            state = self._load_one(info, map_location)
            if state is not None:
                self.loaded = info
                return state
        if committed:
            raise CheckpointError(
                f"none of the {len(committed)} committed checkpoints in {self.directory} verifies",
                path=self.directory,
                fix="restore the checkpoint directory from a copy, or move it away to "
                "deliberately start from scratch",
            )
        return None

    def _load_one(self, info: CheckpointInfo, map_location: Any) -> Any:
        """Hash and unpickle the same bytes in parallel; keep the result only if the hash
        matches. Parsing before the hash is known is safe: weights_only unpickling runs no
        code, and a damaged file only raises."""
        data = _store.read_data(info)
        if data is None:
            return None
        with ThreadPoolExecutor(max_workers=1) as pool:
            sha = pool.submit(lambda: hashlib.sha256(data).hexdigest())
            state, error = _deserialize(data, map_location)
            if not _store.matches(info, data, sha.result()):
                return None
        if error is not None:
            _store.warn(
                f"checkpoint step {info.step}: {info.path} verified but failed to load "
                f"({type(error).__name__}: {error}); trying an older one"
            )
        return state

    def latest_info(self, verify: bool = True) -> CheckpointInfo | None:
        """The newest committed checkpoint's record (hash-verified unless ``verify=False``),
        without unpickling any tensors; ``None`` if there is none."""
        for info in _store.list_committed(self.directory):
            if not verify or _store.read_verified(info) is not None:
                return info
        return None

    # --- saving --------------------------------------------------------------------------

    def save(self, state: Any, step: int, metric: float | None = None) -> CheckpointInfo:
        """Write ``state`` atomically as the checkpoint of ``step``; rotate old ones after."""
        started = time.perf_counter()
        os.makedirs(self.directory, exist_ok=True)
        need = max(payload_estimate(state), self._last_bytes)
        check_budget(self.directory, need)
        # Three overlapping streams (see _writer): torch.save copying storages into the page
        # cache, SHA-256 of those bytes, and state_digest of the values.
        with ThreadPoolExecutor(max_workers=2) as pool:
            digest = pool.submit(state_digest, state)
            path, sha, nbytes = write_data(
                self.directory, step, lambda out: _torch().save(state, out), pool, need
            )
            info = CheckpointInfo(
                step, path, sha, digest.result(), _float(metric), time.time(), nbytes
            )
        info = _store.commit(self.directory, info)
        self._last_bytes = nbytes
        self._rotate(info)
        self._after_save(started)
        return info

    def _rotate(self, newest: CheckpointInfo) -> None:
        """Retention runs only after the new checkpoint is committed (a crash here loses
        nothing that was needed)."""
        committed = _store.list_committed(self.directory)
        keep = self._keep(newest, committed)
        _store.remove(info for info in committed if info.record not in keep)
        _store.clean_orphans(self.directory, [i for i in committed if i.record in keep])

    def _keep(self, newest: CheckpointInfo, committed: list[CheckpointInfo]) -> set[str]:
        intact = [info for info in committed if _store.is_intact(info)]
        for info in committed:
            if info not in intact:
                _store.warn(
                    f"removing checkpoint step {info.step}: data file missing or "
                    f"wrong size ({info.path})"
                )
        ranked = intact if self.keep_last is None else intact[: self.keep_last]
        keep = {info.record for info in ranked} | {newest.record}
        best = self._best(intact)
        return keep | ({best.record} if best is not None else set())

    def _best(self, infos: Iterable[CheckpointInfo]) -> CheckpointInfo | None:
        if self.best_metric is None:
            return None
        scored = [i for i in infos if i.metric is not None and not math.isnan(i.metric)]
        sign = 1.0 if self.mode == "max" else -1.0
        # Ties go to the newer checkpoint: ``infos`` is newest first and max() keeps the first.
        return max(scored, key=lambda i: sign * (i.metric or 0.0), default=None)

    def _after_save(self, started: float) -> None:
        self.saves += 1
        self.last_save_seconds = time.perf_counter() - started
        self._last_save_clock = time.monotonic()
        if self.kill_after_save is not None and self.saves == self.kill_after_save:
            # The smoke/demo resume check: a real kill -9 at a deterministic point.
            sys.stdout.flush()
            sys.stderr.flush()
            os.kill(os.getpid(), signal.SIGKILL)

    # --- cadence and signals -------------------------------------------------------------

    def due(self, step: int | None = None, seconds: float | None = None) -> bool:
        """Should the loop save now? True every ``every_steps`` steps (``step`` > 0), when
        ``seconds`` (or ``every_seconds``) passed since the last save, after a stop signal,
        and on every call in a smoke run (``RGT_SMOKE=1``)."""
        if self.smoke or self.save_requested:
            return True
        interval = self.every_seconds if seconds is None else seconds
        if interval is None and (step is None or self.every_steps is None):
            raise UsageError(
                "due() has no cadence to check",
                fix="pass every_steps= or every_seconds= to the Checkpointer, or seconds= to due()",
            )
        if step is not None and self.every_steps and step > 0 and step % self.every_steps == 0:
            return True
        return interval is not None and time.monotonic() - self._last_save_clock >= interval

    def install_signal_handler(self, signals: Iterable[int] = DEFAULT_SIGNALS) -> None:
        """On these signals, set ``should_stop``; the loop then saves once and exits."""
        self._stop.install(signals)

    @property
    def should_stop(self) -> bool:
        return self._stop.requested

    @property
    def save_requested(self) -> bool:
        return self._stop.requested

    @property
    def stop_signal(self) -> int | None:
        """The signal that asked the run to stop, if one did."""
        return self._stop.signum


def _torch() -> Any:
    try:
        import torch
    except ImportError as exc:
        raise CheckpointError(
            "rgt.ckpt saves and loads with torch, which is not installed",
            fix="pip install torch (or remote-gpu-trainer[demo])",
        ) from exc
    return torch


def _float(metric: float | None) -> float | None:
    return None if metric is None else float(metric)


def _deserialize(data: bytes, map_location: Any) -> tuple[Any, Exception | None]:
    torch = _torch()
    try:
        # weights_only: a checkpoint is data, never code to run (no arbitrary unpickling).
        state = torch.load(io.BytesIO(data), map_location=map_location, weights_only=True)
    except Exception as exc:  # damaged bytes raise all kinds of errors
        return None, exc
    return state, None
