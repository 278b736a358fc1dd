"""Objects followed through the functions they are handed on to, across files
(``_flow_make.forwards``, ``_join_base.through``): a model passed to a loop function that
passes it to a step function applying the loss, a Dataset passed to a trainer that passes it to
the function building the DataLoader."""

from __future__ import annotations

from pathlib import Path

from tests.lint._lint import project, project_found

SETUP = "from setuptools import setup\n"
NET = """
    import torch.nn as nn


    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(8, 3)

        def forward(self, x):
            return self.fc(x).{last}(dim=1)
"""
STEP = """
    import torch.nn.functional as F


    def train_step(model, batch, optimizer):
        x, y = batch
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
"""
LOOP = """
    import torch

    from engine.step import train_step


    def run(model, loader, epochs):
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for epoch in range(epochs):
            for batch in loader:
                train_step(model, batch, optimizer)
"""
TRAIN = """
    import torch
    from models.net import Net
    from engine.loop import run

    model = Net()
    model.train()
    run(model, loader, 10)
"""


def _model_found(root: Path, last: str) -> list[tuple[str, str, int]]:
    files = {"setup.py": SETUP, "models/net.py": NET.format(last=last), "engine/step.py": STEP,
             "engine/loop.py": LOOP, "engine/__init__.py": "", "train.py": TRAIN}  # fmt: skip
    return project_found(project(root, files))


def test_a_model_handed_on_through_two_calls_is_followed_to_the_loss(tmp_path: Path) -> None:
    assert ("engine/step.py", "RGT101", 7) in _model_found(tmp_path, "softmax")


def test_a_model_returning_logits_through_the_same_calls_is_left_alone(tmp_path: Path) -> None:
    assert [f for f in _model_found(tmp_path, "relu") if f[1] == "RGT101"] == []


DATASET = """
    import numpy as np
    import torch
    from torch.utils.data import Dataset


    class Points(Dataset):
        def __len__(self):
            return 100

        def __getitem__(self, idx):
            return torch.tensor(idx * np.random.rand())
"""
LOADERS = """
    from torch.utils.data import DataLoader


    def get_loader(dataset, workers):
        return DataLoader(dataset, batch_size=8, shuffle=True, num_workers=workers)
"""
TRAINER = """
    import torch

    from data.loaders import get_loader


    def fit(model, dataset, epochs):
        loader = get_loader(dataset, 4)
        for epoch in range(epochs):
            for batch in loader:
                model(batch).sum().backward()
"""
MAIN = """
    import torch
    from data.points import Points
    from trainer import fit

    fit(torch.nn.Linear(1, 1), Points(), 10)
"""


def test_a_dataset_handed_on_through_two_calls_reaches_the_loader(tmp_path: Path) -> None:
    files = {"setup.py": SETUP, "requirements.txt": "torch==1.8.1\n", "data/__init__.py": "",
             "data/points.py": DATASET, "data/loaders.py": LOADERS, "trainer.py": TRAINER,
             "main.py": MAIN}  # fmt: skip
    found = project_found(project(tmp_path, files))
    assert ("data/loaders.py", "RGT305", 5) in found


KEEPER = """
    from torch.utils.data import DataLoader


    class Trainer:
        def __init__(self, model, dataset):
            self.model = model
            self.dataset = dataset

        def fit(self, epochs):
            loader = DataLoader(self.dataset, batch_size=8, shuffle=True, num_workers=4)
            for epoch in range(epochs):
                for batch in loader:
                    self.model(batch).sum().backward()
"""
STARRED = """
    import torch
    from data import *
    from keeper import Trainer

    model = torch.nn.Linear(1, 1)
    optimizer = torch.optim.Adam(model.parameters())
    Trainer(model, make_points()).fit(10)
"""
FACTORY = """
    from data.points import Points


    def make_points():
        return Points()
"""


def test_a_dataset_kept_by_a_trainer_and_made_by_a_star_imported_factory(tmp_path: Path) -> None:
    files = {"setup.py": SETUP, "requirements.txt": "torch==1.8.1\n", "data/__init__.py": FACTORY,
             "data/points.py": DATASET, "keeper.py": KEEPER, "main.py": STARRED}  # fmt: skip
    found = project_found(project(tmp_path, files))
    assert ("keeper.py", "RGT305", 10) in found
