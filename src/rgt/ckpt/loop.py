"""``TrainLoop``: the state of a plain PyTorch loop, captured and restored for exact resume.

Everything a run needs to continue bit-identically after a kill: the objects with a
``state_dict`` (model, optimizer, scheduler, GradScaler, EMA, ...), every RNG, the epoch, the
batches done in it, the optimizer steps, the gradient-accumulation position (with the partial
gradients when a save lands mid-accumulation), and the loader's shuffle generator as it was
when the epoch began. ``batches`` then restores in the one order that works: the epoch's
shuffle generator, ``iter(loader)`` (which draws from the generators), and only then the global
RNG states, skipping the batches already trained on::

    loop = TrainLoop(model=model, optimizer=opt, scheduler=sched, generator=loader_gen,
                     accumulate=4)
    ckpt.resume(loop)                                  # False on a fresh start
    while loop.epoch < epochs:
        for batch in loop.batches(loader):            # counts batches, skips done ones
            (model(batch).loss / 4).backward()
            if loop.micro_step_done():                # True every 4th batch
                opt.step(); sched.step(); opt.zero_grad()
                if ckpt.due(loop.step):
                    ckpt.save(loop.state(), loop.step)
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from rgt.ckpt._rng import capture_rng, restore_rng

COUNTERS = ("epoch", "batch_in_epoch", "step", "micro_step")


class TrainLoop:
    """The resumable state of one training loop (see the module docstring)."""

    def __init__(
        self,
        *,
        generator: Any = None,
        accumulate: int = 1,
        model: Any = None,
        **objects: Any,
    ) -> None:
        self.objects = {"model": model, **objects}
        self.objects = {name: obj for name, obj in self.objects.items() if obj is not None}
        self.model, self.generator, self.accumulate = model, generator, accumulate
        self.epoch = self.batch_in_epoch = self.step = self.micro_step = 0
        self._epoch_start_generator: Any = None
        self._pending_rng: dict[str, Any] | None = None
        self.extra: dict[str, Any] = {}

    def state(self) -> dict[str, Any]:
        """The checkpoint: every object's state_dict, counters, RNG, loader generator."""
        state: dict[str, Any] = {name: obj.state_dict() for name, obj in self.objects.items()}
        state.update({name: getattr(self, name) for name in COUNTERS})
        state["rng"] = capture_rng()
        state["generator_at_epoch_start"] = self._epoch_start_generator
        state["extra"] = self.extra
        if self.micro_step % self.accumulate and self.model is not None:
            state["partial_grads"] = [p.grad for p in self.model.parameters()]
        return state

    def load(self, state: dict[str, Any]) -> None:
        """Put a checkpoint back; the RNG follows once the next epoch's iterator exists."""
        for name, obj in self.objects.items():
            obj.load_state_dict(state[name])
        for name in COUNTERS:
            setattr(self, name, int(state[name]))
        self.extra = dict(state.get("extra") or {})
        if self.generator is not None and state.get("generator_at_epoch_start") is not None:
            self.generator.set_state(state["generator_at_epoch_start"])
        for param, grad in zip(self._params(), state.get("partial_grads") or []):
            param.grad = None if grad is None else grad.clone()
        self._pending_rng = state["rng"]

    def _params(self) -> list[Any]:
        return [] if self.model is None else list(self.model.parameters())

    def batches(self, loader: Iterable[Any]) -> Iterator[Any]:
        """One epoch of ``loader``, resumed where the checkpoint left it; then epoch += 1."""
        if self.generator is not None:
            self._epoch_start_generator = self.generator.get_state()
        iterator = iter(loader)  # creating it draws from the generators ...
        if self._pending_rng is not None:
            restore_rng(self._pending_rng)  # ... so the global RNG is restored only now
            self._pending_rng = None
        for index, batch in enumerate(iterator):
            if index < self.batch_in_epoch:
                continue  # trained on before the restart
            self.batch_in_epoch = index + 1
            self.micro_step += 1
            yield batch
        self.epoch, self.batch_in_epoch = self.epoch + 1, 0

    def micro_step_done(self) -> bool:
        """Call after each backward: True when the accumulation is complete (step += 1)."""
        if self.micro_step % self.accumulate:
            return False
        self.step += 1
        return True
