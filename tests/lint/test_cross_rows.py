"""A loss class whose ``forward`` applies ``CrossEntropyLoss`` to rows of its input
(``scores[:, k, :]``, the class axis kept whole: ``_wrappers.rows``), called in another file with
the first part of a model's output that ends in a softmax. Picking rows keeps probabilities;
picking one class (``scores[:, 0]``) does not make a wrapper."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.lint._lint import project, project_found

MODELS = """
import torch
import torch.nn as nn
import torch.nn.functional as F


class Router(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 12)

    def forward(self, x):
        scores = {last}(self.fc(x).view(-1, 4, 3), dim=-1)
        return scores, scores.detach().mean(dim=1)


class SummedLoss(nn.Module):
    def __init__(self):
        super().__init__()
        self.ce = nn.CrossEntropyLoss()

    def forward(self, scores, target):
        total = 0
        for k in range(scores.size(1)):
            total = total + self.ce({picked}, target)
        return total
"""
TRAIN = """
import torch

import parts

net = parts.Router()
crit = parts.SummedLoss()
opt = torch.optim.Adam(net.parameters())
for x, y in loader:
    opt.zero_grad()
    scores, mean = net(x)
    loss = crit(scores, y)
    loss.backward()
    opt.step()
"""


@pytest.mark.parametrize(
    ("last", "picked", "expected"),
    [
        ("F.softmax", "scores[:, k, :]", [("train.py", "RGT101", 11)]),
        ("F.softmax", "scores[k]", [("train.py", "RGT101", 11)]),
        ("F.log_softmax", "scores[:, k, :]", []),
        ("F.softmax", "scores[:, k]", []),
    ],
)
def test_rows_of_the_input_handed_to_the_loss(
    tmp_path: Path, last: str, picked: str, expected: list[tuple[str, str, int]]
) -> None:
    models = MODELS.replace("{last}", last).replace("{picked}", picked)
    found = project_found(project(tmp_path, {"parts.py": models, "train.py": TRAIN}))
    assert [f for f in found if f[1].startswith("RGT10")] == expected
