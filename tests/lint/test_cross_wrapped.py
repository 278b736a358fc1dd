"""A model followed through what wraps or moves it (``_flow_kept.unwrapped``): ``model.to(dev)``
bound to the same name again, ``nn.DataParallel(Net())``, ``DistributedDataParallel``,
``torch.compile``, and a model built right in the call that hands it to a training function of
another module (``fit(Net().cuda(), loader)``, ``_flow_passes``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.lint._lint import project, project_found

NET = """
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 3)

    def forward(self, x):
        return self.fc(x).{last}(dim=1)
"""
HEAD = "import torch\nimport torch.nn as nn\nfrom models import Net\n"
LOOP = """
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for x, y in loader:
    optimizer.zero_grad()
    loss = criterion(model(x), y)
    loss.backward()
    optimizer.step()
"""
FIT = """import torch
import torch.nn.functional as F


def fit(model, loader):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in loader:
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
"""
KEEPER = """import torch
import torch.nn as nn
from models import Net


class Runner:
    def __init__(self):
        self.model = Net()
        self.model = self.model.to("cuda")
        self.criterion = nn.CrossEntropyLoss()

    def step(self, x, y, optimizer):
        optimizer.zero_grad()
        loss = self.criterion(self.model(x), y)
        loss.backward()
        optimizer.step()
"""
DDP = "torch.nn.parallel.DistributedDataParallel(model, device_ids=[0])"
CALLED = HEAD + "from trainer import fit\nfit(Net().cuda(), data)\n"
CASES = {
    "data_parallel": ("train.py", {"train.py": HEAD + "model = nn.DataParallel(Net())\n" + LOOP}),
    "ddp": ("train.py", {"train.py": HEAD + f"model = Net().cuda()\nmodel = {DDP}\n" + LOOP}),
    "moved": ("train.py", {"train.py": HEAD + "model = Net()\nmodel = model.to('cuda')\n" + LOOP}),
    "compiled": ("train.py", {"train.py": HEAD + "model = torch.compile(Net())\n" + LOOP}),
    "built_in_the_call": (
        "trainer.py",
        {
            "trainer.py": FIT,
            "train.py": HEAD + "from trainer import fit\nfit(Net().cuda(), data)\n",
        },
    ),
    "kept_and_moved": ("runner.py", {"runner.py": KEEPER}),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_wrapped_or_moved_model_is_followed(tmp_path: Path, case: str) -> None:
    where, files = CASES[case]
    found = project_found(project(tmp_path, {"models.py": NET.format(last="softmax"), **files}))
    assert [f[0] for f in found if f[1] == "RGT101"] == [where]


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_model_returning_logits_is_left_alone(tmp_path: Path, case: str) -> None:
    _where, files = CASES[case]
    found = project_found(project(tmp_path, {"models.py": NET.format(last="log_softmax"), **files}))
    assert [f for f in found if f[1].startswith("RGT10")] == []
