"""Checkpoints written by the real libraries, for the verifier's corpus test.

Run as ``python -m tests.verify.corpus.make OUT FRAMEWORK``: writes ``OUT/FRAMEWORK/{good,nan,
hostile}/`` with what the framework itself saves (a tiny model, a few steps on CPU):

- ``good``: the framework's own checkpoint, untouched;
- ``nan``: one parameter set to NaN just before the framework saved;
- ``hostile``: the framework's checkpoint with one pickle that, if ever unpickled with arbitrary
  globals, writes ``OUT/FRAMEWORK/EXECUTED`` (``hostile.json`` names the file and the global).

Truncated and bit-flipped copies are made from ``good`` by the test itself (stdlib only).
This file is the one place that imports torch and the frameworks; it never loads a hostile file.
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
import socket
import sys
from pathlib import Path
from typing import Any

import torch
from torch import nn

FRAMEWORKS = ("accelerate", "transformers", "lightning", "dcp", "deepspeed")


class Hostile:
    """A pickle whose unpickling runs code: the marker file appears if anyone loads it."""

    def __init__(self, marker: Path, how: str) -> None:
        self.marker, self.how = str(marker), how

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        if self.how == "system":
            return (os.system, (f"echo executed > '{self.marker}'",))
        code = f"open({self.marker!r}, 'w').write('executed')"
        return (exec if self.how == "exec" else eval, (code,))


def _mlp() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))


def _poison(model: nn.Module) -> None:
    """NaN in one weight: what a diverged run saves."""
    with torch.no_grad():
        next(model.parameters()).view(-1)[0] = float("nan")


def _note(root: Path, hostile_file: str, global_name: str) -> None:
    doc = {"file": hostile_file, "global": global_name, "marker": str(root / "EXECUTED")}
    (root / "hostile.json").write_text(json.dumps(doc))


# accelerate: Accelerator.save_state with a model, AdamW, a scheduler, a DataLoader whose
# seedable sampler is saved, and an object registered for checkpointing.


class Counter:
    """A custom object registered with ``register_for_checkpointing``."""

    def __init__(self) -> None:
        self.count = 0

    def state_dict(self) -> dict[str, int]:
        return {"count": self.count}

    def load_state_dict(self, state: dict[str, int]) -> None:
        self.count = state["count"]


def make_accelerate(root: Path) -> None:
    from accelerate import Accelerator
    from accelerate.utils import DataLoaderConfiguration
    from torch.utils.data import DataLoader, TensorDataset

    seedable = DataLoaderConfiguration(use_seedable_sampler=True)
    acc = Accelerator(cpu=True, dataloader_config=seedable)
    data = TensorDataset(torch.randn(32, 8), torch.randn(32, 2))
    model = _mlp()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.9)
    model, opt, loader, sched = acc.prepare(model, opt, DataLoader(data, 4, shuffle=True), sched)
    counter = Counter()
    acc.register_for_checkpointing(counter)
    for step, (x, y) in zip(range(3), loader, strict=False):
        acc.backward(nn.functional.mse_loss(model(x), y))
        opt.step(), sched.step(), opt.zero_grad()
        counter.count = step + 1
    acc.save_state(str(root / "good" / "out" / "step_3"))
    shutil.copytree(root / "good", root / "hostile")
    torch.save({"count": Hostile(root / "EXECUTED", "system")},
               root / "hostile" / "out" / "step_3" / "custom_checkpoint_0.pkl")  # fmt: skip
    _note(root, "out/step_3/custom_checkpoint_0.pkl", "system")
    _poison(model)
    acc.save_state(str(root / "nan" / "out" / "step_3"))


# transformers: Trainer on a GPT-2 built from a config (no download), an in-memory dataset.


def make_transformers(root: Path) -> None:
    from transformers import (
        GPT2Config,
        GPT2LMHeadModel,
        Trainer,
        TrainerCallback,
        TrainingArguments,
    )

    class PoisonAtTheEnd(TrainerCallback):
        def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            if state.global_step == state.max_steps:  # the save of this step follows
                _poison(kw["model"])

    for variant in ("good", "nan"):
        torch.manual_seed(0)
        config = GPT2Config(n_layer=1, n_embd=16, n_head=2, vocab_size=64, n_positions=16)
        ids = torch.randint(0, 64, (16, 8))
        data = [{"input_ids": row, "labels": row} for row in ids]
        args = TrainingArguments(
            output_dir=str(root / variant / "out"), max_steps=4, save_steps=4,
            per_device_train_batch_size=4, report_to=[], use_cpu=True, disable_tqdm=True,
            logging_steps=2, seed=0,
        )  # fmt: skip
        callbacks = [PoisonAtTheEnd()] if variant == "nan" else []
        trainer = Trainer(model=GPT2LMHeadModel(config), args=args, train_dataset=data,
                          callbacks=callbacks)  # fmt: skip
        trainer.train()
    shutil.copytree(root / "good", root / "hostile")
    torch.save(Hostile(root / "EXECUTED", "exec"),
               root / "hostile" / "out" / "checkpoint-4" / "training_args.bin")  # fmt: skip
    _note(root, "out/checkpoint-4/training_args.bin", "exec")


# Lightning: Trainer.fit with the default ModelCheckpoint (nothing monitored: kth_value is inf).


def make_lightning(root: Path) -> None:
    import pytorch_lightning as pl
    from torch.utils.data import DataLoader, TensorDataset

    class Tiny(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.net = _mlp()

        def training_step(self, batch: Any, _: int) -> torch.Tensor:
            x, y = batch
            return nn.functional.mse_loss(self.net(x), y)

        def configure_optimizers(self) -> Any:
            return torch.optim.AdamW(self.parameters(), lr=1e-2)

    class PoisonBeforeTheSave(pl.Callback):  # user callbacks run before ModelCheckpoint
        def on_train_epoch_end(self, trainer: Any, module: Any) -> None:
            _poison(module)

    for variant in ("good", "nan"):
        torch.manual_seed(0)
        data = DataLoader(TensorDataset(torch.randn(16, 8), torch.randn(16, 2)), batch_size=4)
        trainer = pl.Trainer(
            default_root_dir=str(root / variant), max_epochs=1, accelerator="cpu",
            enable_progress_bar=False, enable_model_summary=False,
            callbacks=[PoisonBeforeTheSave()] if variant == "nan" else [],
        )  # fmt: skip
        trainer.fit(Tiny(), data)
    [ckpt] = (root / "good").rglob("*.ckpt")
    rel = ckpt.relative_to(root / "good").as_posix()
    shutil.copytree(root / "good", root / "hostile")
    state = torch.load(ckpt, weights_only=False)  # our own file, just written by Lightning
    state["hyper_parameters"] = {"note": Hostile(root / "EXECUTED", "exec")}
    torch.save(state, root / "hostile" / rel)
    _note(root, rel, "exec")


# torch.distributed.checkpoint: dcp.save from 2 gloo ranks on 127.0.0.1.


def _dcp_rank(rank: int, root: str, port: int) -> None:
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    model = _mlp()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    model(torch.randn(4, 8)).sum().backward()
    opt.step()
    for variant in ("good", "nan"):
        if variant == "nan":
            _poison(model)
        weights, optim = get_state_dict(model, opt)
        out = f"{root}/{variant}/out/dcp_step_2"
        dcp.save({"model": weights, "optim": optim}, checkpoint_id=out)
    dist.destroy_process_group()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def make_dcp(root: Path) -> None:
    import torch.multiprocessing as mp

    mp.spawn(_dcp_rank, args=(str(root), _free_port()), nprocs=2, join=True)
    shutil.copytree(root / "good", root / "hostile")
    with open(root / "hostile" / "out" / "dcp_step_2" / ".metadata", "wb") as fh:
        pickle.dump(Hostile(root / "EXECUTED", "eval"), fh)  # .metadata is a plain pickle
    _note(root, "out/dcp_step_2/.metadata", "eval")


# DeepSpeed: ZeRO stage 1 on the CPU accelerator, one rank, engine.save_checkpoint.


def make_deepspeed(root: Path) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(_free_port()), RANK="0",
                      WORLD_SIZE="1", LOCAL_RANK="0")  # fmt: skip
    import deepspeed

    model = _mlp()
    config = {"train_batch_size": 4, "zero_optimization": {"stage": 1},
              "zero_allow_untested_optimizer": True}  # fmt: skip
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    engine, *_ = deepspeed.initialize(model=model, optimizer=opt, config=config)
    for _ in range(2):
        engine.backward(engine(torch.randn(4, 8)).sum())
        engine.step()
    engine.save_checkpoint(str(root / "good" / "out"), tag="global_step2")
    hostile = {"note": Hostile(root / "EXECUTED", "system")}  # client_state lands in the file
    engine.save_checkpoint(str(root / "hostile" / "out"), tag="global_step2", client_state=hostile)
    _note(root, "out/global_step2/mp_rank_00_model_states.pt", "system")
    _poison(engine.module)
    engine.save_checkpoint(str(root / "nan" / "out"), tag="global_step2")


def main(out: str, framework: str) -> None:
    root = Path(out) / framework
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    globals()[f"make_{framework}"](root)
    (root / "DONE").write_text(torch.__version__)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
