"""The torch side of sharded checkpoints: one rank's shard out of a DTensor state, and loading a
step on any world size through torch.distributed.checkpoint's resharding planner.

Saving. The state is flattened the way DCP flattens it (``"optim.state.0.weight.exp_avg"``), and
every entry goes into this rank's shard: a DTensor as its local tensor plus the chunk it covers
in the global tensor (offsets and global size, DCP's own ``_create_chunk_list``), a plain tensor
as itself (the whole tensor at offset 0: each rank keeps its own, so per-rank RNG states survive),
anything else as a value in the data file's JSON skeleton (nothing is pickled).

Loading. From the manifest's shards this builds DCP ``Metadata`` (every tensor's global size and
the chunks the saved ranks held) and hands it, with a ``StorageReader`` over the shard files,
to ``torch.distributed.checkpoint.load(no_dist=True)``: DCP's ``DefaultLoadPlanner``
works out which saved chunks overlap what this rank holds now, whatever the world size, and the
reader copies those slices in place. No collective runs: each rank reads the files it needs. A
chunk saved by several ranks (a replicated tensor, a plain tensor, a value) is read from this
rank's own shard when it has one, else from the lowest rank. Every shard file read is read
once, front to back, into the destination tensors and hashed on the way (``_shardfile``), and
the load counts only if each hash matches.
"""

from __future__ import annotations

import json
import warnings
from typing import Any

import torch
from torch.distributed.checkpoint._nested_dict import flatten_state_dict
from torch.distributed.checkpoint.api import CheckpointException
from torch.distributed.checkpoint.default_planner import DefaultLoadPlanner
from torch.distributed.checkpoint.metadata import (
    BytesStorageMetadata,
    ChunkStorageMetadata,
    Metadata,
    MetadataIndex,
    TensorProperties,
    TensorStorageMetadata,
)
from torch.distributed.checkpoint.planner import LoadItemType, LoadPlan, LoadPlanner, ReadItem
from torch.distributed.checkpoint.planner_helpers import _create_chunk_list
from torch.distributed.checkpoint.state_dict_loader import load as dcp_load
from torch.distributed.checkpoint.storage import StorageReader

from rgt.ckpt._shardfile import Request, ShardFile, _numel
from rgt.ckpt._shards import ShardedInfo
from rgt.errors import CheckpointError

SHARD_KEY, VALUES_KEY = "rgt.shard", "values"


def shard_state(
    state: Any, rank: int, world: int, step: int, chunks: ChunkCache | None = None
) -> dict[str, Any]:
    """What this rank writes: its local tensors and values, and the chunk table of DTensors
    (as one JSON string: a nested table would be a few framing pieces per tensor to lay out
    at every save, ~5 ms of a save's blocking part for 176 tensors)."""
    flat, _ = flatten_state_dict(state)
    cache = chunks or ChunkCache()
    values: dict[str, Any] = {}
    table: dict[str, list[list[int]]] = {}
    for fqn, obj in flat.items():
        if isinstance(obj, torch.Tensor):
            offsets = cache.offsets(obj)
            if offsets is None:
                continue  # a DTensor this rank holds no part of
            table[fqn] = [list(obj.shape), offsets]
            values[fqn] = _local(obj)
        else:
            values[fqn] = obj
    table_json = json.dumps(table, separators=(",", ":"))
    meta = {"rank": rank, "world_size": world, "step": step, "chunks": table_json}
    return {SHARD_KEY: meta, VALUES_KEY: values}


def _local(obj: Any) -> Any:
    """This rank's own tensor of a DTensor (its bytes are all a save reads), else ``obj``."""
    local = getattr(obj, "_local_tensor", None)  # what to_local() returns, minus autograd
    if isinstance(local, torch.Tensor):
        return local
    return obj.to_local() if hasattr(obj, "to_local") else obj


