"""RGT305 on a transform that draws from an RNG object its base class makes in the class body
(``R = np.random.RandomState()``): one object, copied alike into every DataLoader worker."""

from __future__ import annotations

from pathlib import Path

from tests.lint._lint import project
from tests.lint._lint import project_found as found

BASE = """
import numpy as np


class Randomizable:
    R = np.random.{made}

    def set_random_state(self, seed):
        self.R = np.random.RandomState(seed)
"""
CROP = """
import torch

from transforms.base import Randomizable


class RandCrop(Randomizable):
    def __init__(self, size):
        self.size = size

    def randomize(self, width):
        self.start = self.R.randint(0, width - self.size)

    def __call__(self, image):
        self.randomize(image.shape[-1])
        return image[..., self.start:self.start + self.size]
"""
TRAIN = """
import torch
from torch.utils.data import DataLoader, Dataset

from transforms.crop import RandCrop


class Images(Dataset):
    def __init__(self, items, transform=None):
        self.items, self.transform = items, transform

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        return self.transform(self.items[i])


loader = DataLoader(Images(list(range(10)), transform=RandCrop(8)), num_workers=4)
"""


def test_a_transform_drawing_from_a_class_level_random_state(tmp_path: Path) -> None:
    files = {"transforms/__init__.py": "", "transforms/base.py": BASE.format(made="RandomState()"),
             "transforms/crop.py": CROP, "train.py": TRAIN}  # fmt: skip
    assert ("train.py", "RGT305", 18) in found(project(tmp_path, files))


def test_a_class_level_value_that_is_no_rng_is_clean(tmp_path: Path) -> None:
    files = {"transforms/__init__.py": "", "transforms/base.py": BASE.format(made="pi"),
             "transforms/crop.py": CROP, "train.py": TRAIN}  # fmt: skip
    assert [f for f in found(project(tmp_path, files)) if f[1] == "RGT305"] == []
