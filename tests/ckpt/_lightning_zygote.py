"""Fork server for the Lightning exact-resume tests: fits a tiny model, killed on cue.

Run as ``python _lightning_zygote.py``: torch and Lightning are imported once. Each stdin line
is ``CKPT_DIR OUT_FILE KILL VARIANT`` (tab-separated); the zygote forks a child that runs
``trainer.fit`` for 3 epochs of 8 batches (24 optimizer steps, a checkpoint every 4) with
dropout, Adam, an epoch StepLR and a shuffled DataLoader with its own generator, appending
``loss <batch number> <loss hex>`` per training batch and at the end ``final <digest>`` (the
model, optimizer, scheduler and torch RNG, hashed) to OUT_FILE. KILL is ``-``, ``step:N``
(SIGKILL after optimizer step N, once every callback has run), ``batch:N`` (SIGKILL as training
batch N starts: mid-accumulation when N is the second batch of a step), ``persist:K`` (SIGKILL
while the run's K-th checkpoint is being written, before it is committed) or ``term:N`` (SIGTERM
to itself during step N's training_step). VARIANT is ``rgt``, ``rgt-async``, ``rgt-accumulate``
(gradient accumulation over 2 batches, a checkpoint every 3 steps), ``no-generator`` (a loader
without its own generator), ``no-rng`` (RgtCheckpoint that never puts the RNG back: the near
miss) or ``lightning`` (Lightning's own ModelCheckpoint and ``fit(ckpt_path="last")``). A run
that raises writes ``failed <exception type>`` and exits 1 (3 for SystemExit, which Lightning
raises after a SIGTERM). The zygote prints ``reaped <-signal or exit code>``.
"""

from __future__ import annotations

import logging
import os
import random
import signal
import warnings
from pathlib import Path
from typing import Any, TextIO

import numpy
import pytorch_lightning as pl
import torch
from _fork_server import kill_in_persist, serve  # this directory: the zygote runs as a script
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from rgt.ckpt import Checkpointer, state_digest
from rgt.ckpt.adapters.lightning import RgtCheckpoint

EPOCHS, EVERY = 3, 4


class Tiny(pl.LightningModule):
    def __init__(self, out: TextIO, kill: str) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Dropout(0.3), nn.Linear(32, 3))
        self.out, self.kill = out, kill

    def training_step(self, batch: Any, batch_idx: int) -> Any:
        number = self.trainer.fit_loop.total_batch_idx + 1  # counts batches across epochs
        if self.kill == f"term:{self.trainer.global_step + 1}":
            os.kill(os.getpid(), signal.SIGTERM)
        if self.kill == f"batch:{number}":
            os.kill(os.getpid(), signal.SIGKILL)
        images, labels = batch
        loss = nn.functional.cross_entropy(self.net(images), labels)
        self.out.write(f"loss {number} {float(loss.detach()).hex()}\n")
        self.out.flush()
        return loss

    def on_train_batch_end(self, outputs: Any, batch: Any, batch_idx: int) -> None:
        if self.kill == f"step:{self.trainer.global_step}":
            os.kill(os.getpid(), signal.SIGKILL)  # after every callback, the checkpoint included

    def configure_optimizers(self) -> Any:
        opt = torch.optim.Adam(self.parameters(), lr=1e-2)
        return {"optimizer": opt, "lr_scheduler": torch.optim.lr_scheduler.StepLR(opt, 1, 0.7)}

    def digest(self) -> str:
        opt = self.trainer.optimizers[0]
        sched = self.trainer.lr_scheduler_configs[0].scheduler
        state: dict[str, Any] = {"model": self.state_dict(), "optimizer": opt.state_dict()}
        state.update(scheduler=sched.state_dict(), rng=torch.get_rng_state())
        return state_digest(state, algorithm="sha256")


class NoRngRestore(RgtCheckpoint):
    """The near miss: everything restored but the global RNG (dropout masks then differ)."""

    def _put_back(self, trainer: Any, states: dict[str, Any]) -> None:
        super()._put_back(trainer, {**states, "rng": {}})


def loader(variant: str) -> DataLoader[Any]:
    data_gen = torch.Generator().manual_seed(5)
    data = TensorDataset(
        torch.randn(64, 8, generator=data_gen), torch.randint(0, 3, (64,), generator=data_gen)
    )
    loader_gen = None if variant == "no-generator" else torch.Generator().manual_seed(1)
    return DataLoader(data, batch_size=8, shuffle=True, generator=loader_gen)


def callbacks(variant: str, directory: str) -> list[Any]:
    if variant == "lightning":
        return [pl.callbacks.ModelCheckpoint(directory, every_n_train_steps=EVERY, save_last=True)]
    asynchronous, every = variant == "rgt-async", 3 if variant == "rgt-accumulate" else EVERY
    ckpt = Checkpointer(directory, keep_last=2, every_steps=every, asynchronous=asynchronous)
    return [(NoRngRestore if variant == "no-rng" else RgtCheckpoint)(ckpt)]


def fit(directory: str, out_path: str, kill: str, variant: str) -> None:
    if kill.startswith("persist:"):
        kill_in_persist(int(kill.split(":")[1]))
    random.seed(0)
    numpy.random.seed(0)
    torch.manual_seed(0)
    trainer = pl.Trainer(
        max_epochs=EPOCHS,
        accelerator="cpu",
        devices=1,
        deterministic=True,
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=callbacks(variant, directory),
        accumulate_grad_batches=2 if variant == "rgt-accumulate" else 1,
    )
    last = Path(directory, "last.ckpt")
    ckpt_path = str(last) if variant == "lightning" and last.exists() else None
    with open(out_path, "a", encoding="utf-8") as out:
        model = Tiny(out, kill)
        trainer.fit(model, loader(variant), ckpt_path=ckpt_path)
        out.write(f"final {model.digest()}\n")


def main() -> None:
    torch.set_num_threads(1)
    logging.getLogger("pytorch_lightning").setLevel(logging.ERROR)
    warnings.filterwarnings("ignore", module="(pytorch_lightning|lightning_fabric)")
    serve(lambda fields: child(*fields))


def child(directory: str, out_path: str, kill: str, variant: str) -> int:
    try:
        fit(directory, out_path, kill, variant)
    except BaseException as exc:  # reported through the exit code and OUT_FILE
        with open(out_path, "a", encoding="utf-8") as out:
            out.write(f"failed {type(exc).__name__}\n")
        return 3 if isinstance(exc, SystemExit) else 1
    return 0


if __name__ == "__main__":
    main()
    os._exit(0)  # skip the interpreter's slow teardown of torch and Lightning
