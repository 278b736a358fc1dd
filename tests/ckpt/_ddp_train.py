"""A two-rank DDP training run (gloo, CPU) for the multi-process exact-resume test.

``python _ddp_train.py CKPT_DIR OUT_FILE KILL_STEP`` with the usual torchrun environment (RANK,
WORLD_SIZE, MASTER_ADDR, MASTER_PORT). Dropout with a different RNG stream per rank, a
DistributedSampler, gradient accumulation over 2 batches with ``no_sync``, a checkpoint every 3
steps through ``TrainLoop`` + ``Checkpointer``. Appends ``micro <n> <loss hex>`` per batch and at
the end ``final <SHA-256 of model, optimizer and this rank's RNG>`` to OUT_FILE. With KILL_STEP >
0, once that step's checkpoint is durable on every rank, rank 0 SIGKILLs the whole process group.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

from rgt.ckpt import Checkpointer, TrainLoop, state_digest

EPOCHS, ACCUMULATE = 2, 2


def main() -> None:
    directory, out_path, kill = sys.argv[1], sys.argv[2], int(sys.argv[3])
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)  # the same initial weights on every rank
    net = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Dropout(0.3), nn.Linear(32, 3))
    model = DistributedDataParallel(net)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    gen = torch.Generator().manual_seed(5)
    data = TensorDataset(
        torch.randn(96, 8, generator=gen), torch.randint(0, 3, (96,), generator=gen)
    )
    sampler = DistributedSampler(data, shuffle=True, seed=1)
    loader = DataLoader(data, batch_size=4, sampler=sampler)
    torch.manual_seed(100 + rank)  # each rank draws its own dropout masks
    ckpt = Checkpointer(directory, every_steps=3, keep_last=2)
    loop = TrainLoop(model=model, optimizer=opt, accumulate=ACCUMULATE)
    ckpt.resume(loop)
    with open(out_path, "a", encoding="utf-8") as out:
        while loop.epoch < EPOCHS:
            sampler.set_epoch(loop.epoch)
            for images, labels in loop.batches(loader):
                syncing = loop.micro_step % ACCUMULATE == 0
                with contextlib.nullcontext() if syncing else model.no_sync():
                    loss = nn.functional.cross_entropy(model(images), labels) / ACCUMULATE
                    loss.backward()
                out.write(f"micro {loop.micro_step} {float(loss).hex()}\n")
                out.flush()
                if loop.micro_step_done():
                    opt.step()
                    opt.zero_grad()
                    if ckpt.due(loop.step):
                        ckpt.save(loop.state(), loop.step)
                    if loop.step == kill:
                        ckpt.wait()
                        dist.barrier()  # every rank's state of this step is on disk
                        if rank == 0:
                            os.killpg(0, signal.SIGKILL)
                        time.sleep(60)
        whole = {"model": model.state_dict(), "opt": opt.state_dict(), "rng": torch.get_rng_state()}
        out.write(f"final {state_digest(whole, algorithm='sha256')}\n")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
