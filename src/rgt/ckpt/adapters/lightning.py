"""PyTorch Lightning: ``RgtCheckpoint``, a callback that checkpoints through ``rgt.ckpt``.

Lightning's own ``ModelCheckpoint`` writes a file in place (no commit marker, no hash) and its
checkpoints carry no RNG state; since the fault-tolerant mode went away in 2.0 a mid-epoch
resume restores the loop counters but replays the epoch's first batches (a plain ``DataLoader``
is not "stateful") with a fresh shuffle (Lightning #850, #5325). This callback saves through a
``Checkpointer`` (atomic, hash-verified, retention after commit) and adds what exactness needs::

    ckpt = Checkpointer.from_env(every_steps=200, keep_last=3)
    trainer = Trainer(max_epochs=10, callbacks=[RgtCheckpoint(ckpt)])
    trainer.fit(model, datamodule)          # resumes from the newest valid checkpoint by itself

What one checkpoint holds: Lightning's own checkpoint dict (model, every optimizer and LR
scheduler, the precision plugin's GradScaler, the loops' progress, callback and datamodule
state), every RNG, the train loaders' generators, and the same two again as they were when the
epoch's batches were drawn. The resume goes through Lightning's own restore path (the dict is
handed to the trainer in ``setup``, where ``fit(ckpt_path=...)`` would load its file), so the
counters, ``current_epoch`` and ``global_step`` continue. Then, at ``on_train_start``, the
epoch's data iterator is made again from the epoch-start states, the batches trained on before
the kill are drawn and dropped, and only then are the save-time RNG states put back: creating
the iterator draws from the generators, so the RNG comes after it. On a fresh start the first
epoch's iterator is made again too (the one Lightning made before any hook ran drew from states
nobody recorded), so with this callback that epoch's shuffle differs from a run without it;
it is the same from run to run. It reaches into Lightning internals that have been stable
through 2.x (``_checkpoint_connector``, ``fit_loop._data_fetcher``, ``_combined_loader``).

Saves happen in ``on_train_batch_end`` after an optimizer step (never mid-accumulation, whose
partial gradients Lightning cannot restore), when ``Checkpointer.due(global_step)`` says so,
and once more at the end of training. Being a ``Checkpoint`` callback it runs after the other
callbacks and replaces Lightning's default ``ModelCheckpoint`` (keep ``enable_checkpointing``
on): Lightning then writes no ``.ckpt`` of its own. A ``ModelCheckpoint`` the script puts in
``callbacks`` itself still writes its files (it is warned about at ``setup``, not removed).
A stop signal (``Checkpointer.install_signal_handler``) makes it save at the next step and
set ``trainer.should_stop``; asynchronous saves are waited for when fit ends or fails.

What it cannot make exact (Lightning's restart semantics): state that the LightningModule's own
``on_train_batch_end`` changes after the save, validation or epoch-end hooks that ran between
the saved step and the kill (Lightning does not run them again), and global random numbers drawn
by a later ``on_train_epoch_start`` hook when the loader has no generator of its own. Give every
DataLoader its own ``generator=`` and validation cannot disturb the training's random stream.
Tested on one device; under DDP only global rank zero writes.
"""

from __future__ import annotations

import logging
import warnings
from typing import Any

from rgt.ckpt import Checkpointer, capture_rng, restore_rng
from rgt.errors import UsageError

try:
    import pytorch_lightning as pl
except ImportError:  # the unified ``lightning`` package ships the same API
    import lightning.pytorch as pl  # type: ignore[no-redef,import-not-found,unused-ignore]

log = logging.getLogger("rgt.ckpt")

# Lightning checkpoint keys that only ``load_from_checkpoint`` reads (arbitrary user objects that a
# data-only checkpoint cannot hold); resuming a fit never needs them.
_HPARAM_KEYS = ("hyper_parameters", "hparams_name", "datamodule_hyper_parameters")
_NOT_RESUMABLE_WARNING = "You're resuming from a checkpoint that ended before the epoch ended"


