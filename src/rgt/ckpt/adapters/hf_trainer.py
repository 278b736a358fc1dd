"""HF transformers ``Trainer``: rgt.ckpt checkpoints from a callback, exact resume through the
Trainer's own resume path.

The Trainer's own checkpoints are folders written file by file with no commit marker
(transformers #35782: a kill mid-save leaves a folder that looks complete), and its exact resume
has regressed more than once (#17032 RNG not restored, #11323 GradScaler missing). Here
``RgtTrainerCheckpoint`` saves everything the Trainer needs to continue bit-identically — model,
optimizer, LR scheduler, GradScaler when mixed precision made one, the ``TrainerState`` (global
step, epoch, log history, flos) and every RNG — as one atomic, hash-verified rgt checkpoint.

Only ``train(resume_from_checkpoint=FOLDER)`` makes the Trainer skip the batches it already
trained on (``skip_first_batches``) and restore the RNG at the one point where that is exact, so
``resume_folder`` writes the newest verified checkpoint out as a Trainer-layout folder (in a
temporary directory, removed after training) and the Trainer takes it from there::

    ckpt = Checkpointer.from_env(every_steps=200, keep_last=3)
    trainer = Trainer(model, args, train_dataset=train, callbacks=[RgtTrainerCheckpoint(ckpt)])
    with resume_folder(ckpt) as folder:                  # None on a fresh start
        trainer.train(resume_from_checkpoint=folder)

Keep ``save_strategy="no"`` and set ``seed`` and ``data_seed`` (each epoch's shuffle then
depends on the epoch alone).

When a save is due after step N it is taken at the next *quiet point*, where the state equals
what the Trainer's resume reconstructs: before step N+1 begins (after step N's logging and
evaluation, whose RNG draws the resumed run does not repeat) or, when step N ended an epoch,
before the next epoch's data iterator is created (which draws from the global RNG). Exact when
the dataset's ``__getitem__`` draws no random numbers (random augmentation of the first batches
after a resume uses a fresh RNG, as in the Trainer's own resume) and, for the logged running
loss, when ``every_steps`` is a multiple of ``logging_steps``. Single process: under DDP only
rank 0 saves and the other ranks' RNG is not restored.

After a stop signal (``ckpt.install_signal_handler()``), the next quiet point saves once, waits
until the save is durable and, by default, dies by that same signal so rgt's agent sees a
preemption rather than a success (``exit_on_stop=False`` stops training instead and lets
``train()`` return; check ``ckpt.should_stop``). ``on_train_end`` saves the final state and waits
for an asynchronous save to be durable.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import shutil
import tempfile
from collections.abc import Iterator
from typing import Any

from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments

from rgt.ckpt import Checkpointer, capture_rng
from rgt.ckpt._budget import check_room
from rgt.ckpt._signals import die_by
from rgt.errors import CheckpointError

__all__ = ["RgtTrainerCheckpoint", "materialise", "resume_folder", "training_state"]

log = logging.getLogger("rgt.ckpt")

KIND = "rgt.hf_trainer/1"  # marks checkpoints this adapter wrote
# The Trainer's checkpoint layout (transformers.trainer's *_NAME constants).
FILES = {
    "model": "pytorch_model.bin",
    "optimizer": "optimizer.pt",
    "scheduler": "scheduler.pt",
    "scaler": "scaler.pt",
}
RESUME_FIX = (
    "train inside `with resume_folder(ckpt) as folder: trainer.train(resume_from_checkpoint="
    "folder)`, with the same Checkpointer the callback uses"
)


class RgtTrainerCheckpoint(TrainerCallback):
    """Saves the Trainer's full state through ``ckpt`` when ``ckpt.due`` says so (see the module
    docstring); ``ckpt`` defaults to ``Checkpointer.from_env()``."""

    def __init__(
        self,
        ckpt: Checkpointer | None = None,
        *,
        exit_on_stop: bool = True,
        save_at_end: bool = True,
    ) -> None:
        self.ckpt = ckpt if ckpt is not None else Checkpointer.from_env()
        self.exit_on_stop, self.save_at_end = exit_on_stop, save_at_end
        self._pending = self._stepped_in_epoch = self._stopped = False
        self._saved_step: int | None = None

    def resume_folder(
        self, into: str | None = None
    ) -> contextlib.AbstractContextManager[str | None]:
        """``resume_folder(self.ckpt, into)``."""
        return resume_folder(self.ckpt, into)

    def on_train_begin(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kw: Any
    ) -> None:
        check_resumed(self.ckpt, state.global_step)
        self._saved_step, self._stopped = state.global_step, False
        if _strategy(args.save_strategy) != "no":
            log.warning(
                "save_strategy=%s: the Trainer also writes its own non-atomic checkpoint "
                "folders; set save_strategy='no'",
                _strategy(args.save_strategy),
            )
        if args.ignore_data_skip:
            log.warning("ignore_data_skip=True: a resumed run retrains the epoch's first batches")

    def on_epoch_begin(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kw: Any
    ) -> None:
        self._stepped_in_epoch = False
        self._quiet_point(state, control, kw)

    def on_step_begin(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kw: Any
    ) -> None:
        # Before the first step of an epoch the data iterator already exists: that state belongs
        # to on_epoch_begin, where a resume at an epoch boundary restores the RNG.
        if self._stepped_in_epoch:
            self._quiet_point(state, control, kw)

    def on_step_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kw: Any
    ) -> None:
        self._stepped_in_epoch = True
        if self.ckpt.due(state.global_step):
            self._pending = True  # taken at the next quiet point, after logging and evaluation

    def on_train_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kw: Any
    ) -> None:
        if not self._stopped and (self.save_at_end or self._pending or self.ckpt.should_stop):
            self._save_if_new(state, kw)
        self.ckpt.wait()
        if self.ckpt.should_stop and not self._stopped and self.exit_on_stop:
            die_by(self.ckpt.stop_signal)

    def _quiet_point(
        self, state: TrainerState, control: TrainerControl, kw: dict[str, Any]
    ) -> None:
        if self._stopped:
            return
        stop = self.ckpt.should_stop
        if self._pending or stop:
            self._save_if_new(state, kw)
        if stop:
            self._stopped = True
            self.ckpt.wait()  # the stop checkpoint is durable before anything ends the process
            if self.exit_on_stop:
                die_by(self.ckpt.stop_signal)
            control.should_training_stop = True

    def _save_if_new(self, state: TrainerState, kw: dict[str, Any]) -> None:
        self._pending = False
        if state.global_step == self._saved_step or not state.is_world_process_zero:
            return
        metric = _logged(state, self.ckpt.best_metric)
        self.ckpt.save(training_state(state, kw), state.global_step, metric=metric)
        self._saved_step = state.global_step


def training_state(state: TrainerState, objects: dict[str, Any]) -> dict[str, Any]:
    """The checkpoint: the callback's ``model``/``optimizer``/``lr_scheduler`` keyword objects,
    the GradScaler the accelerated optimizer holds, every RNG and the TrainerState as JSON."""
    optimizer = objects["optimizer"]
    payload: dict[str, Any] = {
        "kind": KIND,
        "model": objects["model"].state_dict(),
        "optimizer": optimizer.state_dict(),
        "scheduler": objects["lr_scheduler"].state_dict(),
        "rng": capture_rng(),
        "trainer_state": json.dumps(dataclasses.asdict(state), indent=2, sort_keys=True),
    }
    scaler = getattr(optimizer, "scaler", None)  # accelerate's AcceleratedOptimizer under fp16
    if scaler is not None:
        payload["scaler"] = scaler.state_dict()
    return payload


@contextlib.contextmanager
def resume_folder(ckpt: Checkpointer, into: str | None = None) -> Iterator[str | None]:
    """The newest verified checkpoint as a Trainer checkpoint folder, for
    ``train(resume_from_checkpoint=...)``; ``None`` on a fresh start. The folder lives in a new
    temporary directory under ``into`` (default: ``$TMPDIR``) and is removed on exit. Writing it
    needs about the checkpoint's size in free space there, checked first (``DiskBudgetError``
    naming the mount)."""
    folder = materialise(ckpt, into)
    try:
        yield folder
    finally:
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)


def materialise(ckpt: Checkpointer, into: str | None = None) -> str | None:
    """Write the newest verified checkpoint out as a new Trainer-layout folder; its path."""
    state = ckpt.load_latest(map_location="cpu")
    if state is None:
        return None
    if not isinstance(state, dict) or state.get("kind") != KIND:
        raise CheckpointError(
            f"the newest checkpoint in {ckpt.directory} was not written by RgtTrainerCheckpoint",
            path=ckpt.directory,
            fix="give the Trainer run its own checkpoint directory",
        )
    where, need = into or tempfile.gettempdir(), ckpt.loaded.bytes if ckpt.loaded else 0
    fix = "pass resume_folder(ckpt, into=DIR) with DIR on a disk with room (the checkpoints' own)"
    check_room(where, need, "the Trainer resume folder", fix)
    folder = tempfile.mkdtemp(prefix=f"rgt-resume-{_loaded_step(ckpt)}-", dir=into)
    try:
        write_trainer_folder(state, folder)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return folder


def _loaded_step(ckpt: Checkpointer) -> int:
    return ckpt.loaded.step if ckpt.loaded is not None else 0


def write_trainer_folder(state: dict[str, Any], folder: str) -> None:
    """The files ``Trainer._load_from_checkpoint``/``_load_optimizer_and_scheduler``/
    ``_load_scaler``/``_load_rng_state`` and ``TrainerState.load_from_json`` read."""
    import torch

    for key, name in FILES.items():
        if key in state:
            torch.save(state[key], os.path.join(folder, name))
    torch.save(trainer_rng(state["rng"]), os.path.join(folder, "rng_state.pth"))
    with open(os.path.join(folder, "trainer_state.json"), "w", encoding="utf-8") as out:
        out.write(state["trainer_state"] + "\n")


def trainer_rng(rng: dict[str, Any]) -> dict[str, Any]:
    """rgt's RNG capture in ``Trainer._save_rng_state``'s format (single process)."""
    import numpy
    import torch

    py = rng["python"]
    states: dict[str, Any] = {
        "python": (py["version"], tuple(py["state"]), py["gauss_next"]),
        "cpu": rng["torch"],
        "numpy": numpy.random.get_state(),  # never drawn from if numpy was not imported
    }
    if "numpy" in rng:
        np = rng["numpy"]
        keys = numpy.array(np["keys"], dtype=numpy.uint32)
        states["numpy"] = (
            np["bit_generator"],
            keys,
            np["pos"],
            np["has_gauss"],
            np["cached_gaussian"],
        )
    cuda = rng.get("cuda") or []
    if cuda:  # the Trainer restores the current device only, as it saves it
        states["cuda"] = cuda[torch.cuda.current_device() if torch.cuda.is_available() else 0]
    return states


def check_resumed(ckpt: Checkpointer, global_step: int) -> None:
    """Refuse to train from step ``global_step`` when ``ckpt`` holds a newer state: the
    classic silent restart from zero after a preemption."""
    loaded = ckpt.loaded
    if loaded is None and global_step == 0 and ckpt.latest_info(verify=False) is not None:
        raise CheckpointError(
            f"{ckpt.directory} holds checkpoints but the Trainer started at step 0",
            path=ckpt.directory,
            fix=RESUME_FIX,
        )
    if loaded is not None and loaded.step != global_step:
        raise CheckpointError(
            f"the Trainer started at step {global_step}, the checkpoint it should resume is "
            f"step {loaded.step}",
            path=ckpt.directory,
            fix=RESUME_FIX,
        )


def _logged(state: TrainerState, name: str | None) -> float | None:
    """The value of ``name`` logged at this step (an eval metric for best-checkpoint retention)."""
    for entry in reversed(state.log_history if name else []):
        if entry.get("step") == state.global_step and name in entry:
            return float(entry[name])
    return None


def _strategy(value: Any) -> str:
    return str(getattr(value, "value", value))
