"""The model every torchrun script of the GPU check trains or saves: residual MLP blocks under
FSDP2 (``fully_shard`` per block, then the root), the way FSDP2 is meant to wrap a transformer.

Sizes come from the environment (set by ``check.py``): ``GC_DIM`` and ``GC_BLOCKS``. On the GPU
the default, 512 wide and 4 blocks, is 8.4 M parameters: 34 MB of weights plus 67 MB of Adam
moments, ~100 MB of state to save. The CPU dry run uses a tiny one.

Deterministic by construction: the weights are drawn on the CPU from a fixed seed (the same on
every rank and in every mode), every batch comes from a CPU generator seeded by (step, rank),
and ``setup()`` turns on ``torch.use_deterministic_algorithms`` (``GC_DETERMINISTIC=warn`` only
warns, for a rerun on a card where some kernel has no deterministic form).
"""

from __future__ import annotations

import os
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard

OUT_DIM = 16


class Block(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.up = nn.Linear(dim, 4 * dim)
        self.down = nn.Linear(4 * dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = x + self.down(nn.functional.gelu(self.up(self.norm(x))))
        return out


def device() -> torch.device:
    if os.environ.get("GC_DEVICE", "cpu") == "cuda":
        return torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
    return torch.device("cpu")


def setup() -> torch.device:
    """Deterministic settings, then the process group: NCCL on the GPU, gloo on the CPU."""
    here = device()
    torch.use_deterministic_algorithms(True, warn_only=os.environ.get("GC_DETERMINISTIC") == "warn")
    if here.type == "cuda":
        torch.cuda.set_device(here)
        torch.backends.cudnn.benchmark = False
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        dist.init_process_group("nccl", device_id=here)
    else:
        torch.set_num_threads(1)
        dist.init_process_group("gloo")
    return here


def build(seed: int = 0) -> tuple[nn.Module, torch.optim.Optimizer]:
    dim, blocks = int(os.environ.get("GC_DIM", "512")), int(os.environ.get("GC_BLOCKS", "4"))
    torch.manual_seed(seed)
    model = nn.Sequential(*[Block(dim) for _ in range(blocks)], nn.Linear(dim, OUT_DIM))
    here = device()
    model.to(here)
    mesh = init_device_mesh(here.type, (dist.get_world_size(),))
    for layer in model:
        if isinstance(layer, Block):
            fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    return model, torch.optim.Adam(model.parameters(), lr=1e-3)


def batch(step: int, rank: int) -> tuple[torch.Tensor, torch.Tensor]:
    """This rank's batch of ``step``, plus noise from the global CPU RNG (so an exact resume
    needs every rank's RNG state back from the checkpoint)."""
    dim, size = int(os.environ.get("GC_DIM", "512")), int(os.environ.get("GC_BATCH", "64"))
    gen = torch.Generator().manual_seed(1000 * step + rank)
    x, y = torch.randn(size, dim, generator=gen), torch.randn(size, OUT_DIM, generator=gen)
    x = x + 0.01 * torch.randn(x.shape)
    return x.to(device()), y.to(device())


def train_step(model: nn.Module, opt: torch.optim.Optimizer, step: int) -> float:
    x, y = batch(step, dist.get_rank())
    loss = nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()  # type: ignore[no-untyped-call]
    opt.step()
    return float(loss)


def full_tensors(model: nn.Module, optim_state: dict[str, Any]) -> dict[str, torch.Tensor]:
    """Every parameter and optimizer tensor gathered whole, on the CPU (a collective: every
    rank calls it, in the same order)."""
    named = list(model.state_dict().items()) + [
        (f"{name}.{slot}", value)
        for name, slots in sorted(optim_state["state"].items())
        for slot, value in sorted(slots.items())
    ]
    out = {}
    for name, value in named:
        whole = value.full_tensor() if hasattr(value, "full_tensor") else value
        out[name] = whole.detach().to("cpu").clone()
    return out


def state_bytes(tensors: dict[str, torch.Tensor]) -> int:
    return sum(t.numel() * t.element_size() for t in tensors.values())
