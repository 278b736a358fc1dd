"""The process group as a sharded checkpoint sees it, and the two agreements ``load_latest`` needs
over it (the only collectives of loading). torch is never imported to find out whether a group is
up: ``torch.distributed`` is looked up in ``sys.modules``.
"""

from __future__ import annotations

import os
import secrets
import sys
from typing import Any

from rgt.ckpt import _ranks
from rgt.ckpt._shards import ShardedInfo
from rgt.errors import CheckpointError


def world_from_env() -> int:
    for size_var in ("WORLD_SIZE", "SLURM_NTASKS"):
        size = os.environ.get(size_var, "").strip()
        if size.isdigit() and int(size) > 1:
            return int(size)
    return 1


def rank_and_world(rank: int | None, world: int | None) -> tuple[int, int]:
    """(rank, world size): the overrides, else the process group, else the environment."""
    dist = torch_dist()
    if rank is None and dist is not None:
        return dist.get_rank(), dist.get_world_size()
    own = _ranks.rank_from_env() if rank is None else rank
    return own, world or (world_from_env() if rank is None else own + 1)


def session_token(world: int, broadcast: bool) -> str:
    """Rank 0's fresh name for a run's step folders, broadcast to every rank (a collective)."""
    token = [secrets.token_hex(8)]
    dist = torch_dist()
    if dist is not None and world > 1 and broadcast:
        dist.broadcast_object_list(token, src=0)
    return str(token[0])


def torch_dist() -> Any:
    """torch.distributed when a process group is up (torch is never imported for this)."""
    dist = sys.modules.get("torch.distributed")
    if dist is None or not dist.is_available() or not dist.is_initialized():
        return None
    return dist


def agreed(committed: list[ShardedInfo], directory: str) -> list[ShardedInfo]:
    """The committed steps every rank sees, newest first, in the same order on every rank (so
    that the per-step agreement below is never a collective some ranks skip)."""
    dist = torch_dist()
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


def everyone(ok: bool) -> bool:
    """Whether ``ok`` holds on every rank of the process group (this rank's alone without)."""
    dist = torch_dist()
    if dist is None or dist.get_world_size() == 1:
        return ok
    import torch

    device = "cuda" if dist.get_backend() == "nccl" else "cpu"
    flag = torch.tensor([1 if ok else 0], device=device)
    dist.all_reduce(flag, op=dist.ReduceOp.MIN)
    return bool(flag.item())
