"""A Dataset that keeps its own RNG, reached through torch's views of it (``Subset``,
``random_split``'s parts) in the loader of another module (``_flow_data.DATASET_VIEWS``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.lint._lint import project, project_found

DATASET = """
import numpy as np
import torch
from torch.utils.data import Dataset


class Points(Dataset):
    def __init__(self, n=100, seed=0):
        self.{attr} = np.random.RandomState(seed)
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return torch.tensor(i + self.rng.rand())
"""
TRAIN = """
import torch
from torch.utils.data import DataLoader, Subset, random_split

from data.points import Points

{made}
loader = DataLoader(train_set, batch_size=8, shuffle=True, num_workers=4)
for epoch in range(10):
    for batch in loader:
        pass
"""
MADE = {
    "subset": "train_set = Subset(Points(), list(range(80)))",
    "random_split": "train_set, val_set = random_split(Points(), [80, 20])",
}


@pytest.mark.parametrize("view", sorted(MADE))
def test_a_view_of_a_dataset_that_keeps_an_rng_is_followed(tmp_path: Path, view: str) -> None:
    files = {"data/__init__.py": "", "data/points.py": DATASET.format(attr="rng"),
             "train.py": TRAIN.format(made=MADE[view])}  # fmt: skip
    found = [f for f in project_found(project(tmp_path, files)) if f[1] == "RGT305"]
    assert found == [("train.py", "RGT305", 7)]


@pytest.mark.parametrize("view", sorted(MADE))
def test_a_dataset_whose_rng_is_never_drawn_from_is_fine(tmp_path: Path, view: str) -> None:
    unused = DATASET.format(attr="unused").replace("self.rng.rand()", "0.5")
    files = {"data/__init__.py": "", "data/points.py": unused,
             "train.py": TRAIN.format(made=MADE[view])}  # fmt: skip
    assert [f for f in project_found(project(tmp_path, files)) if f[1] == "RGT305"] == []
