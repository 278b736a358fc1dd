#!/usr/bin/env python3
"""A small real training script written the way rgt.ckpt should be used.

A tiny CNN learns to classify synthetic 16x16 images (ten noisy class prototypes, generated
deterministically from the seed, with a held-out validation split). Kill it with ``kill -9`` at
any moment and start it again: it resumes from the newest valid checkpoint and ends with weights
bit-identical to a run that was never interrupted. What makes that true, in order:

1. every random source is seeded, and one CPU thread makes the kernels deterministic;
2. the checkpoint holds the full training state: model, optimizer, scheduler, GradScaler, EMA,
   all RNG states, and the data position (epoch, batches done in it, the shuffle generator's
   state at the start of the epoch);
3. on resume the epoch's shuffle is rebuilt from that generator state, the iterator is created,
   and only THEN the global RNG is restored (creating an iterator may draw from it);
4. log files written after the checkpoint are cut back to the resumed step.

    python train_demo.py --steps 600 --ckpt-every 50
    RGT_SMOKE=1 python train_demo.py          # 2 batches, checkpoint every batch

Environment: ``RGT_CKPT_DIR`` (default ``./checkpoints``), ``RGT_OUTPUT_DIR`` (default
``./outputs``), ``RGT_SMOKE``, ``RGT_ATTEMPT``; ``RGT_SMOKE_KILL_AFTER_SAVE=N`` makes rgt.ckpt
SIGKILL this process after its N-th save (how ``rgt smoke`` tests the resume).
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import os
import random
import signal
import subprocess
from pathlib import Path
from typing import Any

import numpy
import torch
from torch import nn
from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn
from torch.utils.data import DataLoader, TensorDataset

from rgt.ckpt import Checkpointer, capture_rng, restore_rng

CLASSES, SIDE, BATCH, VAL_N = 10, 16, 64, 1024


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=600, help="optimizer steps in total")
    parser.add_argument("--seed", type=int, default=0, help="training seed (init, order, dropout)")
    parser.add_argument(
        "--data-seed",
        type=int,
        default=0,
        help="dataset seed: fixed across training seeds, so seeds replicate one experiment",
    )
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--ckpt-every", type=int, default=50, help="checkpoint every N steps")
    parser.add_argument("--train-size", type=int, default=4096, help="training images")
    args = parser.parse_args()
    args.smoke = os.environ.get("RGT_SMOKE") == "1"
    if args.smoke:
        args.steps = 2  # a smoke run: two batches, a checkpoint after each
    return args


def make_data(seed: int, train_size: int) -> dict[str, TensorDataset]:
    """Ten class prototypes plus noise and a random shift; train and val drawn independently."""
    gen = torch.Generator().manual_seed(seed)
    prototypes = torch.randn(CLASSES, 1, SIDE, SIDE, generator=gen)

    def draw(count: int) -> TensorDataset:
        labels = torch.randint(0, CLASSES, (count,), generator=gen)
        shifts = torch.randint(-2, 3, (count, 2), generator=gen)
        images = torch.stack(
            [
                torch.roll(prototypes[label], (int(dy), int(dx)), dims=(1, 2))
                for label, (dy, dx) in zip(labels, shifts, strict=True)
            ]
        )
        return TensorDataset(images + 1.5 * torch.randn(images.shape, generator=gen), labels)

    return {"train": draw(train_size), "val": draw(VAL_N)}


def make_model() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(1, 32, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Dropout(0.2),  # dropout draws from the global torch RNG every step
        nn.Linear(64 * (SIDE // 4) ** 2, 256),
        nn.ReLU(),
        nn.Linear(256, CLASSES),
    )


class Trainer:
    """Everything that changes during training, and how it goes into and out of a checkpoint."""

    def __init__(self, args: argparse.Namespace, data: dict[str, TensorDataset]) -> None:
        self.args, self.data = args, data
        self.model = make_model()
        self.ema = AveragedModel(self.model, multi_avg_fn=get_ema_multi_avg_fn(0.99))
        self.opt = torch.optim.Adam(self.model.parameters(), lr=args.lr)
        self.sched = torch.optim.lr_scheduler.CosineAnnealingLR(self.opt, T_max=args.steps)
        self.scaler = torch.amp.GradScaler("cpu", enabled=False)  # enabled with AMP on a GPU
        # The loader owns its shuffle generator; its state at each epoch start is checkpointed.
        self.loader_gen = torch.Generator().manual_seed(args.seed + 1)
        self.loader = DataLoader(
            data["train"], batch_size=BATCH, shuffle=True, generator=self.loader_gen, drop_last=True
        )
        self.epoch, self.done_in_epoch, self.step = 0, 0, 0
        self.saved_step = -1
        self.epoch_start_gen = self.loader_gen.get_state()

    def state(self) -> dict[str, Any]:
        return {
            "model": self.model.state_dict(),
            "ema": self.ema.state_dict(),
            "optimizer": self.opt.state_dict(),
            "scheduler": self.sched.state_dict(),
            "scaler": self.scaler.state_dict(),
            "rng": capture_rng(),
            "epoch": self.epoch,
            "done_in_epoch": self.done_in_epoch,
            "step": self.step,
            "loader_gen_at_epoch_start": self.epoch_start_gen,
        }

    def load(self, state: dict[str, Any]) -> None:
        self.model.load_state_dict(state["model"])
        self.ema.load_state_dict(state["ema"])
        self.opt.load_state_dict(state["optimizer"])
        self.sched.load_state_dict(state["scheduler"])
        self.scaler.load_state_dict(state["scaler"])
        self.epoch, self.done_in_epoch = state["epoch"], state["done_in_epoch"]
        self.step = self.saved_step = state["step"]
        self.loader_gen.set_state(state["loader_gen_at_epoch_start"])

    def train_step(self, images: torch.Tensor, labels: torch.Tensor) -> float:
        self.model.train()
        self.opt.zero_grad(set_to_none=True)
        loss = nn.functional.cross_entropy(self.model(images), labels)
        self.scaler.scale(loss).backward()
        self.scaler.step(self.opt)
        self.scaler.update()
        self.sched.step()
        self.ema.update_parameters(self.model)
        return float(loss.item())

    @torch.no_grad()
    def evaluate(self) -> dict[str, float]:
        """Validation loss and accuracy; eval mode draws no random numbers."""
        self.model.eval()
        images, labels = self.data["val"].tensors
        logits = self.model(images)
        loss = nn.functional.cross_entropy(logits, labels)
        accuracy = (logits.argmax(dim=1) == labels).float().mean()
        return {"val_loss": float(loss), "val_accuracy": float(accuracy)}


def train(
    trainer: Trainer, ckpt: Checkpointer, rng_state: dict[str, Any] | None, metrics_path: Path
) -> None:
    """The loop: train until ``--steps``, checkpointing when due and at the end."""
    while trainer.step < trainer.args.steps:
        trainer.epoch_start_gen = trainer.loader_gen.get_state()
        batches = iter(trainer.loader)  # fixes this epoch's shuffle ...
        if rng_state is not None:
            restore_rng(rng_state)  # ... so the global RNG is restored only now
            rng_state = None
        for index, (images, labels) in enumerate(batches):
            if index < trainer.done_in_epoch:
                continue  # batches this epoch already trained on before the restart
            trainer.step, trainer.done_in_epoch = trainer.step + 1, index + 1
            loss = trainer.train_step(images, labels)
            log_step(metrics_path, trainer.step, loss)
            if ckpt.due(trainer.step) or trainer.step == trainer.args.steps:
                save(trainer, ckpt)
            if ckpt.should_stop:
                stop_on_signal(trainer, ckpt)
            if trainer.step >= trainer.args.steps:
                break
        else:
            trainer.epoch, trainer.done_in_epoch = trainer.epoch + 1, 0


def save(trainer: Trainer, ckpt: Checkpointer) -> None:
    metric = trainer.evaluate()["val_accuracy"]
    ckpt.save(trainer.state(), trainer.step, metric=metric)
    trainer.saved_step = trainer.step


def stop_on_signal(trainer: Trainer, ckpt: Checkpointer) -> None:
    """The platform warned us (SIGTERM/SIGUSR1). Save, then die by that same signal so the
    agent sees a preemption, not a success."""
    if trainer.saved_step != trainer.step:
        save(trainer, ckpt)
    ckpt.wait()  # dying by the signal must not lose the save still being written
    signum = ckpt.stop_signal or signal.SIGTERM
    print(f"stopping on signal {signum}: checkpoint saved at step {trainer.step}", flush=True)
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def log_step(metrics_path: Path, step: int, loss: float) -> None:
    print(f"step {step} loss {loss:.6f}", flush=True)
    with metrics_path.open("a", encoding="utf-8") as handle:
        handle.write(json.dumps({"step": step, "loss": loss}) + "\n")


def cut_log(metrics_path: Path, step: int) -> None:
    """Drop log lines of steps after the checkpoint: they are about to be trained again."""
    if not metrics_path.exists():
        return
    lines = metrics_path.read_text(encoding="utf-8").splitlines(keepends=True)
    kept = [line for line in lines if line.strip() and json.loads(line)["step"] <= step]
    write_atomic(metrics_path, "".join(kept).encode("utf-8"))


def write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    with tmp.open("wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def tensor_hash(dataset: TensorDataset) -> str:
    digest = hashlib.sha256()
    for tensor in dataset.tensors:
        digest.update(tensor.contiguous().numpy().tobytes())
    return digest.hexdigest()


def code_version() -> dict[str, Any]:
    here = Path(__file__).resolve().parent
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=here,
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
        dirty = bool(
            subprocess.run(
                ["git", "status", "--porcelain", "--", "."],
                cwd=here,
                capture_output=True,
                text=True,
                timeout=10,
            ).stdout.strip()
        )
    except (OSError, subprocess.SubprocessError):
        commit, dirty = None, None
    snapshot = os.environ.get("RGT_SNAPSHOT") or sha256(Path(__file__))[:16]
    return {"git_commit": commit, "dirty": dirty, "snapshot": snapshot}


def write_outputs(
    args: argparse.Namespace, trainer: Trainer, data: dict[str, TensorDataset], out: Path
) -> None:
    weights = out / "model.safetensors"
    try:
        from safetensors.torch import save_file

        save_file({k: v.contiguous() for k, v in trainer.model.state_dict().items()}, weights)
    except ImportError:
        weights = out / "model.pt"
        torch.save(trainer.model.state_dict(), weights)
    val = trainer.evaluate()
    step = trainer.step
    logged = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    recent = [entry["loss"] for entry in logged[-20:]]

    def metric(value: float, direction: str, split: str) -> dict[str, Any]:
        return {"value": value, "direction": direction, "split": split, "step": step}

    results = {
        "schema": "rgt.results/1",
        "name": "train_demo",
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(),
        "seed": args.seed,
        "config": {
            "steps": args.steps,
            "lr": args.lr,
            "data_seed": args.data_seed,
            "ckpt_every": args.ckpt_every,
            "batch_size": BATCH,
            "model": "cnn-32-64-256",
            "train_size": args.train_size,
            "val_size": VAL_N,
        },
        "code": code_version(),
        "data": {split: tensor_hash(dataset) for split, dataset in data.items()},
        "metrics": {
            "val_accuracy": metric(val["val_accuracy"], "max", "val"),
            "val_loss": metric(val["val_loss"], "min", "val"),
            "train_loss": metric(sum(recent) / max(len(recent), 1), "min", "train"),
        },
        "artifacts": [
            {"path": p.name, "sha256": sha256(p), "bytes": p.stat().st_size}
            for p in (weights, out / "metrics.jsonl")
        ],
        "steps": step,
        "smoke": args.smoke,
        "attempts": int(os.environ.get("RGT_ATTEMPT") or 1),
    }
    write_atomic(out / "results.json", (json.dumps(results, indent=2) + "\n").encode("utf-8"))
    print(
        f"done: step {step} val_accuracy {val['val_accuracy']:.4f} val_loss {val['val_loss']:.4f}",
        flush=True,
    )


def main() -> None:
    args = parse_args()
    # One thread: CPU kernels then sum in a fixed order, so two runs are bit-identical. On a GPU
    # also call torch.use_deterministic_algorithms(True) and set CUBLAS_WORKSPACE_CONFIG=:4096:8
    # (not done here: this script trains on the CPU, and that call imports torch's compiler
    # stack, ~3 s of start-up on every resume).
    torch.set_num_threads(1)
    random.seed(args.seed)
    numpy.random.seed(args.seed)  # unseeded, numpy's global state differs between runs
    torch.manual_seed(args.seed)
    out = Path(os.environ.get("RGT_OUTPUT_DIR") or "outputs")
    out.mkdir(parents=True, exist_ok=True)
    metrics_path = out / "metrics.jsonl"

    data = make_data(args.data_seed, args.train_size)
    trainer = Trainer(args, data)
    # asynchronous: save() returns once the state is snapshotted; the write runs alongside the
    # next steps, and wait() (before exiting) makes sure the last one is durable.
    ckpt = Checkpointer.from_env(
        every_steps=args.ckpt_every,
        keep_last=3,
        best_metric="val_accuracy",
        mode="max",
        asynchronous=True,
    )
    ckpt.install_signal_handler()
    state = ckpt.load_latest()  # None on a fresh start; the newest VALID checkpoint otherwise
    if state is not None:
        trainer.load(state)
        print(f"resumed from step {trainer.step}", flush=True)
    cut_log(metrics_path, trainer.step)
    train(trainer, ckpt, state["rng"] if state else None, metrics_path)
    ckpt.wait()  # the final checkpoint is durable before the outputs claim the run is done
    write_outputs(args, trainer, data, out)


if __name__ == "__main__":
    main()
