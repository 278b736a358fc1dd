"""The torch side of sharded checkpoints: one rank's shard out of a DTensor state, and loading a
step on any world size through torch.distributed.checkpoint's resharding planner.

Saving. The state is flattened the way DCP flattens it (``"optim.state.0.weight.exp_avg"``), and
every entry goes into this rank's shard: a DTensor as its local tensor plus the chunk it covers
in the global tensor (offsets and global size, DCP's own ``_create_chunk_list``), a plain tensor
as itself (the whole tensor at offset 0: each rank keeps its own, so per-rank RNG states survive),
anything else as a value in the data file's JSON skeleton (nothing is pickled).

Loading. From the manifest's shards this builds DCP ``Metadata`` (every tensor's global size and
the chunks the saved ranks held) and hands it, with a ``StorageReader`` over the memory-mapped
shard files, to ``torch.distributed.checkpoint.load(no_dist=True)``: DCP's ``DefaultLoadPlanner``
works out which saved chunks overlap what this rank holds now, whatever the world size, and the
reader copies those slices in place. No collective runs: each rank reads the files it needs. A
chunk saved by several ranks (a replicated tensor, a plain tensor, a value) is read from this
rank's own shard when it has one, else from the lowest rank. Every shard file read is hashed in
a second thread while it is copied from, and the load counts only if each hash matches.
"""

from __future__ import annotations

import mmap
import warnings
from concurrent.futures import Future as PyFuture
from concurrent.futures import ThreadPoolExecutor
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

from rgt.ckpt import _format, _hash
from rgt.ckpt._shards import ShardedInfo
from rgt.errors import CheckpointError

SHARD_KEY, VALUES_KEY = "rgt.shard", "values"


def shard_state(state: Any, rank: int, world: int, step: int) -> dict[str, Any]:
    """What this rank writes: its local tensors and values, and the chunk table of DTensors."""
    flat, _ = flatten_state_dict(state)
    values: dict[str, Any] = {}
    chunks: dict[str, list[list[int]]] = {}
    for fqn, obj in flat.items():
        if isinstance(obj, torch.Tensor):
            local_chunks = _create_chunk_list(obj)
            if not local_chunks:
                continue  # a DTensor this rank holds no part of
            local = obj.to_local() if hasattr(obj, "to_local") else obj
            chunks[fqn] = [list(obj.shape), list(local_chunks[0].offsets)]
            values[fqn] = local
        else:
            values[fqn] = obj
    meta = {"rank": rank, "world_size": world, "step": step, "chunks": chunks}
    return {SHARD_KEY: meta, VALUES_KEY: values}


class _Shard:
    """One memory-mapped shard file: its skeleton, views of its arrays, its hash (in a thread)."""

    def __init__(self, path: str, file_hash: str, size: int, pool: ThreadPoolExecutor) -> None:
        with open(path, "rb") as handle:
            # Private (copy-on-write, never written here): torch views it without a warning.
            self.map = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_COPY)
        self.path, self.file_hash, self.size, self._pool = path, file_hash, size, pool
        self.hash: PyFuture[str] | None = None  # started when data is first read from it
        meta = _format._meta(memoryview(self.map))
        self.stream, self.arrays = int(meta["stream_bytes"]), meta["arrays"]
        top = dict(_format._build(meta["state"], _NoArrays()))  # the skeleton without tensors
        self.meta = top[SHARD_KEY]
        self.nodes = _value_nodes(meta["state"])

    def entry(self, fqn: str) -> tuple[Any, list[int]]:
        """(torch dtype, local shape) of a tensor entry, without touching its bytes."""
        entry = self.arrays[self.nodes[fqn]["a"]]
        kind = getattr(torch, str(entry[2]).split(".")[-1], None)
        if not isinstance(kind, torch.dtype):
            raise CheckpointError(f"damaged shard {self.path}: {fqn} has dtype {entry[2]!r}")
        return kind, [int(d) for d in entry[3]]

    def tensor(self, fqn: str) -> Any:
        self._hashing()
        entry = self.arrays[self.nodes[fqn]["a"]]
        offset, nbytes = int(entry[0]), int(entry[1])
        kind, shape = self.entry(fqn)
        fits = nbytes == _numel(shape) * torch.empty((), dtype=kind).element_size()
        if not (fits and 0 <= offset <= offset + nbytes <= self.stream):
            raise CheckpointError(f"damaged shard {self.path}: array {fqn} does not fit its data")
        if nbytes == 0:
            return torch.empty(shape, dtype=kind)
        flat = torch.frombuffer(self.map, dtype=kind, count=_numel(shape), offset=offset)
        return flat.reshape(shape)

    def _hashing(self) -> None:
        if self.hash is None:
            self.hash = self._pool.submit(_hash.of_bytes, self.map, self.file_hash)

    def value(self, fqn: str) -> Any:
        self._hashing()
        return _format._build(self.nodes[fqn], _Arrays(self))

    def verified(self) -> bool:
        """Whether the bytes read match the record (True when nothing was read from it)."""
        if self.hash is None:
            return True
        return len(self.map) == self.size and self.hash.result() == self.file_hash


