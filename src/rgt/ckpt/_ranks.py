"""The other ranks of a multi-process run: who writes, and what each rank keeps of its own.

Under torchrun, accelerate or DeepSpeed (``RANK``/``WORLD_SIZE``) or a multi-task ``srun``
(``SLURM_PROCID``/``SLURM_NTASKS``), model and optimizer are the same on every rank, so global
rank 0 alone writes the checkpoint. What differs between ranks is the randomness: each rank's
RNG states (dropout masks, augmentation), its loader generator, and the gradients it has
accumulated locally mid-accumulation (``no_sync``). Without them a resumed multi-process run
continues correctly but not bit-identically.

So on rank r > 0 a save writes those parts of the state (the ``RANK_LOCAL`` keys that
``TrainLoop.state()`` produces) as an ordinary, atomic, hash-verified checkpoint of its own in
``<dir>/rank-<r>/``, and a load overlays them on rank 0's checkpoint *of the same step*. Every
rank resumes from rank 0's newest checkpoint (ranks must agree on the step); a rank whose own
state for that step is missing (it died before writing it) warns and resumes with rank 0's RNG.
No collective is needed, so a save never blocks on another rank.
"""

from __future__ import annotations

import os
from typing import Any

from rgt.ckpt import _store
from rgt.ckpt._load import load_one

RANK_LOCAL = ("rng", "generator_at_epoch_start", "partial_grads")


def rank_from_env() -> int:
    """This process's global rank in a multi-process run; 0 when it runs alone."""
    for rank_var, size_var in (("RANK", "WORLD_SIZE"), ("SLURM_PROCID", "SLURM_NTASKS")):
        size, rank = os.environ.get(size_var, "").strip(), os.environ.get(rank_var, "").strip()
        if size.isdigit() and int(size) > 1 and rank.isdigit():
            return int(rank)
    return 0


def rank_directory(directory: str, rank: int) -> str:
    return os.path.join(directory, f"rank-{rank}")


def rank_local(state: Any) -> dict[str, Any] | None:
    """The parts of ``state`` that are this rank's own; None if it has none (not a dict from
    ``TrainLoop.state()`` or ``capture_rng()`` under the key "rng")."""
    if not isinstance(state, dict):
        return None
    local = {key: state[key] for key in RANK_LOCAL if key in state}
    return local or None


def overlay(state: Any, directory: str, rank: int, step: int) -> Any:
    """Rank 0's ``state`` of ``step`` with this rank's own parts of the same step put back."""
    if not isinstance(state, dict) or rank_local(state) is None:
        return state
    own = rank_directory(directory, rank)
    for info in _store.list_committed(own):
        if info.step == step:
            local = load_one(info, None)
            if isinstance(local, dict):
                return {**state, **local}
    _store.warn(
        f"rank {rank}: no state of its own for step {step} in {own}; resuming with rank 0's "
        "RNG and gradients, so this rank does not continue bit-identically"
    )
    return state
