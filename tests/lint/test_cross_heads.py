"""A model whose ``forward`` returns the output of a head it builds from a class of another
module (``_flow_kept.returns_held``): the head's softmax/sigmoid is the model's, followed to the
loss in a third module."""

from __future__ import annotations

from pathlib import Path

from tests.lint._lint import project, project_found

HEAD = """
import torch.nn as nn


class Head(nn.Module):
    def __init__(self, d, k):
        super().__init__()
        self.fc = nn.Linear(d, k)

    def forward(self, x):
        return self.fc(x).{last}(dim=-1)
"""
NET = """
import torch.nn as nn
import torch.nn.functional as F

from heads import Head


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(8, 16)
        self.head = Head(16, 3)

    def forward(self, x):
        x = F.dropout(self.body(x), 0.1, training=self.training)
        out = self.head(x)
        return out
"""
TRAIN = """
import torch
import torch.nn as nn

from models import Net

model = Net()
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for x, y in loader:
    optimizer.zero_grad()
    loss = criterion(model(x), y)
    loss.backward()
    optimizer.step()
"""


def _found(root: Path, last: str) -> list[tuple[str, str, int]]:
    files = {"heads.py": HEAD.format(last=last), "models.py": NET, "train.py": TRAIN}
    return [f for f in project_found(project(root, files)) if f[1].startswith("RGT10")]


def test_a_head_of_another_module_ending_in_softmax_is_the_models_output(tmp_path: Path) -> None:
    assert _found(tmp_path, "softmax") == [("train.py", "RGT101", 11)]


def test_a_head_returning_log_probabilities_is_left_alone(tmp_path: Path) -> None:
    assert _found(tmp_path, "log_softmax") == []


BASE = """
import torch.nn as nn


class BaseNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 3)

    def forward(self, x):
        return self.fc(self.features(x)).{last}(dim=1)
"""
CHILD = """
import torch.nn as nn

from base import BaseNet


class Net(BaseNet):
    def __init__(self):
        super().__init__()
        self.drop = nn.Dropout(0.1)

    def features(self, x):
        return self.drop(x) if self.training else x
"""


def test_a_forward_inherited_from_a_base_of_another_module(tmp_path: Path) -> None:
    files = {"base.py": BASE.format(last="softmax"), "models.py": CHILD, "train.py": TRAIN}
    found = [f for f in project_found(project(tmp_path, files)) if f[1].startswith("RGT10")]
    assert found == [("train.py", "RGT101", 11)]
    clean = {**files, "base.py": BASE.format(last="log_softmax")}
    found = [f for f in project_found(project(tmp_path / "c", clean)) if f[1].startswith("RGT10")]
    assert found == []
