"""An unmodified-style Lightning script: no rgt, Lightning's default ModelCheckpoint (it writes
lightning_logs/version_N/checkpoints/epoch=E-step=S.ckpt), resumed by --ckpt_path."""

import argparse

import pytorch_lightning as pl
import torch
from torch.utils.data import DataLoader, TensorDataset


class Tiny(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(4, 1)

    def training_step(self, batch, index):
        x, y = batch
        loss = ((self.layer(x) - y) ** 2).mean()
        print(f"step {self.global_step}: loss {loss.item():.4f}", flush=True)
        return loss

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


parser = argparse.ArgumentParser()
parser.add_argument("--ckpt_path")
args = parser.parse_args()
torch.manual_seed(0)
data = TensorDataset(torch.randn(64, 4), torch.randn(64, 1))
trainer = pl.Trainer(max_epochs=2, enable_progress_bar=False, enable_model_summary=False)
trainer.fit(Tiny(), DataLoader(data, batch_size=8, shuffle=True), ckpt_path=args.ckpt_path)
