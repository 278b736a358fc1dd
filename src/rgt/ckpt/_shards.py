"""The on-disk layout of a sharded checkpoint (format ``rgt.ckpt.sharded/1``) and its commit point.

In an FSDP2/DCP-style run every rank holds a different slice of the model and optimizer, so every
rank writes its own shard. One step is one folder, the unit the agent, ``pull`` and the gate see::

    <dir>/step-000000001200-<session>/
        ckpt-<step>-<token>.rgt        rank r's shard: an ordinary rgt.ckpt data file (atomic,
                                       fsynced, hashed in the one write pass), one per rank
        ckpt-rank-00001.json           rank r's shard record: file, bytes, hash, state_digest;
                                       written after its data file is durable
        manifest.json                  the step's ONE manifest, written LAST by rank 0
        abandoned-rank-00001.json      instead of a shard record: rank r gave this step up
                                       (an overlapped copy saw a tensor change, ``_overlap``)
    <dir>/.tmp-spare-<token>.part      a rotated-out shard kept for the next save to write over
                                       (``_spares``; an in-flight name every reader ignores)

The commit point is the rename of ``manifest.json``. Rank 0 writes it only once every rank's
shard record of this step and session exists and names a data file of the recorded size, i.e.
once every shard is written, fsynced and hashed. ``load_latest`` and the agent's resume finder
see only folders with a manifest, so a crash between shards (one rank's data written, another's
not) leaves the previous step as the latest. A rank that gives a step up writes an abandoned
record instead of its shard record, and rank 0 stops waiting for that step at once. No
collective is needed to commit: ranks share the checkpoint filesystem (as DCP's own
``FileSystemWriter`` assumes), and rank 0 watches it.

``<session>`` is drawn by rank 0 once per ``ShardedCheckpointer`` and broadcast at its first save:
a step saved again after a restart goes into a fresh folder, so rank 0 never mistakes a shard
record left by an earlier run for one of this save. Standard library only.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import time
from dataclasses import dataclass

from rgt._fs import atomic_write_json, fsync_dir
from rgt.ckpt import _spares
from rgt.ckpt._persist import DATA_PREFIX, DATA_SUFFIX
from rgt.ckpt._store import warn
from rgt.errors import CheckpointError

FORMAT = "rgt.ckpt.sharded/1"
SHARD_FORMAT = "rgt.ckpt.shard/1"
ABANDONED_FORMAT = "rgt.ckpt.shard-abandoned/1"
MANIFEST = "manifest.json"
STEP_DIR = re.compile(r"^step-(\d{12})-([0-9a-f]{8,32})$")
SESSION = re.compile(r"[0-9a-f]{8,32}")
SHARD_RECORD = re.compile(r"^ckpt-rank-(\d{5})\.json$")


@dataclass(frozen=True)
class Shard:
    """One rank's shard of one step, as its shard record (and the manifest) describe it."""

    rank: int
    path: str
    bytes: int
    file_hash: str  # tagged with its algorithm (``_hash.tagged``)
    state_digest: str


@dataclass(frozen=True)
class ShardedInfo:
    """A committed sharded step: what its manifest says. Reading it loads no tensors."""

    step: int
    folder: str
    world_size: int
    session: str
    shards: tuple[Shard, ...]
    metric: float | None
    time: float

    @property
    def bytes(self) -> int:
        return sum(shard.bytes for shard in self.shards)

    @property
    def manifest(self) -> str:
        return os.path.join(self.folder, MANIFEST)


def step_folder(directory: str, step: int, session: str) -> str:
    return os.path.join(directory, f"step-{step:012d}-{session}")


def shard_record(folder: str, rank: int) -> str:
    return os.path.join(folder, f"ckpt-rank-{rank:05d}.json")


