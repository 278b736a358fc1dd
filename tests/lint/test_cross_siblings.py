"""A prediction method that forgets the mode its sibling sets (``RGT201``, ``_mode_siblings``):
a scorer's ``measure`` puts the network it keeps in eval mode before its loop, its
``predict_all`` runs the same network over batches (through a helper it hands it to) and never
does. Switching there, or a caller switching before it, is no finding."""

from __future__ import annotations

from pathlib import Path

from tests.lint._lint import project, project_found

SCORER = """
import torch


class Scorer:
    def __init__(self, net):
        self.net = net

    def measure(self, loader):
        self.net.eval()
        hits = 0
        with torch.no_grad():
            for x, y in loader:
                hits += int((self.net(x).argmax(1) == y).sum())
        self.net.train()
        return hits

    def predict_all(self, loader):{switch}
        outs = []
        with torch.no_grad():
            for x in loader:
                outs.append(self._one(self.net, x))
        return outs

    def _one(self, net, x):
        return net(x).argmax(1)
"""
APP = """
import torch.nn as nn

from scorer import Scorer

net = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.Linear(8, 2))
print(Scorer(net).predict_all([]))
"""


def _found(root: Path, switch: str = "") -> list[tuple[str, str, int]]:
    files = {"scorer.py": SCORER.format(switch=switch), "app.py": APP}
    return [f for f in project_found(project(root, files)) if f[1] == "RGT201"]


def test_a_prediction_loop_without_the_eval_its_sibling_makes(tmp_path: Path) -> None:
    assert _found(tmp_path) == [("scorer.py", "RGT201", 17)]


def test_switching_in_the_prediction_method_is_fine(tmp_path: Path) -> None:
    assert _found(tmp_path, "\n        self.net.eval()") == []