class ChunkCache:
    """Where this rank's part of each DTensor lies in the global tensor, kept between saves.

    DCP works it out through the device mesh for every tensor (~6 ms for 176 tensors here, a
    sixth of a save's blocking part), yet it changes only with the global shape, the
    placements or the mesh, which make the key (the mesh is held, so its id stays its own)."""

    def __init__(self) -> None:
        self._known: dict[tuple[Any, ...], tuple[Any, list[int] | None]] = {}

    def offsets(self, tensor: Any) -> list[int] | None:
        """The chunk's offsets in the global tensor; None if this rank holds none of it."""
        mesh, placements = getattr(tensor, "device_mesh", None), getattr(tensor, "placements", None)
        if mesh is None or placements is None:
            return _offsets(tensor)
        key = (id(mesh), tuple(tensor.shape), tuple(placements))
        if key not in self._known:
            self._known[key] = (mesh, _offsets(tensor))
        return self._known[key][1]


def _offsets(tensor: Any) -> list[int] | None:
    local_chunks = _create_chunk_list(tensor)
    return [int(o) for o in local_chunks[0].offsets] if local_chunks else None


class _Value:
    """A non-tensor value handed to the planner as is (DCP's default would unpickle bytes)."""

    def __init__(self, obj: Any) -> None:
        self.obj = obj


class ValuePlanner(DefaultLoadPlanner):
    """DCP's resharding load planner; values come as objects, never through ``torch.load``."""

    def load_bytes(self, read_item: ReadItem, value: Any) -> None:
        obj = value.obj if isinstance(value, _Value) else value
        if self.flatten_state_dict:
            from torch.distributed.checkpoint._traverse import set_element

            set_element(self.original_state_dict, self.mappings[read_item.dest_index.fqn], obj)
        else:
            self.state_dict[read_item.dest_index.fqn] = obj


class ShardReader(StorageReader):
    """Serves DCP's read items from the shard files of one committed step."""

    def __init__(self, info: ShardedInfo, rank: int) -> None:
        super().__init__()
        self.info, self.rank = info, rank
        self._open: dict[int, ShardFile] = {}
        try:
            self.metadata, self.sources = self._index()
        except BaseException:
            self.verified()  # closes what was opened
            raise

    def shard(self, rank: int) -> ShardFile:
        if rank not in self._open:
            s = self.info.shards[rank]
            self._open[rank] = ShardFile(s.path, s.file_hash, s.bytes)
            if rank == self.rank:
                # This rank's own shard holds what it needs whenever the sharding is unchanged
                # (the common resume): start reading it now, under DCP's load planning.
                self._open[rank].prefetch()
        return self._open[rank]

    def _order(self) -> list[int]:
        ranks = list(range(self.info.world_size))
        return ([self.rank] if self.rank in ranks else []) + [r for r in ranks if r != self.rank]

    def _index(self) -> tuple[Metadata, dict[MetadataIndex, int]]:
        md: dict[str, Any] = {}
        sources: dict[MetadataIndex, int] = {}
        for rank in self._order():
            shard = self.shard(rank)
            for fqn in shard.nodes:
                _describe(md, sources, shard, fqn, rank)
        return Metadata(state_dict_metadata=md), sources

    def reset(self, checkpoint_id: Any = None) -> None:
        pass

    def read_metadata(self, *args: Any, **kwargs: Any) -> Metadata:
        return self.metadata

    def set_up_storage_reader(self, metadata: Metadata, is_coordinator: bool, *_: Any) -> None:
        pass

    def prepare_local_plan(self, plan: LoadPlan) -> LoadPlan:
        return plan

    def prepare_global_plan(self, plans: list[LoadPlan]) -> list[LoadPlan]:
        return plans

    def read_data(self, plan: LoadPlan, planner: LoadPlanner) -> Any:
        """Values from the skeletons; then each shard file needed is streamed once, in order,
        its tensors read into their destinations and every byte hashed (``_shardfile``)."""
        wanted: dict[int, dict[int, list[Request]]] = {}
        for item in plan.items:
            rank = self.sources[item.storage_index]
            shard, arrays = self.shard(rank), wanted.setdefault(rank, {})
            fqn = item.storage_index.fqn
            if item.type == LoadItemType.BYTE_IO:
                planner.load_bytes(item, _Value(shard.value(fqn)))  # type: ignore[arg-type]
                continue
            request = _request(item, planner, shard.entry(fqn)[1])
            arrays.setdefault(shard.array_of(fqn), []).append(request)
        for rank in sorted(wanted):
            self.shard(rank).stream(wanted[rank])
        done: torch.futures.Future[None] = torch.futures.Future()
        done.set_result(None)
        return done

    @classmethod
    def validate_checkpoint_id(cls, checkpoint_id: Any) -> bool:
        return False

    def verified(self) -> list[str]:
        """The shard files read that do not match their recorded size and hash; closes them."""
        try:
            return [s.path for s in self._open.values() if s.ok is False]
        finally:
            for shard in self._open.values():
                shard.close()