class RgtCheckpoint(pl.callbacks.Checkpoint):
    """Exact-resume checkpoints of a Lightning fit (see the module docstring).

    ``checkpointer``: the ``Checkpointer`` to save through; without one,
    ``Checkpointer.from_env(**options)``. ``generators``: extra ``torch.Generator`` objects the
    training data draws from (the train loaders' own are found by themselves). ``save_last``:
    also checkpoint the final state when training ends.
    """

    def __init__(
        self,
        checkpointer: Checkpointer | None = None,
        *,
        generators: list[Any] | None = None,
        save_last: bool = True,
        **options: Any,
    ) -> None:
        if checkpointer is not None and options:
            raise UsageError(
                f"options {sorted(options)} are for Checkpointer.from_env, but a Checkpointer "
                "was given",
                fix="pass the options to your Checkpointer instead",
            )
        self.ckpt = checkpointer if checkpointer is not None else Checkpointer.from_env(**options)
        self.extra_generators = list(generators or [])
        self.save_last = save_last
        self.resumed_step: int | None = None  # the global step this fit resumed from
        self._resume: dict[str, Any] | None = None
        self._epoch_start: dict[str, Any] | None = None
        self._iterated_epoch = -1
        self._last_step = -1
        self._saved_step = -1

    # --- resume --------------------------------------------------------------------------

    def setup(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        """Hand the newest valid checkpoint to Lightning's restore path (as ``ckpt_path``
        would): model, callbacks and datamodule now, optimizers, schedulers, precision and loop
        progress once the strategy has set up."""
        if stage != "fit":
            return
        _warn_second_writer(trainer)
        state = self.ckpt.load_latest()
        if state is None:
            return
        trainer._checkpoint_connector._loaded_checkpoint = state["lightning"]
        self._resume = state["rgt"]

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        resume = self._take_resume(trainer)
        if resume is None:
            self._start_epoch(trainer)
        elif resume["epoch_done"]:  # saved after an epoch's last batch: the next epoch starts
            self._put_back(trainer, resume["now"])
            self._start_epoch(trainer)
        else:
            self._put_back(trainer, resume["epoch_start"])
            self._start_epoch(trainer)
            _skip(trainer, int(resume["batch_in_epoch"]))
            self._put_back(trainer, resume["now"])
            # Lightning then warns that a plain DataLoader cannot resume mid-epoch; it just did.
            warnings.filterwarnings("ignore", message=_NOT_RESUMABLE_WARNING)

    def _take_resume(self, trainer: pl.Trainer) -> dict[str, Any] | None:
        resume, self._resume = self._resume, None
        if resume is not None and trainer.ckpt_path:
            log.warning("fit(ckpt_path=%s) given: not resuming from rgt.ckpt", trainer.ckpt_path)
            return None
        if resume is not None:
            self.resumed_step = self._last_step = self._saved_step = int(resume["global_step"])
        return resume

    def on_train_epoch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        # Lightning makes this epoch's iterator right after the epoch-start hooks.
        if trainer.current_epoch != self._iterated_epoch:
            self._epoch_start = self._capture(trainer)

    def _start_epoch(self, trainer: pl.Trainer) -> None:
        """Make the current epoch's data iterator again, from states this callback recorded:
        the one Lightning made in ``setup_data`` drew from the generators before any hook ran."""
        self._epoch_start = self._capture(trainer)
        fetcher = trainer.fit_loop._data_fetcher
        if fetcher is not None:
            iter(fetcher)
        self._iterated_epoch = trainer.current_epoch

    # --- save ----------------------------------------------------------------------------

    def on_train_batch_end(
        self,
        trainer: pl.Trainer,
        pl_module: pl.LightningModule,
        outputs: Any,
        batch: Any,
        batch_idx: int,
    ) -> None:
        step = trainer.global_step
        if step == self._last_step:
            return  # mid-accumulation: no optimizer step since the last call
        self._last_step = step
        # Lightning's own SIGTERM handler sets received_sigterm and ends fit after this batch.
        stopping = self.ckpt.should_stop or trainer.received_sigterm
        if stopping or self.ckpt.due(step):
            self._save(trainer, epoch_done=trainer.fit_loop.epoch_loop.batch_progress.is_last_batch)
        if stopping:
            log.warning("stop signal: checkpointed step %s, stopping", step)
            trainer.should_stop = True

    def on_train_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if self.save_last and self._saved_step != trainer.global_step:
            self._save(trainer, epoch_done=True)

    def on_fit_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.ckpt.wait()

    def on_exception(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, exception: BaseException
    ) -> None:
        try:
            self.ckpt.wait()  # the last asynchronous save still becomes durable
        except Exception as exc:
            log.error("checkpoint in flight when fit failed did not persist: %s", exc)

    def _save(self, trainer: pl.Trainer, *, epoch_done: bool) -> None:
        state = {"lightning": _lightning_state(trainer), "rgt": self._position(trainer, epoch_done)}
        self._saved_step = trainer.global_step
        if trainer.is_global_zero:
            self.ckpt.save(state, trainer.global_step)

    def _position(self, trainer: pl.Trainer, epoch_done: bool) -> dict[str, Any]:
        progress = trainer.fit_loop.epoch_loop.batch_progress
        return {
            "global_step": trainer.global_step,
            "epoch": trainer.current_epoch,
            "batch_in_epoch": progress.current.ready,
            "epoch_done": bool(epoch_done),
            "epoch_start": self._epoch_start,
            "now": self._capture(trainer),
        }

    # --- random state --------------------------------------------------------------------

    def _capture(self, trainer: pl.Trainer) -> dict[str, Any]:
        generators = [g.get_state() for g in self._generators(trainer)]
        return {"rng": capture_rng(), "generators": generators}

    def _put_back(self, trainer: pl.Trainer, states: dict[str, Any]) -> None:
        generators = self._generators(trainer)
        if len(generators) != len(states["generators"]):
            raise UsageError(
                f"the checkpoint has {len(states['generators'])} data generators, the train "
                f"loaders now have {len(generators)}",
                fix="resume with the same DataLoader setup (shuffle, generator=) as the run "
                "that saved the checkpoint",
            )
        for generator, state in zip(generators, states["generators"], strict=True):
            generator.set_state(state)
        restore_rng(states["rng"])

    def _generators(self, trainer: pl.Trainer) -> list[Any]:
        found = list(self.extra_generators)
        loader = trainer.fit_loop._combined_loader
        for dataloader in loader.flattened if loader is not None else []:
            found += _loader_generators(dataloader)
        unique: dict[int, Any] = {}
        for generator in found:
            unique.setdefault(id(generator), generator)
        return list(unique.values())


def _warn_second_writer(trainer: pl.Trainer) -> None:
    """With a ``Checkpoint`` callback in ``callbacks`` Lightning adds no ``ModelCheckpoint`` of
    its own; one the script adds itself still writes its ``.ckpt`` files (a second copy of the
    state, outside the commit protocol). Said once, with the fix; never removed behind the
    script's back (it may be there for best-k by a monitored metric)."""
    for callback in getattr(trainer, "callbacks", []):  # a property Lightning types loosely
        if isinstance(callback, pl.callbacks.ModelCheckpoint):
            log.warning(
                "a ModelCheckpoint (dirpath %s) is in callbacks too: Lightning writes its .ckpt "
                "files besides RgtCheckpoint's; remove it unless you need its best-k files",
                callback.dirpath or "lightning_logs/version_*/checkpoints",
            )


def _loader_generators(dataloader: Any) -> list[Any]:
    """The generators a DataLoader's shuffle draws from: its own and its samplers'."""
    batch_sampler = getattr(dataloader, "batch_sampler", None)
    holders = [dataloader, getattr(dataloader, "sampler", None)]
    holders += [batch_sampler, getattr(batch_sampler, "sampler", None)]
    found = [getattr(holder, "generator", None) for holder in holders]
    return [generator for generator in found if generator is not None]


def _lightning_state(trainer: pl.Trainer) -> dict[str, Any]:
    """Lightning's own checkpoint dict, as ``trainer.save_checkpoint`` would write it."""
    state: dict[str, Any] = trainer._checkpoint_connector.dump_checkpoint(weights_only=False)
    for key in _HPARAM_KEYS:
        state.pop(key, None)
    return state


def _skip(trainer: pl.Trainer, count: int) -> None:
    """Draw and drop the epoch's first ``count`` batches, the ones trained on before the kill.
    The fetcher's own counter is left alone: Lightning adds the restored batch count to it."""
    fetcher = trainer.fit_loop._data_fetcher
    if fetcher is None or fetcher.iterator is None or getattr(fetcher, "batches", None):
        raise UsageError(
            "cannot resume mid-epoch: the train loader has no length (Lightning prefetched it)",
            fix="give the train dataset a __len__, or checkpoint at epoch ends only",
        )
    for _ in range(count):
        next(fetcher.iterator)