def write_shard_record(folder: str, step: int, session: str, world: int, shard: Shard) -> None:
    """Rank ``shard.rank``'s half of the commit: its data file is durable, here is its hash."""
    atomic_write_json(
        shard_record(folder, shard.rank),
        {
            "format": SHARD_FORMAT,
            "step": step,
            "session": session,
            "rank": shard.rank,
            "world_size": world,
            "file": os.path.basename(shard.path),
            "bytes": shard.bytes,
            "hash": shard.file_hash,
            "state_digest": shard.state_digest,
        },
    )


def abandoned_record(folder: str, rank: int) -> str:
    return os.path.join(folder, f"abandoned-rank-{rank:05d}.json")


def write_abandoned(folder: str, step: int, session: str, rank: int, reason: str) -> None:
    """Rank ``rank`` will not write its shard of this step (``reason``): never commit it."""
    atomic_write_json(
        abandoned_record(folder, rank),
        {
            "format": ABANDONED_FORMAT,
            "step": step,
            "session": session,
            "rank": rank,
            "reason": reason,
        },
    )


def _abandoned(folder: str, rank: int, step: int, session: str) -> str | None:
    """Why rank ``rank`` gave up this very save, or None if it did not."""
    try:
        with open(abandoned_record(folder, rank), encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or (data.get("step"), data.get("session")) != (step, session):
        return None
    return str(data.get("reason", ""))


def _read_shard(folder: str, rank: int, step: int, session: str) -> Shard | None:
    """Rank ``rank``'s shard of this very save, or None while it is not (yet) written."""
    try:
        with open(shard_record(folder, rank), encoding="utf-8") as handle:
            data = json.load(handle)
        if (data.get("step"), data.get("session"), data.get("rank")) != (step, session, rank):
            return None
        shard = _shard(folder, data)
    except (OSError, ValueError, KeyError, TypeError):
        return None
    try:
        return shard if os.stat(shard.path).st_size == shard.bytes else None
    except OSError:
        return None


def _shard(folder: str, data: dict[str, object]) -> Shard:
    name = str(data["file"])
    if os.path.basename(name) != name or name in ("", ".", ".."):
        raise ValueError(f"a shard file outside its folder: {name!r}")
    return Shard(
        int(str(data["rank"])),
        os.path.join(folder, name),
        int(str(data["bytes"])),
        str(data["hash"]),
        str(data.get("state_digest", "")),
    )


def wait_for_shards(
    folder: str, step: int, session: str, world: int, timeout_s: float
) -> list[Shard]:
    """Every rank's shard of this save, once all are durable; raises after ``timeout_s``, or
    as soon as a rank has abandoned the step."""
    deadline, pause = time.monotonic() + timeout_s, 0.001
    found: dict[int, Shard] = {}
    while True:
        for rank in range(world):
            shard = found.get(rank) or _read_shard(folder, rank, step, session)
            if shard is not None:
                found[rank] = shard
            elif (reason := _abandoned(folder, rank, step, session)) is not None:
                raise _gave_up(folder, step, rank, reason)
        if len(found) == world:
            return [found[rank] for rank in range(world)]
        if time.monotonic() > deadline:
            raise _never_written(folder, step, world, sorted(set(range(world)) - set(found)))
        time.sleep(pause)
        pause = min(pause * 2, 0.05)


def _never_written(folder: str, step: int, world: int, missing: list[int]) -> CheckpointError:
    return CheckpointError(
        f"step {step} not committed: rank(s) {missing} of {world} never wrote their shard in "
        f"{folder}; the previous committed step is still the latest",
        path=folder,
        fix="a rank died or stopped saving: every rank must call save() for the same steps; "
        "raise commit_timeout_s if ranks are just slow",
    )


def _gave_up(folder: str, step: int, rank: int, reason: str) -> CheckpointError:
    return CheckpointError(
        f"step {step} not committed: rank {rank} abandoned its shard in {folder} ({reason}); "
        "the previous committed step is still the latest",
        path=folder,
        fix=f"see rank {rank}'s own error: save after the optimizer step, or turn overlap "
        "off (overlap=False, RGT_CKPT_OVERLAP=0)",
    )


def commit(
    folder: str, step: int, session: str, shards: list[Shard], metric: float | None
) -> ShardedInfo:
    """Write the manifest (atomically, durably): from now on the step exists."""
    info = ShardedInfo(step, folder, len(shards), session, tuple(shards), metric, time.time())
    atomic_write_json(
        info.manifest,
        {
            "format": FORMAT,
            "step": step,
            "session": session,
            "world_size": info.world_size,
            "metric": metric,
            "time": info.time,
            "bytes": info.bytes,
            "shards": [
                {
                    "rank": s.rank,
                    "file": os.path.basename(s.path),
                    "bytes": s.bytes,
                    "hash": s.file_hash,
                    "state_digest": s.state_digest,
                }
                for s in shards
            ],
        },
    )
    return info


def read_manifest(folder: str) -> ShardedInfo | None:
    """The committed step in ``folder``; None if it has no manifest (warned if unreadable)."""
    path = os.path.join(folder, MANIFEST)
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        warn(f"ignoring unreadable sharded-checkpoint manifest {path}: {exc}")
        return None
    try:
        if data.get("format") != FORMAT:
            raise ValueError(f"unknown format {data.get('format')!r}")
        shards = tuple(_shard(folder, entry) for entry in data["shards"])
        if [s.rank for s in shards] != list(range(int(data["world_size"]))):
            raise ValueError("the shards are not ranks 0..world_size-1")
        metric = data.get("metric")
        return ShardedInfo(
            int(data["step"]),
            folder,
            len(shards),
            str(data["session"]),
            shards,
            None if metric is None else float(metric),
            float(data["time"]),
        )
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        warn(f"ignoring unreadable sharded-checkpoint manifest {path}: {exc}")
        return None


def step_folders(directory: str) -> list[tuple[int, str]]:
    """(step, folder) of every step folder in ``directory``, committed or not."""
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    found = [(STEP_DIR.match(name), name) for name in names]
    return [(int(m.group(1)), os.path.join(directory, name)) for m, name in found if m]


def list_committed(directory: str) -> list[ShardedInfo]:
    """Every committed step, newest first (by step, then commit time)."""
    infos = [read_manifest(folder) for _, folder in step_folders(directory)]
    committed = [info for info in infos if info is not None]
    return sorted(committed, key=lambda info: (info.step, info.time), reverse=True)


def rotate(directory: str, newest: ShardedInfo, keep_last: int | None, spares: int = 0) -> None:
    """Keep the ``keep_last`` newest committed steps (and ``newest``); remove older committed
    steps and uncommitted folders up to ``newest.step`` (leftovers of killed saves). Folders of
    later steps are left alone: another rank may be writing its shard there right now. Up to
    ``spares`` data files of removed steps are kept for the next saves to write over."""
    committed = list_committed(directory)
    keep = {info.folder for info in (committed if keep_last is None else committed[:keep_last])}
    keep.add(newest.folder)
    for step, folder in step_folders(directory):
        if folder not in keep and step <= newest.step:
            remove(folder, spares)


def remove(folder: str, spares: int = 0) -> None:
    """Uncommit (the manifest first, durably), then delete; a kill in between leaves only an
    uncommitted folder, which the next rotation removes. With ``spares``, the shard data files
    go to the checkpoint directory's spares (``_spares``) rather than away."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(os.path.join(folder, MANIFEST))
        fsync_dir(folder)
    if spares:
        with contextlib.suppress(OSError):
            for name in os.listdir(folder):
                if name.startswith(DATA_PREFIX) and name.endswith(DATA_SUFFIX):
                    _spares.keep(os.path.join(folder, name), os.path.dirname(folder), spares)
    shutil.rmtree(folder, ignore_errors=True)
