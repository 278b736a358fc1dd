"""A tiny accelerate loop (CPU) saved through ``accelerate_loop``, run as a script by
test_adapter_files.py: ``python _accelerate_files.py CKPT_DIR``."""

from __future__ import annotations

import sys

import torch
from accelerate import Accelerator
from torch.utils.data import DataLoader, TensorDataset

from rgt.ckpt import Checkpointer
from rgt.ckpt.adapters.accelerate import accelerate_loop


def main() -> None:
    torch.manual_seed(0)
    accelerator = Accelerator(cpu=True)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Dropout(0.1), torch.nn.Linear(8, 1))
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.01)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=2)
    generator = torch.Generator().manual_seed(1)
    data = TensorDataset(torch.randn(32, 4), torch.randn(32, 1))
    loader = DataLoader(data, batch_size=8, shuffle=True, generator=generator)
    model, optimizer, loader, scheduler = accelerator.prepare(model, optimizer, loader, scheduler)
    loop = accelerate_loop(
        accelerator, model=model, optimizer=optimizer, scheduler=scheduler, generator=generator
    )
    ckpt = Checkpointer(sys.argv[1], every_steps=2)
    for x, y in loop.batches(loader):
        loss = ((model(x) - y) ** 2).mean()
        accelerator.backward(loss)
        if loop.micro_step_done():
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad()
            if ckpt.due(loop.step):
                ckpt.save(loop.state(), loop.step)
    ckpt.wait()


if __name__ == "__main__":
    main()
