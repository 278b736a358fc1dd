"""A model handed to an evaluator's constructor and run by its method in another module
(``_flow_held``, ``_join_modes``): ``Evaluator(model).run(loader)`` with the model still in
training mode, ``Evaluator.run`` running ``self.model`` without ``.eval()``."""

from __future__ import annotations

from pathlib import Path

from tests.lint._lint import project, project_found

NET = """
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 3)
        self.drop = nn.{layer}

    def forward(self, x):
        return self.fc(self.drop(x))
"""
EVALUATOR = """
import torch


class Evaluator:
    def __init__(self, model, device="cpu"):
        self.model = model.to(device)

    def run(self, loader):
        correct = 0
        with torch.no_grad():
            for x, y in loader:
                correct += (self.model(x).argmax(1) == y).sum().item()
        return correct
"""
TRAIN = """
import torch
import torch.nn.functional as F

from evaluator import Evaluator
from models import Net

model = Net()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for epoch in range(10):
    model.train()
    for x, y in train_loader:
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
    {before}evaluator = Evaluator(model)
    acc = evaluator.run(val_loader)
"""


def _found(root: Path, layer: str = "Dropout(0.5)", before: str = "") -> list[tuple[str, int]]:
    files = {"models.py": NET.format(layer=layer), "evaluator.py": EVALUATOR,
             "train.py": TRAIN.format(before=before)}  # fmt: skip
    return [(f[0], f[2]) for f in project_found(project(root, files)) if f[1] == "RGT201"]


def test_a_model_handed_to_an_evaluators_constructor_is_followed(tmp_path: Path) -> None:
    assert _found(tmp_path) == [("train.py", 17)]


def test_the_model_put_in_eval_mode_first_is_fine(tmp_path: Path) -> None:
    assert _found(tmp_path, before="model.eval()\n    ") == []


def test_a_model_with_no_layer_that_switches_is_fine(tmp_path: Path) -> None:
    assert _found(tmp_path, layer="Identity()") == []
