"""rgt.ckpt: durable checkpoints and exact resume, imported inside training scripts.

Importing this package costs nothing: stdlib only; torch is imported when a checkpoint is saved
or loaded. It works without rgt around (a local ``./checkpoints`` directory); under rgt's agent
``RGT_CKPT_DIR`` points at the job's durable checkpoint directory.

The pattern for an exact resume (the full version is ``examples/train_demo.py``)::

    from rgt.ckpt import Checkpointer, capture_rng, restore_rng

    ckpt = Checkpointer.from_env(every_steps=200, keep_last=3)
    loader_gen = torch.Generator().manual_seed(seed)        # the loader's own generator
    loader = DataLoader(train_set, batch_size=64, shuffle=True, generator=loader_gen)
    state = ckpt.load_latest()                               # None on a fresh start
    epoch, skip, step = 0, 0, 0
    if state is not None:
        model.load_state_dict(state["model"]); opt.load_state_dict(state["optimizer"])
        sched.load_state_dict(state["scheduler"]); scaler.load_state_dict(state["scaler"])
        epoch, skip, step = state["epoch"], state["step_in_epoch"], state["step"]
    while epoch < epochs:
        if state is not None:
            loader_gen.set_state(state["loader_gen_at_epoch_start"])
        epoch_start_gen = loader_gen.get_state()             # the shuffle of this epoch
        batches = iter(loader)                               # draws from the generators ...
        if state is not None:
            restore_rng(state["rng"])                        # ... so restore RNG AFTER iter()
            state = None
        for i, batch in enumerate(batches):
            if i < skip:                                     # batches done before the kill
                continue
            step += 1
            ...train one step...
            if ckpt.due(step):
                ckpt.save({"model": model.state_dict(), "optimizer": opt.state_dict(),
                           "scheduler": sched.state_dict(), "scaler": scaler.state_dict(),
                           "rng": capture_rng(), "epoch": epoch, "step_in_epoch": i + 1,
                           "step": step, "loader_gen_at_epoch_start": epoch_start_gen}, step)
        epoch, skip = epoch + 1, 0

``TrainLoop`` packages this pattern (and gradient accumulation) for plain loops;
``rgt.ckpt.adapters.accelerate`` does the same over HF accelerate's prepared objects. With
``Checkpointer(..., asynchronous=True)`` (or ``RGT_CKPT_ASYNC=1``) ``save`` returns once the state
is copied into a reusable staging buffer and the write runs in a background thread; call
``wait()`` before exiting. ``rgt ckpt export`` turns any checkpoint into a plain ``torch.save`` or
safetensors file. ``ShardedCheckpointer`` is the FSDP2/DCP-style variant: every rank writes its
own shard, rank 0 commits each step with one manifest once all are durable, and ``load_latest``
fills a state in place, resharded through DCP when the world size changed (``sharded``).

Restoring RNG *before* ``iter(loader)`` exists is the classic way to lose bit-exactness: creating
the iterator draws a seed from the global torch generator (unless the loader has its own
``generator=``, whose state must then be checkpointed too). Keep everything in the state as
tensors, numbers, strings and plain containers: checkpoints are loaded with
``torch.load(weights_only=True)``, never by unpickling arbitrary objects.
"""

from rgt.ckpt._digest import state_digest
from rgt.ckpt._interval import daly_interval, young_daly_interval
from rgt.ckpt._load import load_data_file
from rgt.ckpt._plan import IntervalPlan
from rgt.ckpt._rng import capture_rng, restore_rng
from rgt.ckpt._shards import ShardedInfo
from rgt.ckpt._store import FORMAT, CheckpointFallbackWarning, CheckpointInfo
from rgt.ckpt.checkpointer import Checkpointer
from rgt.ckpt.loop import TrainLoop
from rgt.ckpt.sharded import ShardedCheckpointer

__all__ = [
    "FORMAT",
    "CheckpointFallbackWarning",
    "CheckpointInfo",
    "Checkpointer",
    "IntervalPlan",
    "ShardedCheckpointer",
    "ShardedInfo",
    "TrainLoop",
    "capture_rng",
    "daly_interval",
    "load_data_file",
    "restore_rng",
    "state_digest",
    "young_daly_interval",
]
