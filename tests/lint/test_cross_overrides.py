"""A training step written once in a base class, run by a subclass that overrides what it calls
(``_overrides``): ``self.forward`` ending in a softmax (its heads' outputs joined with
``torch.cat``) and ``self.head_loss`` applying a local ``nn.CrossEntropyLoss`` to a reshaped
parameter. The step in the base class hands the subclass's probabilities to the loss."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.lint._lint import found

SOURCE = """
import torch
import torch.nn as nn
import torch.nn.functional as F


class Predictor(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(16, 16)
        self.head = nn.Linear(16, 4)
        self.opt = torch.optim.SGD(self.parameters(), lr=0.1)

    def forward(self, x):
        return self.head(self.body(x)), self.body(x)

    def head_loss(self, scores, target):
        loss = nn.MSELoss()
        return loss(scores, target)

    def fit_step(self, x, y):
        scores, _ = self.forward(x)
        loss = self.head_loss(scores, y)
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()


class MultiHead(Predictor):
    def __init__(self):
        super().__init__()
        self.heads = nn.ModuleList([nn.Linear(16, 4) for _ in range(3)])

    def forward(self, x):
        hidden = self.body(x)
        out = torch.zeros(0)
        for head in self.heads:
            part = {part}
            out = torch.cat((out, part.unsqueeze(-1)), dim=-1)
        return out, hidden

    def head_loss(self, scores, target):
        loss = nn.CrossEntropyLoss()
        scores = scores.permute(0, 2, 1)
        return loss(scores, target.long())
"""


@pytest.mark.parametrize(
    ("part", "expected"),
    [
        ("F.softmax(head(hidden), dim=1)", [("RGT101", 22)]),
        ("head(hidden)", []),
    ],
)
def test_a_subclass_overriding_forward_and_the_loss_method(
    tmp_path: Path, part: str, expected: list[tuple[str, int]]
) -> None:
    source = SOURCE.replace("{part}", part)
    assert [f for f in found(tmp_path, source) if f[0].startswith("RGT10")] == expected
