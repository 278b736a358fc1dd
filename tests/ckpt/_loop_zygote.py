"""Fork server for the exact-resume tests: trains a tiny model with TrainLoop, killed on cue.

Run as ``python _loop_zygote.py KIND`` (``plain`` or ``accelerate``): torch and the framework
are imported once. Each stdin line is ``CKPT_DIR OUT_FILE KILL``; the zygote forks a child that
resumes from CKPT_DIR, trains 3 epochs (12 batches each, gradient accumulation 2, so 18
optimizer steps, an async checkpoint every 4) and appends ``micro <n> <loss hex>`` lines and at
the end ``final <step> <state_digest> <SHA-256 state_digest>`` to OUT_FILE. KILL is ``-``,
``step:N`` (SIGKILL right after optimizer step N), ``micro:N`` (after micro-batch N's backward,
mid-accumulation) or ``persist:N`` (inside the writer, while save N's data is being written). It
prints ``reaped <signal or -exit code>``.
"""

from __future__ import annotations

import os
import random
import signal
import sys
from typing import Any

import numpy
import torch
from _fork_server import kill_in_persist, serve  # this directory: the zygote runs as a script
from torch import nn
from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn
from torch.utils.data import DataLoader, TensorDataset

from rgt.ckpt import Checkpointer, TrainLoop, state_digest

EPOCHS, ACCUMULATE = 3, 2


def die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def build() -> tuple[Any, ...]:
    random.seed(0)
    numpy.random.seed(0)
    torch.manual_seed(0)
    data_gen = torch.Generator().manual_seed(5)
    data = TensorDataset(
        torch.randn(96, 8, generator=data_gen), torch.randint(0, 3, (96,), generator=data_gen)
    )
    loader_gen = torch.Generator().manual_seed(1)
    loader = DataLoader(data, batch_size=8, shuffle=True, generator=loader_gen)
    model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Dropout(0.3), nn.Linear(32, 3))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=5, gamma=0.5)
    ema = AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(0.9))
    return model, opt, sched, ema, loader, loader_gen


def loop_for(kind: str) -> tuple[TrainLoop, Any, Any, Any, Any]:
    model, opt, sched, ema, loader, loader_gen = build()
    if kind == "plain":
        loop = TrainLoop(
            model=model,
            optimizer=opt,
            scheduler=sched,
            ema=ema,
            generator=loader_gen,
            accumulate=ACCUMULATE,
        )
        return loop, model, opt, loader, lambda loss: loss.backward()
    from accelerate import Accelerator

    from rgt.ckpt.adapters.accelerate import accelerate_loop

    accelerator = Accelerator(cpu=True)
    model, opt, loader, sched = accelerator.prepare(model, opt, loader, sched)
    loop = accelerate_loop(
        accelerator,
        model=model,
        optimizer=opt,
        scheduler=sched,
        ema=ema,
        generator=loader_gen,
        accumulate=ACCUMULATE,
    )
    return loop, model, opt, loader, accelerator.backward


def train(kind: str, directory: str, out_path: str, kill: str) -> None:
    loop, model, opt, loader, backward = loop_for(kind)
    ema = loop.objects["ema"]
    ckpt = Checkpointer(directory, keep_last=2, asynchronous=True, every_steps=4)
    ckpt.resume(loop)
    if kill.startswith("persist:"):
        kill_in_persist(int(kill.split(":")[1]))
    with open(out_path, "a", encoding="utf-8") as out:
        while loop.epoch < EPOCHS:
            for images, labels in loop.batches(loader):
                loss = nn.functional.cross_entropy(model(images), labels) / ACCUMULATE
                backward(loss)
                out.write(f"micro {loop.micro_step} {float(loss).hex()}\n")
                out.flush()
                if kill == f"micro:{loop.micro_step}":
                    die()
                if loop.micro_step_done():
                    opt.step()
                    loop.objects["scheduler"].step()
                    opt.zero_grad()
                    ema.update_parameters(loop.model)
                    if kill == f"step:{loop.step}":
                        die()
                    if ckpt.due(loop.step):
                        ckpt.save(loop.state(), loop.step)
        ckpt.save(loop.state(), loop.step)
        final = ckpt.wait()
        assert final is not None
        whole = state_digest(loop.state(), algorithm="sha256")  # SHA-256 of the whole state
        out.write(f"final {final.step} {final.state_digest} {whole}\n")


def main() -> None:
    kind = sys.argv[1]
    torch.set_num_threads(1)
    loop_for(kind)  # imports and warms up everything once, before forking
    serve(lambda fields: child(kind, *fields))


def child(kind: str, directory: str, out_path: str, kill: str) -> int:
    try:
        train(kind, directory, out_path, kill)
    except BaseException as exc:  # reported through the exit code
        print(f"child failed: {exc!r}", file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    main()
