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
A buffered write into a new file is expensive, so rotation keeps the shards it removes as
spares and the next save writes over one, whose pages are still cached (``_spares``, measured
in BENCHMARKS.md); the first saves and ``keep_last=None`` have none.
``direct_io=True`` (or ``RGT_CKPT_DIRECT_IO=1``) writes with ``O_DIRECT``: the cheapest write,
and the page cache is left to the data set, but a restart then reads the shard from disk, as
every load after a preemption (a new machine) does; ``_shardfile`` prefetches it so the reads
overlap DCP's load planning.

``overlap=True`` (with ``asynchronous=True``; or ``RGT_CKPT_OVERLAP=1``): the writer thread
copies the large CPU tensors while the loop runs the next forward and backward, and every
optimizer step waits until that copy is done (``_overlap``). A tensor changed in place outside
an optimizer step before its copy fails the save (its version counter; the step is not
committed); a change through ``.data`` bypasses version counters and is NOT detected.

Only the first save is collective (rank 0 broadcasts the session name of the step folders);
saving and loading are otherwise free of collectives, except that ``load_latest`` agrees over
the process group on whether a step verified on every rank before using it.
"""

from __future__ import annotations

import contextlib
import os
import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from rgt.ckpt import _group, _overlap, _persist, _shards, _spares, _store
from rgt.ckpt._arena import Arena, stage
from rgt.ckpt._budget import check_budget
from rgt.ckpt._cadence import Cadence
from rgt.ckpt._format import plan
from rgt.ckpt._group import agreed, everyone
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
    ``overlap``: copy the large CPU tensors on the writer thread until the next optimizer step
    (needs ``asynchronous``; see the module doc and ``_overlap``).
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
        overlap: bool = False,
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
        if overlap and not asynchronous:
            raise UsageError(
                "overlap=True needs asynchronous=True (a synchronous save has nothing to overlap)",
                fix="pass asynchronous=True as well (RGT_CKPT_ASYNC=1 with RGT_CKPT_OVERLAP=1)",
            )
        self.directory = os.fspath(directory)
        self.keep_last, self.asynchronous, self.direct_io = keep_last, asynchronous, direct_io
        self.overlap = overlap
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
        self._copy: _overlap.Copy | None = None  # the last overlapped save's copy
        self._stop = StopRequest()
        self._last_save_clock = time.monotonic()

    @classmethod
    def from_env(
        cls, default_dir: str | os.PathLike[str] | None = None, **options: Any
    ) -> ShardedCheckpointer:
        """``RGT_CKPT_DIR`` (else ``default_dir`` or ``./checkpoints``); ``RGT_CKPT_ASYNC=1``,
        ``RGT_CKPT_DIRECT_IO=1``, ``RGT_CKPT_OVERLAP=1`` and ``RGT_MTBF_S`` apply unless
        passed here."""
        directory = os.environ.get("RGT_CKPT_DIR") or default_dir or "checkpoints"
        for option, name in (
            ("asynchronous", "RGT_CKPT_ASYNC"),
            ("direct_io", "RGT_CKPT_DIRECT_IO"),
            ("overlap", "RGT_CKPT_OVERLAP"),
        ):
            if option not in options and os.environ.get(name):
                options[option] = os.environ[name] == "1"
        if "mtbf_s" not in options and os.environ.get("RGT_MTBF_S", "").strip():
            options["mtbf_s"] = float(os.environ["RGT_MTBF_S"])
        return cls(directory, **options)

    # --- who we are ----------------------------------------------------------------------

    def group(self) -> tuple[int, int]:
        """(rank, world size): the overrides, else the process group, else the environment."""
        return _group.rank_and_world(self._rank, self._world)

    def _session_name(self, world: int) -> str:
        """Rank 0's fresh name for this run's step folders, broadcast once (a collective)."""
        if self._session is None:
            self._session = _group.session_token(world, broadcast=self._rank is None)
        return self._session

    # --- loading -------------------------------------------------------------------------

    def load_latest(self, state: Any) -> ShardedInfo | None:
        """Fill ``state`` in place from the newest committed step that verifies on every rank;
        ``None`` (``state`` untouched) on a fresh start. Falls back over steps with a corrupt
        shard with a warning; raises ``CheckpointError`` if steps exist but none verifies."""
        from rgt.ckpt._reshard import load_into

        if self._copy is not None:  # the load writes into tensors the copy may still read
            self._copy.wait()
        rank, _ = self.group()
        committed = agreed(_shards.list_committed(self.directory), self.directory)
        for info in committed:
            bad = load_into(state, info, rank)
            if everyone(not bad):
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
        shard is snapshotted (with ``overlap``: its small tensors; the next optimizer step
        waits for the rest); ``wait()`` returns what the synchronous call would have."""
        from rgt.ckpt._reshard import ChunkCache, shard_state

        started = time.perf_counter()
        self.wait()  # never two writes in flight: the arena belongs to the writer until durable
        rank, world = self.group()
        folder = _shards.step_folder(self.directory, step, self._session_name(world))
        os.makedirs(folder, exist_ok=True)
        self._chunks = self._chunks or ChunkCache()
        layout = plan(shard_state(state, rank, world, step, self._chunks))
        self._check_budget(folder, layout.total)
        if self.overlap:  # the writer is idle (waited for above): its copy is the next job
            self._copy = _overlap.stage_early(self._arena, layout, state)
        else:
            stage(self._arena, layout)
        job = (folder, step, rank, world, None if metric is None else float(metric))
        pending = ShardedInfo(step, folder, world, self._session or "", (), job[4], time.time())
        if self.asynchronous:
            self._pending = self._submit(job, layout)
            info = pending
        else:
            info = self._write(job, layout)
        self._count_save(started)
        return info

    def _submit(self, job: tuple[str, int, int, int, float | None], layout: Any) -> Future[Any]:
        self._pool = self._pool or ThreadPoolExecutor(1, thread_name_prefix="rgt-ckpt-shard-writer")
        try:
            return self._pool.submit(self._write, job, layout, self._copy)
        except BaseException:
            if self._copy is not None:
                self._copy.finish()  # never leave an optimizer step waiting for no one
            raise

    @property
    def last_copy_wait_seconds(self) -> float:
        """How long optimizer steps (and ``load_latest``) waited for the last overlapped
        save's copy; 0.0 without overlap."""
        return 0.0 if self._copy is None else self._copy.waited_s

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

    def _write(
        self,
        job: tuple[str, int, int, int, float | None],
        layout: Any,
        copy: _overlap.Copy | None = None,
    ) -> ShardedInfo:
        """This rank's shard and record; on rank 0 then the commit and the rotation. With an
        overlapped ``copy``, first its tensors, and no shard if one changed meanwhile."""
        folder, step, rank, world, metric = job
        session = self._session or ""
        if copy is not None:
            copy.run()
            copy.check(folder, step, session, rank)
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
