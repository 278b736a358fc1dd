"""A model a class keeps on ``self`` from its constructor (``_flow_kept``): the loss a method
applies to ``self.model(x)`` is applied to the model the caller built in another module."""

from __future__ import annotations

from pathlib import Path

from tests.lint._lint import project, project_found

NET = """
    import torch.nn as nn


    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(8, 3)
            self.act = nn.{last}()

        def forward(self, x):
            return self.act(self.fc(x))
"""
TRAINER = """
    import torch
    import torch.nn as nn


    class Trainer:
        def __init__(self, model, lr=0.1):
            self.model = model.to("cuda")
            self.criterion = nn.BCEWithLogitsLoss()
            self.optimizer = torch.optim.SGD(model.parameters(), lr=lr)

        def fit(self, loader):
            for x, y in loader:
                self.optimizer.zero_grad()
                out = self.model(x)
                loss = self.criterion(out, y)
                loss.backward()
                self.optimizer.step()
"""
TRAIN = """
    import torch
    from models.net import Net
    from engine.trainer import Trainer

    model = Net()
    model.train()
    trainer = Trainer({given}, lr=0.01)
    trainer.fit(loader)
"""


def _found(root: Path, last: str = "Sigmoid", given: str = "model") -> list[tuple[str, str, int]]:
    files = {
        "setup.py": "from setuptools import setup\n",
        "models/net.py": NET.format(last=last),
        "engine/trainer.py": TRAINER,
        "train.py": TRAIN.format(given=given),
    }
    return project_found(project(root, files))


def test_a_model_handed_to_a_trainer_constructor_is_followed_to_its_loss(tmp_path: Path) -> None:
    assert ("engine/trainer.py", "RGT103", 15) in _found(tmp_path)


def test_a_model_handed_by_keyword_is_followed_too(tmp_path: Path) -> None:
    assert ("engine/trainer.py", "RGT103", 15) in _found(tmp_path, given="model=model")


def test_a_model_that_returns_logits_is_left_alone(tmp_path: Path) -> None:
    assert [f for f in _found(tmp_path, last="ReLU") if f[1].startswith("RGT10")] == []
