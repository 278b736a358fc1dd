"""An evaluation two calls deep across files that leaves the trained model in eval mode
(``RGT202`` through ``_join_base.through``): ``validate`` in engine.py hands the model to
``evaluate`` in metrics.py, which calls ``model.eval()``; the training loop never calls
``model.train()`` again. A ``model.train()`` after the hand-over restores it."""

from __future__ import annotations

from pathlib import Path

from tests.lint._lint import project, project_found

NET = """
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 3)
        self.drop = nn.Dropout(0.5)

    def forward(self, x):
        return self.fc(self.drop(x))
"""
METRICS = """
import torch


def evaluate(model, loader):
    model.eval()
    correct = 0
    with torch.no_grad():
        for x, y in loader:
            correct += (model(x).argmax(1) == y).sum().item()
    return correct
"""
ENGINE = """
import torch

from metrics import evaluate


def validate(model, loader):
    acc = evaluate(model, loader){restore}
    return acc
"""
TRAIN = """
import torch
import torch.nn.functional as F

from engine import validate
from models import Net

model = Net()
model.train()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for epoch in range(10):
    for i, (x, y) in enumerate(train_loader):
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        if i % 100 == 0:
            acc = validate(model, val_loader)
"""


def _left(root: Path, restore: str = "") -> list[tuple[str, str, int]]:
    files = {"models.py": NET, "metrics.py": METRICS, "engine.py": ENGINE.format(restore=restore),
             "train.py": TRAIN}  # fmt: skip
    return [f for f in project_found(project(root, files)) if f[1] == "RGT202"]


def test_an_eval_two_calls_deep_in_other_files_leaves_the_model_in_eval(tmp_path: Path) -> None:
    assert _left(tmp_path) == [("train.py", "RGT202", 17)]


def test_a_train_call_after_the_hand_over_restores_the_mode(tmp_path: Path) -> None:
    assert _left(tmp_path, restore="\n    model.train()") == []