def _describe(
    md: dict[str, Any], sources: dict[MetadataIndex, int], shard: ShardFile, fqn: str, rank: int
) -> None:
    """Add ``fqn`` of ``rank``'s shard to the metadata unless a preferred rank already has it."""
    chunk = shard.chunks.get(fqn)
    if chunk is None:
        if fqn not in md:
            md[fqn] = BytesStorageMetadata()
            sources[MetadataIndex(fqn)] = rank
        return
    size, offsets = torch.Size(chunk[0]), torch.Size(chunk[1])
    dtype, shape = shard.entry(fqn)
    entry = md.get(fqn)
    if entry is None:
        entry = md[fqn] = TensorStorageMetadata(TensorProperties(dtype=dtype), size, [])
    index = MetadataIndex(fqn, offsets)
    if index in sources or not isinstance(entry, TensorStorageMetadata) or entry.size != size:
        return
    if _numel(shape) == 0 and _numel(list(size)) > 0:
        return  # an uneven shard that holds nothing
    entry.chunks.append(ChunkStorageMetadata(offsets=offsets, sizes=torch.Size(shape)))
    sources[index] = rank


def _request(item: ReadItem, planner: LoadPlanner, shape: list[int]) -> Request:
    """What reading ``item`` means: fill its destination, whole or from a slice of the array."""
    target = planner.resolve_tensor(item).detach()
    whole = not any(item.storage_offsets) and list(item.lengths) == shape

    def place(saved: Any) -> None:
        target.copy_(_narrow(saved, item))

    return Request(target, whole, place, lambda: planner.commit_tensor(item, target))


def _narrow(tensor: Any, item: ReadItem) -> Any:
    for dim, (start, length) in enumerate(zip(item.storage_offsets, item.lengths)):
        tensor = tensor.narrow(dim, start, length)
    return tensor


def load_into(state: Any, info: ShardedInfo, rank: int) -> list[str]:
    """Load ``info`` into ``state`` in place, resharded to what ``state`` holds on this rank.
    Returns what failed verification (missing, damaged, or hash-mismatched shard files): the
    load does not count then. A state that does not fit the checkpoint raises."""
    try:
        reader = ShardReader(info, rank)
    except (CheckpointError, OSError) as exc:
        return [str(exc)]
    try:
        with warnings.catch_warnings():  # no_dist=True is the point: each rank reads alone
            warnings.filterwarnings("ignore", "torch.distributed is disabled", UserWarning)
            dcp_load(state, storage_reader=reader, planner=ValuePlanner(), no_dist=True)
    except (Exception, CheckpointException) as exc:
        reader.verified()
        cause = _cause(exc)
        if isinstance(cause, (CheckpointError, OSError)):
            return [str(cause)]
        raise CheckpointError(
            f"step {info.step} in {info.folder} does not load into this state: "
            f"{type(cause).__name__}: {str(cause)[:500]}",
            path=info.folder,
            fix="pass a state with the same keys the run saved (model.state_dict(), "
            "get_optimizer_state_dict(...) after one optimizer step, ...)",
        ) from exc
    return reader.verified()


def _cause(exc: BaseException) -> BaseException:
    """The error under DCP's ``CheckpointException`` (it wraps what a step raised, per rank)."""
    failures = getattr(exc, "failures", None)
    if isinstance(failures, dict):
        for failure in failures.values():
            inner = failure[0] if isinstance(failure, tuple) else failure
            if isinstance(inner, BaseException):
                return inner
    return exc
