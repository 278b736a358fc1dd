"""A switch back that repeats the switch (``RGT202``, ``_mode_restore``): a learner's
``score`` puts its network in eval mode for the batches and calls ``.eval()`` again where
training mode should come back; its ``check`` method restores with ``.train()``, so the
author means to switch back. With ``.train()`` at the end no finding. And a one-way switch: a
wrapper that trains its network and offers only a method putting it in eval mode."""

from __future__ import annotations

from pathlib import Path

from tests.lint._lint import project, project_found

LEARNER = """
import torch


class Learner:
    def __init__(self, net, opt):
        self.net = net
        self.opt = opt

    def update(self, loader):
        for x, y in loader:
            self.opt.zero_grad()
            torch.nn.functional.mse_loss(self.net(x), y).backward()
            self.opt.step()

    def check(self, loader):
        self.net.eval()
        with torch.no_grad():
            total = sum(float(self.net(x).sum()) for x, _ in loader)
        self.net.train()
        return total

    def score(self, loader):
        self.net.eval()
        outs = []
        with torch.no_grad():
            for (x,) in loader:
                outs.append(self.net(x))
        self.net.{back}()
        return torch.cat(outs)
"""
MAIN = """
import torch.nn as nn

from learner import Learner

net = nn.Sequential(nn.Linear(4, 8), nn.Dropout(0.2), nn.Linear(8, 1))
"""


def _found(root: Path, back: str) -> list[tuple[str, str, int]]:
    files = {"learner.py": LEARNER.format(back=back), "main.py": MAIN}
    return [f for f in project_found(project(root, files)) if f[1] == "RGT202"]


def test_a_second_eval_where_the_mode_should_come_back(tmp_path: Path) -> None:
    assert _found(tmp_path, "eval") == [("learner.py", "RGT202", 28)]


def test_a_train_call_there_restores_the_mode(tmp_path: Path) -> None:
    assert _found(tmp_path, "train") == []


WRAPPER = """
import torch


class Wrapped:
    def __init__(self, net, opt):
        self.net = net
        self.opt = opt

    def evaluating(self):
        self.net.eval(){back}

    def fit_batch(self, x, y):
        self.opt.zero_grad()
        torch.nn.functional.mse_loss(self.net(x), y).backward()
        self.opt.step()
"""
DRIVER = """
import torch.nn as nn

from wrapped import Wrapped

net = nn.Sequential(nn.Linear(4, 8), nn.Dropout(0.3), nn.Linear(8, 1))
"""


def _one_way(root: Path, back: str) -> list[tuple[str, str, int]]:
    files = {"wrapped.py": WRAPPER.format(back=back), "driver.py": DRIVER}
    return [f for f in project_found(project(root, files)) if f[1] == "RGT202"]


def test_a_wrapper_that_only_switches_to_eval_while_it_trains(tmp_path: Path) -> None:
    assert _one_way(tmp_path, "") == [("wrapped.py", "RGT202", 10)]


def test_a_wrapper_with_a_way_back_to_training(tmp_path: Path) -> None:
    back = "\n\n    def training(self):\n        self.net.train()"
    assert _one_way(tmp_path, back) == []
