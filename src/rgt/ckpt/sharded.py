"""``ShardedCheckpointer``: FSDP2/DCP-style sharded checkpoints, one shard per rank, one commit.

Every rank calls ``save(state, step)`` with its own view of the state (``model.state_dict()``
of an FSDP2 model holds DTensors; ``get_optimizer_state_dict`` the optimizer's). Each rank
snapshots its shard into its staging arena, then writes it as a single-process save is written
(temp file, one XXH3 pass, fsync, rename) and records its hash; rank 0 commits
the step with one manifest once every rank's shard is durable (``_shards``: the commit point).
``load_latest(state)`` fills ``state`` in place from the newest committed step whose shards
verify on every rank, resharded by DCP when the world size or the sharding changed
(``_reshard``)::

    ckpt = ShardedCheckpointer.from_env(every_steps=100, asynchronous=True)
    state = {"model": model.state_dict(), "optim": get_optimizer_state_dict(model, opt)}
    if ckpt.load_latest(state) is not None:           # None on a fresh start
        set_optimizer_state_dict(model, opt, state["optim"])
    ...
    if ckpt.due(step):
        ckpt.save({"model": model.state_dict(), "optim": get_optimizer_state_dict(model, opt),
                   "step": step, "rng": torch.get_rng_state()}, step)
    ckpt.wait()                                       # before exiting

The shard is written through the page cache (``direct_io=False``, the default), as ``dcp.save``
writes, so it stays cached after the save: when a rank dies and the group is restarted on the
same machine (``rgt run`` does that with a retryable rank failure), ``load_latest`` reads memory.
A buffered write into a new file is expensive (every page of it a freshly allocated page-cache
page), so rotation keeps the shards it removes as spares and the next save writes over one
(``_spares``), whose pages are still cached. Measured on the 2-core VM, CPU-seconds per 528 MB
save (both ranks): 0.24-3.7 into new files, 0.17-0.39 over recycled ones, 0.10-0.21 with
``O_DIRECT`` (BENCHMARKS.md). The first saves, before any rotation, and ``keep_last=None``
have no spares and pay the new-file cost.
``direct_io=True`` (or ``RGT_CKPT_DIRECT_IO=1``) writes with ``O_DIRECT``: the cheapest write,
and the page cache is left to the data set, but a restart then reads the shard from disk, as
every load after a preemption (a new machine) does; ``_shardfile`` prefetches it so the reads
overlap DCP's load planning.

Only the first save is collective (rank 0 broadcasts the session name of the step folders);
saving and loading are otherwise free of collectives, except that ``load_latest`` agrees over
the process group on whether a step verified on every rank before using it.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from rgt.ckpt import _persist, _ranks, _shards, _spares, _store
from rgt.ckpt._arena import Arena, stage
from rgt.ckpt._budget import check_budget
from rgt.ckpt._cadence import Cadence
from rgt.ckpt._format import plan
from rgt.ckpt._plan import IntervalPlanner
from rgt.ckpt._shards import Shard, ShardedInfo
from rgt.ckpt._signals import StopRequest
from rgt.errors import CheckpointError, DiskBudgetError, UsageError


class ShardedCheckpointer(Cadence):
    """Saves and loads sharded checkpoints of one run in one directory (see the module doc).

    ``keep_last`` committed steps are kept (``None``: all). ``asynchronous=True``: ``save``
    returns once this rank's shard is snapshotted. ``commit_timeout_s``: how long rank 0 waits
    for the other ranks' shards of a step before giving up on committing it. ``rank`` and
    ``world_size`` override the process group (or the launcher's environment); ``session``
    names this run's step folders (default: rank 0 draws one and broadcasts it at the first
    save; ranks that run without a process group must pass the same name). ``direct_io``:
    write shards with ``O_DIRECT`` rather than through the page cache (see the module doc).
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        keep_last: int | None = 3,
        every_steps: int | None = None,
        every_seconds: float | None = None,
        asynchronous: bool = False,
        mtbf_s: float | None = None,
        commit_timeout_s: float = 600.0,
        rank: int | None = None,
        world_size: int | None = None,
        session: str | None = None,
        direct_io: bool = False,
    ) -> None:
        if keep_last is not None and keep_last < 1:
            raise UsageError(
                f"keep_last must be >= 1 or None, not {keep_last}",
                fix="keep at least the newest checkpoint",
            )
        if session is not None and not _shards.SESSION.fullmatch(session):
            raise UsageError(
                f"session must be 8-32 lowercase hex digits, not {session!r}",
                fix="pass e.g. secrets.token_hex(8), the same on every rank",
            )
        self.directory = os.fspath(directory)
        self.keep_last, self.asynchronous, self.direct_io = keep_last, asynchronous, direct_io
        self.every_steps, self.every_seconds = every_steps, every_seconds
        self.commit_timeout_s = commit_timeout_s
        self.smoke = os.environ.get("RGT_SMOKE") == "1"
        self.planner = IntervalPlanner(mtbf_s) if mtbf_s else None
        self._rank, self._world = rank, world_size
        self.saves = 0
        self.last_save_seconds: float | None = None
        self.last_durable_at: float | None = None
        self.loaded: ShardedInfo | None = None
        self._session = session
        self._arena = Arena()
        self._chunks: Any = None  # _reshard.ChunkCache, made at the first save (imports torch)
        # One long-lived writer thread: starting a thread per save costs the loop a scheduling
        # round trip (10-15 ms measured on a loaded 2-core box), a queue hand-off does not.
        self._pool: ThreadPoolExecutor | None = None
        self._pending: Future[ShardedInfo] | None = None
        self._stop = StopRequest()
        self._last_save_clock = time.monotonic()

    @classmethod
    def from_env(
        cls, default_dir: str | os.PathLike[str] | None = None, **options: Any
    ) -> ShardedCheckpointer:
        """``RGT_CKPT_DIR`` (else ``default_dir`` or ``./checkpoints``); ``RGT_CKPT_ASYNC=1``,
        ``RGT_CKPT_DIRECT_IO=1`` and ``RGT_MTBF_S`` apply unless passed here."""
        directory = os.environ.get("RGT_CKPT_DIR") or default_dir or "checkpoints"
        for option, name in (
            ("asynchronous", "RGT_CKPT_ASYNC"),
            ("direct_io", "RGT_CKPT_DIRECT_IO"),
        ):
            if option not in options and os.environ.get(name):
                options[option] = os.environ[name] == "1"
        if "mtbf_s" not in options and os.environ.get("RGT_MTBF_S", "").strip():
            options["mtbf_s"] = float(os.environ["RGT_MTBF_S"])
        return cls(directory, **options)

    # --- who we are ----------------------------------------------------------------------

    def group(self) -> tuple[int, int]:
        """(rank, world size): the overrides, else the process group, else the environment."""
        dist = _dist()
        if self._rank is None and dist is not None:
            return dist.get_rank(), dist.get_world_size()
        rank = _ranks.rank_from_env() if self._rank is None else self._rank
        return rank, self._world or (world_from_env() if self._rank is None else rank + 1)

    def _session_name(self, world: int) -> str:
        """Rank 0's fresh name for this run's step folders, broadcast once (a collective)."""
        if self._session is None:
            token = [secrets.token_hex(8)]
            dist = _dist()
            if dist is not None and world > 1 and self._rank is None:
                dist.broadcast_object_list(token, src=0)
            self._session = str(token[0])
        return self._session

    # --- loading -------------------------------------------------------------------------

    def load_latest(self, state: Any) -> ShardedInfo | None:
        """Fill ``state`` in place from the newest committed step that verifies on every rank;
        ``None`` (``state`` untouched) on a fresh start. Falls back over steps with a corrupt
        shard with a warning; raises ``CheckpointError`` if steps exist but none verifies."""
        from rgt.ckpt._reshard import load_into

        rank, _ = self.group()
        committed = _agreed(_shards.list_committed(self.directory), self.directory)
        for info in committed:
            bad = load_into(state, info, rank)
            if _everyone(not bad):
                self.loaded = info
                return info
            _store.warn(
                f"sharded step {info.step}: shard(s) {bad or 'of another rank'} corrupt or "
                "truncated; trying an older step"
            )
        if committed:
            raise CheckpointError(
                f"none of the {len(committed)} committed sharded steps in {self.directory} "
                "verifies",
                path=self.directory,
                fix="restore the checkpoint directory from a copy, or move it away to "
                "deliberately start from scratch",
            )
        return None

    def latest_info(self) -> ShardedInfo | None:
        """The newest committed step's manifest (not hash-verified); ``None`` if none."""
        committed = _shards.list_committed(self.directory)
        return committed[0] if committed else None

    # --- saving --------------------------------------------------------------------------

    def save(self, state: Any, step: int, metric: float | None = None) -> ShardedInfo:
        """Write this rank's shard of ``step``; every rank must call it for the same steps.

        Synchronous: on rank 0 returns the committed step (after every rank's shard is
        durable), on other ranks the record of their own shard. Asynchronous: returns once the
        shard is snapshotted; ``wait()`` returns what the synchronous call would have."""
        from rgt.ckpt._reshard import ChunkCache, shard_state

        started = time.perf_counter()
        self.wait()  # never two writes in flight: the arena belongs to the writer until durable
        rank, world = self.group()
        folder = _shards.step_folder(self.directory, step, self._session_name(world))
        os.makedirs(folder, exist_ok=True)
        self._chunks = self._chunks or ChunkCache()
        layout = plan(shard_state(state, rank, world, step, self._chunks))
        self._check_budget(folder, layout.total)
        stage(self._arena, layout)
        job = (folder, step, rank, world, None if metric is None else float(metric))
        pending = ShardedInfo(step, folder, world, self._session or "", (), job[4], time.time())
        if self.asynchronous:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(1, thread_name_prefix="rgt-ckpt-shard-writer")
            self._pending = self._pool.submit(self._write, job, layout)
            info = pending
        else:
            info = self._write(job, layout)
        self._count_save(started)
        return info

    def _check_budget(self, folder: str, need: int) -> None:
        """The disk-budget check, counting the spares' space as free (``_spares``)."""
        try:
            check_budget(folder, need)
        except DiskBudgetError:
            if not _spares.drop(self.directory):
                raise
            check_budget(folder, need)

    def wait(self) -> ShardedInfo | None:
        """Block until the last save is durable (and, on rank 0, committed); its record."""
        pending, self._pending = self._pending, None
        return None if pending is None else pending.result()  # raises that save's error, once

    @property
    def writing(self) -> bool:
        return self._pending is not None and not self._pending.done()

    def _write(self, job: tuple[str, int, int, int, float | None], layout: Any) -> ShardedInfo:
        """This rank's shard and record; on rank 0 then the commit and the rotation."""
        folder, step, rank, world, metric = job
        session = self._session or ""
        done = _persist.persist(
            folder, step, self._arena, layout, direct=self.direct_io, spares=self.directory
        )
        own = Shard(rank, done.path, done.bytes, done.file_hash, done.state_digest)
        try:
            _shards.write_shard_record(folder, step, session, world, own)
        except OSError as exc:  # disk or inodes ran out: the unrecorded data file goes too
            with contextlib.suppress(OSError):
                os.unlink(own.path)
            raise _persist.translate(exc, folder, own.bytes) from exc
        _persist._hold("shard-recorded")
        if rank != 0:
            self.last_durable_at = time.perf_counter()
            return ShardedInfo(step, folder, world, session, (own,), metric, time.time())
        shards = _shards.wait_for_shards(folder, step, session, world, self.commit_timeout_s)
        try:
            info = _shards.commit(folder, step, session, shards, metric)
        except OSError as exc:  # the step stays uncommitted; the previous one is the latest
            raise _persist.translate(exc, folder, 0) from exc
        self.last_durable_at = time.perf_counter()
        _persist._hold("committed")
        _shards.rotate(self.directory, info, self.keep_last, world)  # only after the commit
        return info


