"""Lightning with RgtCheckpoint whose DataLoader shuffles with the global RNG (no generator=)
while a hook draws from it each epoch: the resume is not exact, and smoke must say why."""

import os

import pytorch_lightning as pl
import torch
from torch.utils.data import DataLoader, TensorDataset

from rgt.ckpt.adapters.lightning import RgtCheckpoint


class Tiny(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(4, 1)

    def training_step(self, batch, index):
        x, y = batch
        loss = ((self.layer(x) - y) ** 2).mean()
        print(f"step {self.global_step}: loss {loss.item():.4f}", flush=True)
        return loss

    def on_train_epoch_start(self):
        self.noise = torch.rand(1)  # a hook that draws from the global RNG each epoch

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


smoke = os.environ.get("RGT_SMOKE") == "1"
torch.manual_seed(0)
data = TensorDataset(torch.randn(64, 4), torch.randn(64, 1))
trainer = pl.Trainer(
    max_epochs=2,
    limit_train_batches=2 if smoke else None,
    callbacks=[RgtCheckpoint(every_steps=1)],
    logger=False,
    enable_progress_bar=False,
    enable_model_summary=False,
)
loader = DataLoader(data, batch_size=8, shuffle=True)
trainer.fit(Tiny(), loader)
