"""Fork server for the HF Trainer exact-resume tests: a tiny model trained by a real
``transformers.Trainer`` with ``RgtTrainerCheckpoint``, killed or signalled on cue.

``python _hf_trainer_zygote.py``: torch and transformers are imported (and a Trainer run once)
before forking, so each run costs a fork, not a 10 s import. Each stdin line is
``CKPT_DIR <tab> OUT_FILE <tab> OPTIONS_JSON``; a forked child resumes from CKPT_DIR through
``resume_folder`` and trains 3 epochs of 8 batches (AdamW, linear schedule, dropout, and an
evaluation every 3 steps, which draws from the global RNG), appending ``micro <n> <loss hex>``
for every training micro-batch and at the end ``final <global step> <state_digest of model,
optimizer, scheduler>`` and ``history <json>`` (logged losses, grad norms, learning rates, eval
losses) to OUT_FILE, or ``error <type> <message>``. The parent prints ``reaped <-signal or exit
code>``.

Options: ``ga`` (gradient accumulation), ``every`` (checkpoint cadence in steps), ``async``,
``kill_after_save`` (SIGKILL after that save, through ``RGT_SMOKE_KILL_AFTER_SAVE``),
``kill_at_micro`` (SIGKILL as that training micro-batch starts), ``kill_in_persist`` (SIGKILL
while that save of the run is being written, its data not yet committed),
``sigterm_at`` (a real SIGTERM to itself after that step), ``exit_on_stop``, ``into`` (where the
resume folder is written), ``scaler`` (a CPU GradScaler whose overflows skip steps, so its state
steers training), and the near misses ``drop_rng`` (delete rng_state.pth from the resume
folder), ``drop_scaler`` (delete scaler.pt), ``ignore_skip`` (``ignore_data_skip=True``) and
``no_resume`` (train without the folder).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import tempfile
from typing import Any, TextIO

import torch
from _fork_server import kill_in_persist, serve  # this directory: the zygote runs as a script
from torch import nn
from transformers import Trainer, TrainerCallback, TrainingArguments
from transformers.utils import logging as hf_logging

from rgt.ckpt import Checkpointer, state_digest
from rgt.ckpt.adapters.hf_trainer import RgtTrainerCheckpoint, resume_folder

SAMPLES, BATCH, EPOCHS = 32, 4, 3


class Pairs(torch.utils.data.Dataset):  # type: ignore[type-arg]
    def __init__(self) -> None:
        gen = torch.Generator().manual_seed(5)
        self.x = torch.randn(SAMPLES, 8, generator=gen)
        self.y = torch.randint(0, 3, (SAMPLES,), generator=gen)

    def __len__(self) -> int:
        return SAMPLES

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        return {"x": self.x[index], "labels": self.y[index]}


class Tiny(nn.Module):
    """Returns {"loss": ...} as the Trainer expects; dropout makes the RNG matter."""

    def __init__(self, out: TextIO | None) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Dropout(0.3), nn.Linear(16, 3))
        self.out, self.micro, self.kill_at = out, 0, 0
        self.gain = 1.0  # the scaler runs: a loss this much larger overflows at a lower scale

    def forward(self, x: torch.Tensor, labels: torch.Tensor) -> dict[str, torch.Tensor]:
        if self.training and self.micro + 1 == self.kill_at:
            os.kill(os.getpid(), signal.SIGKILL)
        loss = nn.functional.cross_entropy(self.net(x), labels)
        if self.training and self.out is not None:
            self.micro += 1
            self.out.write(f"micro {self.micro} {loss.item().hex()}\n")
            self.out.flush()
        return {"loss": loss * self.gain if self.training else loss}


class SignalAt(TrainerCallback):  # type: ignore[misc]
    """Sends this process a real SIGTERM when step ``step`` ends (a platform's warning)."""

    def __init__(self, step: int) -> None:
        self.step = step

    def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        if state.global_step == self.step:
            os.kill(os.getpid(), signal.SIGTERM)


def arguments(output_dir: str, opts: dict[str, Any]) -> TrainingArguments:
    return TrainingArguments(
        output_dir=output_dir,
        per_device_train_batch_size=BATCH,
        gradient_accumulation_steps=opts.get("ga", 1),
        num_train_epochs=EPOCHS,
        learning_rate=1e-2,
        weight_decay=0.01,
        lr_scheduler_type="linear",
        optim="adamw_torch",
        logging_steps=1,
        eval_strategy="steps",
        eval_steps=3,
        save_strategy="no",
        report_to=[],
        use_cpu=True,
        dataloader_num_workers=0,
        seed=0,
        data_seed=1,
        disable_tqdm=True,
        ignore_data_skip=bool(opts.get("ignore_skip")),
        max_grad_norm=0.0 if opts.get("scaler") else 1.0,  # clip scaled gradients: no
    )


def trainer_for(directory: str, out: TextIO | None, opts: dict[str, Any]) -> Trainer:
    ckpt = Checkpointer(
        directory,
        every_steps=opts.get("every", 3),
        keep_last=2,
        asynchronous=bool(opts.get("async")),
    )
    ckpt.install_signal_handler()
    callbacks = [RgtTrainerCheckpoint(ckpt, exit_on_stop=opts.get("exit_on_stop", True))]
    if opts.get("sigterm_at"):
        callbacks.append(SignalAt(opts["sigterm_at"]))
    torch.manual_seed(0)
    trainer = Trainer(
        model=Tiny(out),
        args=arguments(os.path.join(directory, "hf output"), opts),
        train_dataset=Pairs(),
        eval_dataset=Pairs(),
        callbacks=callbacks,
    )
    if opts.get("scaler"):
        # fp16's dynamic loss scaling on CPU: the scaled loss (2^24 times the cross-entropy)
        # overflows float32 in the backward pass once the scale nears 2^104; the scaler then
        # skips the step and halves the scale, and doubles it after every good step. Which
        # steps are skipped depends on the scaler's state.
        trainer.model.gain = 2.0**24
        trainer.accelerator.scaler = torch.amp.GradScaler(
            "cpu", init_scale=2.0**100, growth_interval=1
        )
    return trainer


def logged(entry: dict[str, Any]) -> dict[str, Any]:
    """A log entry without its timings (runtime, samples per second), which vary run to run."""
    return {k: v for k, v in entry.items() if not k.endswith(("_runtime", "_per_second"))}


def train(directory: str, out: TextIO, opts: dict[str, Any]) -> None:
    if opts.get("kill_after_save"):
        os.environ["RGT_SMOKE_KILL_AFTER_SAVE"] = str(opts["kill_after_save"])
    if opts.get("kill_in_persist"):
        kill_in_persist(opts["kill_in_persist"])
    trainer = trainer_for(directory, out, opts)
    trainer.model.kill_at = opts.get("kill_at_micro", 0)
    callback = next(
        c for c in trainer.callback_handler.callbacks if isinstance(c, RgtTrainerCheckpoint)
    )
    with resume_folder(callback.ckpt, into=opts.get("into")) as folder:
        for near_miss, name in (("drop_rng", "rng_state.pth"), ("drop_scaler", "scaler.pt")):
            if folder is not None and opts.get(near_miss):
                os.unlink(os.path.join(folder, name))
        loaded = callback.ckpt.loaded
        trainer.model.micro = loaded.step * opts.get("ga", 1) if loaded is not None else 0
        trainer.train(resume_from_checkpoint=None if opts.get("no_resume") else folder)
    objects = {
        "model": trainer.model,
        "optimizer": trainer.optimizer,
        "scheduler": trainer.lr_scheduler,
    }
    digest = state_digest(
        {name: obj.state_dict() for name, obj in objects.items()}, algorithm="sha256"
    )
    history = [logged(entry) for entry in trainer.state.log_history if "train_runtime" not in entry]
    out.write(f"final {trainer.state.global_step} {digest}\nhistory {json.dumps(history)}\n")


def child(directory: str, out_path: str, options: str) -> int:
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)  # the Trainer prints its logs; stdout is the zygote's protocol
    with open(out_path, "a", encoding="utf-8") as out:
        try:
            train(directory, out, json.loads(options))
        except Exception as exc:  # reported through the output file and the exit code
            out.write(f"error {type(exc).__name__} {exc}\n")
            return 1
    return 0


def main() -> None:
    torch.set_num_threads(1)
    hf_logging.set_verbosity_error()
    with tempfile.TemporaryDirectory() as warm, contextlib.redirect_stdout(sys.stderr):
        trainer_for(warm, None, {"every": 100}).train()  # imports and warms up everything once
    serve(lambda fields: child(*fields))


if __name__ == "__main__":
    main()