def world_from_env() -> int:
    for size_var in ("WORLD_SIZE", "SLURM_NTASKS"):
        size = os.environ.get(size_var, "").strip()
        if size.isdigit() and int(size) > 1:
            return int(size)
    return 1


def _dist() -> Any:
    """torch.distributed when a process group is up (torch is never imported for this)."""
    import sys

    dist = sys.modules.get("torch.distributed")
    if dist is None or not dist.is_available() or not dist.is_initialized():
        return None
    return dist


def _agreed(committed: list[ShardedInfo], directory: str) -> list[ShardedInfo]:
    """The committed steps every rank sees, newest first, in the same order on every rank (so
    that the per-step agreement below is never a collective some ranks skip)."""
    dist = _dist()
    if dist is None or dist.get_world_size() == 1:
        return committed
    import torch

    device = "cuda" if dist.get_backend() == "nccl" else "cpu"
    counts = torch.tensor([len(committed), -len(committed)], device=device)
    dist.all_reduce(counts, op=dist.ReduceOp.MAX)
    most, fewest = int(counts[0].item()), -int(counts[1].item())
    if fewest == 0 and most > 0:
        raise CheckpointError(
            f"some ranks see committed sharded steps in {directory} and some see none",
            path=directory,
            fix="every rank must see the same checkpoint directory (a shared filesystem), "
            "as with DCP's FileSystemWriter",
        )
    if fewest == 0:
        return []
    steps = torch.tensor([info.step for info in committed[:fewest]], device=device)
    low, high = steps.clone(), steps.clone()
    dist.all_reduce(low, op=dist.ReduceOp.MIN)
    dist.all_reduce(high, op=dist.ReduceOp.MAX)
    same = (low == high).tolist()
    return committed[: same.index(False) if False in same else fewest]


def _everyone(ok: bool) -> bool:
    """Whether ``ok`` holds on every rank of the process group (this rank's alone without)."""
    dist = _dist()
    if dist is None or dist.get_world_size() == 1:
        return ok
    import torch

    device = "cuda" if dist.get_backend() == "nccl" else "cpu"
    flag = torch.tensor([1 if ok else 0], device=device)
    dist.all_reduce(flag, op=dist.ReduceOp.MIN)
    return bool(flag.item())