def _numel(shape: list[int]) -> int:
    count = 1
    for dim in shape:
        count *= int(dim)
    return count


class _NoArrays:
    def __getitem__(self, index: int) -> None:
        return None


class _Arrays:
    """The arrays a value refers to (numpy arrays in a value), copied out one by one."""

    def __init__(self, shard: _Shard) -> None:
        self.shard = shard

    def __getitem__(self, index: int) -> Any:
        view = memoryview(self.shard.map)
        return _format._array(view, self.shard.arrays[index], self.shard.stream, None)


def _value_nodes(skeleton: Any) -> dict[str, Any]:
    """fqn -> skeleton node of the shard's ``values`` dict."""
    ((_, pairs),) = skeleton.items()
    for key, node in pairs:
        if key == VALUES_KEY:
            ((_, items),) = node.items()
            return {str(k): v for k, v in items}
    raise CheckpointError("a sharded-checkpoint data file without its values")


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
        self._pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="rgt-ckpt-hash")
        self._open: dict[int, _Shard] = {}
        self.metadata, self.sources = self._index()

    def shard(self, rank: int) -> _Shard:
        if rank not in self._open:
            s = self.info.shards[rank]
            self._open[rank] = _Shard(s.path, s.file_hash, s.bytes, self._pool)
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
        for item in plan.items:
            shard = self.shard(self.sources[item.storage_index])
            if item.type == LoadItemType.BYTE_IO:
                planner.load_bytes(item, _Value(shard.value(item.storage_index.fqn)))  # type: ignore[arg-type]
                continue
            source = _narrow(shard.tensor(item.storage_index.fqn), item)
            target = planner.resolve_tensor(item).detach()
            target.copy_(source)
            planner.commit_tensor(item, target)
        done: torch.futures.Future[None] = torch.futures.Future()
        done.set_result(None)
        return done

    @classmethod
    def validate_checkpoint_id(cls, checkpoint_id: Any) -> bool:
        return False

    def verified(self) -> list[str]:
        """The shard files read that do not match their recorded size and hash."""
        try:
            return [s.path for s in self._open.values() if not s.verified()]
        finally:
            self._pool.shutdown(wait=True)


def _describe(
    md: dict[str, Any], sources: dict[MetadataIndex, int], shard: _Shard, fqn: str, rank: int
) -> None:
    """Add ``fqn`` of ``rank``'s shard to the metadata unless a preferred rank already has it."""
    chunk = shard.meta["chunks"].get(fqn)
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


def _narrow(tensor: Any, item: ReadItem) -> Any:
    for dim, (start, length) in enumerate(zip(item.storage_offsets, item.lengths)):  # noqa: B905
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
