"""Overlapped staging (``ShardedCheckpointer(overlap=True)``): the big copy leaves the loop.

Without it, a sharded save holds the training loop for one memory copy of the rank's state into
the staging arena (``_arena``), and on a memory-bandwidth-starved host that copy alone is most of
what ``dcp.async_save`` holds the loop for. Yet nothing changes the parameters or the optimizer's
moments until the next optimizer step: the forward and backward passes in between only read them.
So with overlap the save stages at once only what may change before then (tensors under
``SMALL`` bytes: BatchNorm's running statistics and step counters, which the next forward or
the step itself update; every GPU tensor, whose copy is a device-to-host transfer the writer
must not race; numpy arrays and framing), notes each remaining tensor's version counter, and
hands the copy of the rest to the writer thread. A process-wide optimizer step pre-hook
(``torch.optim.optimizer.register_optimizer_step_pre_hook``) makes every optimizer step wait
until the copies in flight are finished (the copies only, not the writes). Where the forward and
backward run inside ``step(closure)`` (LBFGS, Lightning's automatic optimization) they come after
that wait, so nothing is hidden there: the copy is then a stall at the step instead of in
``save()``.

A tensor changed in place between ``save()`` and the end of its copy by anything but an
optimizer step (``p.mul_(...)`` under ``no_grad``, a buffer a forward updates that is over
``SMALL``) is detected: every in-place op bumps the tensor's version counter (a DTensor's
counter and its local tensor's are both checked), so after copying a tensor the writer compares
its counter with the one noted at ``save()``. A changed one means the copy may be torn: the
rank writes no shard, records the step as abandoned (``_shards``), rank 0 does not commit it,
and the error surfaces at ``wait()`` or the next ``save()``. Changes made through ``.data``
(``p.data.mul_(2)``, ``p.data = ...``) do not bump the version counter and are NOT detected:
with overlap on, change parameters only in optimizer steps or after ``wait()``.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Mapping
from typing import Any

from rgt.ckpt import _persist, _shards
from rgt.ckpt._arena import Arena, copy_array, stage
from rgt.ckpt._digest import ArrayRef
from rgt.ckpt._format import Layout
from rgt.errors import CheckpointError

SMALL = 1 << 20  # bytes: smaller tensors are staged in save() itself

_inflight: set[Copy] = set()
_lock = threading.Lock()
_hooked: list[Any] = []  # the pre-hook's handle, once registered


class Copy:
    """The part of one save's snapshot left to the writer thread, with the version counters
    its tensors had at ``save()``."""

    def __init__(self, arena: Arena, pieces: list[tuple[int, ArrayRef]], owners: Any) -> None:
        self.arena, self.pieces = arena, pieces
        found = [owners.get(id(ref.obj), ("?", None)) for _, ref in pieces]
        self.names = [name for name, _ in found]
        self.owners = [owner for _, owner in found]
        self.stamps = [_stamp(ref.obj, owner) for (_, ref), (_, owner) in zip(pieces, found)]
        self.done = threading.Event()
        self.torn: list[str] = []
        self.waited_s = 0.0  # how long optimizer steps (and loads) waited for this copy
        with _lock:
            _inflight.add(self)

    def run(self) -> None:
        """Copy every tensor, checking after each that nothing changed it since ``save()``."""
        try:
            _persist._hold("overlap-copy")
            for index, (offset, ref) in enumerate(self.pieces):
                copy_array(self.arena, offset, ref)
                if _stamp(ref.obj, self.owners[index]) != self.stamps[index]:
                    self.torn.append(self.names[index])
        finally:
            self.finish()

    def finish(self) -> None:
        """The arena no longer reads the tensors: the loop may change them."""
        self.pieces, self.owners = [], []  # hold no tensor past the copy
        self.done.set()
        with _lock:
            _inflight.discard(self)

    def wait(self) -> None:
        if not self.done.is_set():
            started = time.perf_counter()
            self.done.wait()
            self.waited_s += time.perf_counter() - started

    def check(self, folder: str, step: int, session: str, rank: int) -> None:
        """Raise if a tensor changed during the copy, after telling rank 0 (no shard follows)."""
        if not self.torn:
            return
        names = ", ".join(self.torn[:3]) + (
            f" and {len(self.torn) - 3} more" if len(self.torn) > 3 else ""
        )
        reason = f"{len(self.torn)} tensor(s) changed in place before their copy: {names}"
        with contextlib.suppress(OSError):  # unwritable: rank 0 then gives up at its timeout
            _shards.write_abandoned(folder, step, session, rank, reason)
        raise CheckpointError(
            f"step {step} not saved: on rank {rank}, {reason} (an overlapped save copies large "
            "tensors after save() returns); the step is not committed and the previous "
            "committed step is still the latest",
            path=folder,
            fix="change tensors in place only inside optimizer.step() (it waits for the copy) "
            "or after wait(); or save after that change; or turn overlap off "
            "(overlap=False, RGT_CKPT_OVERLAP=0)",
        )


def stage_early(arena: Arena, layout: Layout, state: Any) -> Copy:
    """Stage what may change before the next optimizer step; the rest is the returned copy."""
    hook_optimizers()
    return Copy(arena, stage(arena, layout, later=_later), owners(state))


def _later(ref: ArrayRef) -> bool:
    """A large CPU tensor: only an optimizer step (which waits) is expected to change it."""
    return not ref.is_numpy and ref.nbytes >= SMALL and ref.obj.device.type == "cpu"


def owners(state: Any, prefix: str = "") -> dict[int, tuple[str, Any]]:
    """id(tensor as laid out) -> (its name in ``state``, the tensor in ``state``): a DTensor's
    in-place ops bump its own version counter, not its local tensor's, so both are checked."""
    found: dict[int, tuple[str, Any]] = {}
    items: Any = ()
    if isinstance(state, Mapping):
        items = state.items()
    elif isinstance(state, (list, tuple)):
        items = enumerate(state)
    for key, value in items:
        name = f"{prefix}{key}"
        local = getattr(value, "_local_tensor", None)
        if hasattr(value, "_version"):
            found[id(value if local is None else local)] = (name, value)
        else:
            found.update(owners(value, name + "."))
    return found


def _stamp(tensor: Any, owner: Any) -> tuple[int, int]:
    return tensor._version, -1 if owner is None else owner._version


def _before_step(optimizer: Any, args: Any, kwargs: Any) -> None:
    """The optimizer step pre-hook: no step changes a tensor an overlapped copy still reads."""
    with _lock:
        copies = list(_inflight)
    for copy in copies:
        copy.wait()


def hook_optimizers() -> None:
    """Register the pre-hook once per process (it applies to every optimizer, present or
    future; with no copy in flight it returns at once)."""
    with _lock:
        if _hooked:
            return
        from torch.optim.optimizer import register_optimizer_step_pre_hook

        _hooked.append(register_optimizer_step_pre_hook(_before_step))
