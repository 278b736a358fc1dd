"""A loss object built by a method of the module that returns it (``_loss_kinds._built_kind``):
``self.criterion = self._build_criterion(name)`` is the loss its returns name, so a model of
another module whose ``forward`` ends in sigmoid, trained with it, is found."""

from __future__ import annotations

from pathlib import Path

from tests.lint._lint import project, project_found

MODEL = """
    import torch.nn as nn


    class Scorer(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(8, 1)
            self.out_act = nn.{last}()

        def forward(self, x):
            return self.out_act(self.fc(x))
"""
TRAINER = """
    import torch
    import torch.nn as nn

    from models import Scorer


    class Trainer:
        def __init__(self, config):
            self.model = Scorer()
            self.criterion = self._build_criterion(config["loss"])
            self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.1)

        def _build_criterion(self, name):
            if name == "bce":
                return nn.BCEWithLogitsLoss()
            return nn.{other}()

        def fit(self, loader):
            for x, y in loader:
                self.optimizer.zero_grad()
                loss = self.criterion(self.model(x), y)
                loss.backward()
                self.optimizer.step()
"""


def _found(root: Path, last: str = "Sigmoid", other: str = "MSELoss") -> list[tuple[str, str, int]]:
    files = {"setup.py": "", "models.py": MODEL.format(last=last),
             "trainer.py": TRAINER.format(other=other)}  # fmt: skip
    return project_found(project(root, files))


def test_a_loss_built_by_a_method_is_known_by_what_it_returns(tmp_path: Path) -> None:
    assert ("trainer.py", "RGT103", 21) in _found(tmp_path)


def test_a_model_ending_without_sigmoid_is_left_alone(tmp_path: Path) -> None:
    assert [f for f in _found(tmp_path, last="ReLU") if f[1] == "RGT103"] == []


def test_a_builder_returning_losses_of_two_kinds_says_neither(tmp_path: Path) -> None:
    found = _found(tmp_path, other="CrossEntropyLoss")
    assert [f for f in found if f[1] in ("RGT101", "RGT103")] == []


BASE = """
    import torch.nn as nn


    class BaseTrainer:
        def _build_criterion(self, name):
            if name == "bce":
                return nn.BCEWithLogitsLoss()
            return nn.MSELoss()
"""
CHILD = """
    import torch

    from base import BaseTrainer
    from models import Scorer


    class Trainer(BaseTrainer):
        def __init__(self, config):
            self.model = Scorer()
            self.criterion = self._build_criterion(config["loss"])
            self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.1)

        def fit(self, loader):
            for x, y in loader:
                self.optimizer.zero_grad()
                loss = self.criterion(self.model(x), y)
                loss.backward()
                self.optimizer.step()
"""
FUNCTION = """
    import torch

    from losses import build_loss
    from models import Scorer

    model = Scorer()
    criterion = build_loss("bce")
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in loader:
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
"""
BUILDER = """
    import torch.nn as nn


    def build_loss(name):
        return nn.BCEWithLogitsLoss() if name == "bce" else None
"""


def test_a_loss_built_by_a_base_class_of_another_module(tmp_path: Path) -> None:
    files = {"setup.py": "", "models.py": MODEL.format(last="Sigmoid"), "base.py": BASE,
             "trainer.py": CHILD}  # fmt: skip
    found = project_found(project(tmp_path, files))
    assert ("trainer.py", "RGT103", 16) in found


def test_a_loss_built_by_a_function_of_another_module(tmp_path: Path) -> None:
    files = {"setup.py": "", "models.py": MODEL.format(last="Sigmoid"), "losses.py": BUILDER,
             "train.py": FUNCTION}  # fmt: skip
    found = project_found(project(tmp_path, files))
    assert ("train.py", "RGT103", 11) in found
    clean = {**files, "models.py": MODEL.format(last="ReLU")}
    assert [f for f in project_found(project(tmp_path / "clean", clean)) if f[1] == "RGT103"] == []
