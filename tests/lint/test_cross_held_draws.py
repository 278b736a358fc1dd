"""RGT305 on a transform that keeps a pipeline of other transforms (``self.pipe =
Chain([Jitter(), Shift()])``) and runs it: the draws from NumPy's global RNG of the listed
transforms are followed, also in a module that never mentions torch and imports NumPy's
``random`` by name (``_flow_data._held_parts``, ``_join_data._held_draw``, ``_run.summarised``)."""

from __future__ import annotations

from pathlib import Path

from tests.lint._lint import project
from tests.lint._lint import project_found as found

AUGMENT = """
import numpy as np
from numpy import random


class Chain:
    def __init__(self, steps):
        self.steps = steps

    def __call__(self, x):
        for s in self.steps:
            x = s(x)
        return x


class Jitter:
    def __call__(self, x):
        return x + {draw}


class Shift:
    def __call__(self, x):
        return np.roll(x, 1)


class TrainAugment:
    def __init__(self):
        self.pipe = Chain([Shift(), Jitter()])

    def __call__(self, x):
        return self.pipe(x)
"""
TRAIN = """
import torch
from torch.utils.data import DataLoader, Dataset

from aug.ops import TrainAugment


class Signals(Dataset):
    def __init__(self, items, transform=None):
        self.items, self.transform = items, transform

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        return torch.as_tensor(self.transform(self.items[i]))


signals = Signals(list(range(10)), transform=TrainAugment())
loader = DataLoader(signals, batch_size=2, num_workers=3)
"""


def _rng(root: Path, draw: str) -> list[tuple[str, str, int]]:
    files = {"aug/__init__.py": "", "aug/ops.py": AUGMENT.format(draw=draw), "train.py": TRAIN,
             "requirements.txt": "torch==1.7.1\\n"}  # fmt: skip
    return [f for f in found(project(root, files)) if f[1] == "RGT305"]


def test_a_draw_of_a_transform_listed_in_a_kept_pipeline(tmp_path: Path) -> None:
    assert _rng(tmp_path, "random.uniform(-1, 1)") == [("train.py", "RGT305", 19)]


def test_a_kept_pipeline_that_draws_nothing_is_clean(tmp_path: Path) -> None:
    assert _rng(tmp_path, "1.0") == []
