"""RGT202: a ``.train()`` restores the mode only for the backward passes it can run before.
One in the other arm of an ``if`` than the training it should precede (a fit that trains on
tensors or on a DataLoader) leaves that path training in eval mode after its evaluation."""

from __future__ import annotations

from pathlib import Path

from tests.lint._lint import project
from tests.lint._lint import project_found as found

FIT = """
import torch


class Trainer:
    def __init__(self, model, optim, loss):
        self.model, self.optim, self.loss = model, optim, loss

    def fit(self, batches=None, loader=None, test_loader=None, epochs=10):
        for e in range(epochs):
            if loader is None:
                self.model.train()
                for x, y in batches:
                    self.optim.zero_grad()
                    self.loss(self.model(x), y).backward()
                    self.optim.step()
            else:
{restore}                for x, y in loader:
                    self.optim.zero_grad()
                    self.loss(self.model(x), y).backward()
                    self.optim.step()
            if e % 2 == 0:
                with torch.no_grad():
                    self.model.eval()
                    for x, y in test_loader:
                        print(self.loss(self.model(x), y).item())
"""


def test_a_train_call_on_the_other_path_only_leaves_this_one_in_eval(tmp_path: Path) -> None:
    code = FIT.format(restore="")
    assert found(project(tmp_path, {"trainer.py": code})) == [("trainer.py", "RGT202", 23)]


def test_a_train_call_on_each_path_restores_the_mode(tmp_path: Path) -> None:
    code = FIT.format(restore="                self.model.train()\n")
    assert found(project(tmp_path, {"trainer.py": code})) == []


FACTORY = """
import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(8, 8), nn.Dropout(0.1), nn.Linear(8, 2))

    def forward(self, x):
        return self.body(x)


def _set_state(model, weights=None):
    if weights:
        model.load_state_dict(torch.load(weights))
    model = model.to("cpu")
    {last}
    return model


def get_model(weights=None):
    model = Net()
    model = _set_state(model, weights)
    return model
"""
FITTED = """
import torch
from lightning import Trainer

from model import get_model
from module import LitModel


def main(loader):
    model = get_model()
    lit = LitModel(model=model)
    Trainer(max_epochs=3).fit(lit, loader)
"""


def test_a_model_a_factory_returns_in_eval_mode_then_fitted(tmp_path: Path) -> None:
    files = {"model.py": FACTORY.format(last="model = model.eval()"), "train.py": FITTED}
    assert found(project(tmp_path, files)) == [("train.py", "RGT202", 9)]


def test_a_factory_leaving_the_mode_alone_is_clean(tmp_path: Path) -> None:
    files = {"model.py": FACTORY.format(last="pass"), "train.py": FITTED}
    assert found(project(tmp_path, files)) == []
    trained = FITTED.replace("    lit = ", "    model.train()\n    lit = ")
    files = {"model.py": FACTORY.format(last="model = model.eval()"), "train.py": trained}
    assert found(project(tmp_path / "b", files)) == []


HELPER = """
import torch
import torch.nn as nn


def set_mode(mode, models):
    for m in models:
        if mode == "train":
            m.train()
        if mode == "eval":
            m.eval()


def check_accuracy(model, loader):
    set_mode("eval", [model])
    correct = 0
    with torch.no_grad():
        for x, y in loader:
            correct += (model(x).argmax(1) == y).sum().item()
    set_mode("{back}", [model])
    return correct


def train_loop(model, loader, val_loader, steps):
    opt = torch.optim.Adam(model.parameters())
    loss_fn = nn.CrossEntropyLoss()
    set_mode("train", [model])
    for t, (x, y) in enumerate(loader):
        opt.zero_grad()
        loss_fn(model(x), y).backward()
        opt.step()
        if t % 100 == 0:
            check_accuracy(model, val_loader)
"""


def test_a_mode_helper_told_eval_on_the_way_out(tmp_path: Path) -> None:
    code = HELPER.format(back="eval")
    assert found(project(tmp_path, {"train.py": code})) == [("train.py", "RGT202", 14)]


def test_a_mode_helper_told_train_on_the_way_out_is_clean(tmp_path: Path) -> None:
    code = HELPER.format(back="train")
    assert found(project(tmp_path, {"train.py": code})) == []
