"""A model whose ``forward`` returns a tuple, one part the output of a submodule it holds whose
``forward`` ends in a sigmoid (``losses._held_output``), handed (wrapped in ``DataParallel``,
then moved) to a training function of another file that applies ``BCEWithLogitsLoss`` to that
part of the tuple (``loss_params`` with the part, ``_join_losses._gives``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.lint._lint import project, project_found

NETS = """
import torch
import torch.nn as nn


class Presence(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 4)

    def forward(self, feats):
        score = self.fc(feats.flatten(1))
        score = {last}
        return score


class TwoHeads(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(8, 8)
        self.presence = Presence()

    def forward(self, x):
        feats = self.body(x)
        return feats, self.presence(feats)
"""
TRAIN = """
import torch
import torch.nn as nn

import nets


def run(loader):
    net = nets.TwoHeads()
    net = nn.DataParallel(net).cuda()
    bce = nn.BCEWithLogitsLoss()
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    fit(loader, net, bce, opt)


def fit(loader, net, bce, opt):
    for x, y in loader:
        feats, present = net(x)
        loss = bce({used}, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
"""


@pytest.mark.parametrize(
    ("last", "used", "expected"),
    [
        ("torch.sigmoid(score)", "present", [("train.py", "RGT103", 18)]),
        ("score * 2", "present", []),
        ("torch.sigmoid(score)", "feats", []),
    ],
)
def test_a_held_head_ending_in_sigmoid_is_one_part_of_the_output(
    tmp_path: Path, last: str, used: str, expected: list[tuple[str, str, int]]
) -> None:
    files = {"nets.py": NETS.replace("{last}", last), "train.py": TRAIN.replace("{used}", used)}
    found = project_found(project(tmp_path, files))
    assert [f for f in found if f[1].startswith("RGT10")] == expected
