"""A tiny Lightning fit with RgtCheckpoint, run as a script by test_adapter_files.py:
``python _lightning_files.py CKPT_DIR [--model-checkpoint DIR]`` in a fresh working directory,
with Lightning's default logger on (so ``lightning_logs/`` is where its own files would go)."""

from __future__ import annotations

import sys

import pytorch_lightning as pl
import torch
from torch.utils.data import DataLoader, TensorDataset

from rgt.ckpt import Checkpointer
from rgt.ckpt.adapters.lightning import RgtCheckpoint


class Tiny(pl.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(4, 1)

    def training_step(self, batch: list[torch.Tensor], index: int) -> torch.Tensor:
        x, y = batch
        loss = ((self.layer(x) - y) ** 2).mean()
        self.log("loss", loss)
        return loss

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.1)


def main() -> None:
    callbacks: list[pl.Callback] = [RgtCheckpoint(Checkpointer(sys.argv[1], every_steps=2))]
    if "--model-checkpoint" in sys.argv:  # the script's own, e.g. for best-k (monitor=None)
        directory = sys.argv[sys.argv.index("--model-checkpoint") + 1]
        callbacks.append(pl.callbacks.ModelCheckpoint(directory, every_n_train_steps=2))
    torch.manual_seed(0)
    data = TensorDataset(torch.randn(32, 4), torch.randn(32, 1))
    loader = DataLoader(data, batch_size=8, shuffle=True, generator=torch.Generator())
    trainer = pl.Trainer(
        max_steps=4, callbacks=callbacks, enable_progress_bar=False, enable_model_summary=False
    )
    trainer.fit(Tiny(), loader)


if __name__ == "__main__":
    main()
