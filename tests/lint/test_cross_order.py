"""The order of an update across files: a scheduler stepped at the top of the epoch before a
function of another module (or one it calls) steps the optimizer handed to it (``RGT106``,
``_flow_order.sched_calls``/``opt_params``), and a trainer object's ``step(batch)`` that steps
the optimizer it keeps and never clears the gradients (``RGT105``)."""

from __future__ import annotations

from pathlib import Path

from tests.lint._lint import project, project_found

ENGINE = """
import torch.nn.functional as F


def train_one_epoch(model, loader, optimizer):
    for x, y in loader:
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
"""
SCHED = """
import torch


def build_scheduler(optimizer, cfg):
    return torch.optim.lr_scheduler.StepLR(optimizer, step_size=cfg["step"])
"""
LOOP_FIRST = """
    scheduler.step()
    train_one_epoch(model, loader, optimizer)
"""
LOOP_AFTER = """
    train_one_epoch(model, loader, optimizer)
    scheduler.step()
"""
TRAIN = """
import torch
import torch.nn as nn

from engine import train_one_epoch
from sched import build_scheduler

model = nn.Linear(8, 3)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
scheduler = build_scheduler(optimizer, {{"step": 3}})
for epoch in range(10):{loop}"""


def _order(root: Path, loop: str) -> list[tuple[str, str, int]]:
    files = {"engine.py": ENGINE, "sched.py": SCHED, "train.py": TRAIN.format(loop=loop)}
    return [f for f in project_found(project(root, files)) if f[1] == "RGT106"]


def test_a_scheduler_stepped_before_a_function_elsewhere_steps_the_optimizer(
    tmp_path: Path,
) -> None:
    assert _order(tmp_path, LOOP_FIRST) == [("train.py", "RGT106", 11)]


def test_a_scheduler_stepped_after_the_epoch_is_fine(tmp_path: Path) -> None:
    assert _order(tmp_path, LOOP_AFTER) == []


TRAINER = """
import torch.nn.functional as F


class Trainer:
    def __init__(self, model, optimizer):
        self.model = model
        self.optimizer = optimizer

    def step(self, batch):
        x, y = batch{clear}
        loss = F.cross_entropy(self.model(x), y)
        loss.backward()
        self.optimizer.step()
"""
DRIVER = """
import torch
import torch.nn as nn

from trainer import Trainer

model = nn.Linear(8, 3)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
trainer = Trainer(model, optimizer)
for epoch in range(10):
    for batch in loader:
        trainer.step(batch)
"""


def _cleared(root: Path, clear: str) -> list[tuple[str, str, int]]:
    files = {"trainer.py": TRAINER.format(clear=clear), "train.py": DRIVER}
    return [f for f in project_found(project(root, files)) if f[1] == "RGT105"]


def test_a_trainer_step_method_that_never_clears_is_found(tmp_path: Path) -> None:
    assert _cleared(tmp_path, "") == [("trainer.py", "RGT105", 13)]


def test_a_trainer_step_method_that_clears_is_fine(tmp_path: Path) -> None:
    assert _cleared(tmp_path, "\n        self.optimizer.zero_grad()") == []


ADJUST = """
def adjust_lr(scheduler, epoch):
    if epoch > 0:
        scheduler.step()
"""
LOOP_ADJUST_FIRST = """
    adjust_lr(scheduler, epoch)
    train_one_epoch(model, loader, optimizer)
"""
LOOP_ADJUST_AFTER = """
    train_one_epoch(model, loader, optimizer)
    adjust_lr(scheduler, epoch)
"""


def _adjusted(root: Path, loop: str) -> list[tuple[str, str, int]]:
    train = TRAIN.format(loop=loop).replace(
        "from sched import", "from lr import adjust_lr\nfrom sched import"
    )
    files = {"engine.py": ENGINE, "sched.py": SCHED, "lr.py": ADJUST, "train.py": train}
    return [f for f in project_found(project(root, files)) if f[1] == "RGT106"]


def test_a_scheduler_handed_to_a_function_that_steps_it_first_is_found(tmp_path: Path) -> None:
    assert _adjusted(tmp_path, LOOP_ADJUST_FIRST) == [("train.py", "RGT106", 12)]


def test_a_scheduler_handed_on_after_the_epoch_is_fine(tmp_path: Path) -> None:
    assert _adjusted(tmp_path, LOOP_ADJUST_AFTER) == []


STEPPED_FIRST = """
import torch


def train(epoch, loader, model, criterion, optimizer, scheduler):
{first}    model.train()
    for images, target in loader:
        loss = criterion(model(images), target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
{last}

def main(model, loader, criterion, epochs):
    optimizer = torch.optim.Adam(model.parameters())
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda e: 1.0 - e / epochs)
    for epoch in range(epochs):
        train(epoch, loader, model, criterion, optimizer, scheduler)
"""


def test_a_function_stepping_the_scheduler_before_its_batch_loop(tmp_path: Path) -> None:
    code = STEPPED_FIRST.format(first="    scheduler.step()\n", last="")
    assert project_found(project(tmp_path, {"train.py": code})) == [("train.py", "RGT106", 5)]


def test_the_scheduler_stepped_after_the_batch_loop_is_clean(tmp_path: Path) -> None:
    code = STEPPED_FIRST.format(first="", last="    scheduler.step()\n")
    assert project_found(project(tmp_path, {"train.py": code})) == []
    guarded = STEPPED_FIRST.format(first="    if epoch > 0:\n        scheduler.step()\n", last="")
    assert project_found(project(tmp_path / "b", {"train.py": guarded})) == []


OWN_SCHEDULE = """
from torch.optim import Optimizer


class StepwiseLR:
    def __init__(self, optimizer: Optimizer, init_lr=0.01, gamma=0.001, decay_rate=0.75):
        self.optimizer, self.init_lr = optimizer, init_lr
        self.gamma, self.decay_rate, self.iter_num = gamma, decay_rate, 0

    def step(self):
        lr = self.init_lr * (1 + self.gamma * self.iter_num) ** (-self.decay_rate)
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        self.iter_num += 1
"""
STEPPED_EACH_ITERATION = """
import torch

from tools.lr_scheduler import StepwiseLR


def train(loader, model, criterion, optimizer, lr_scheduler):
    for x, y in loader:
        lr_scheduler.step()
        loss = criterion(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


def main(model, loader, criterion):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    lr_scheduler = {made}
    train(loader, model, criterion, optimizer, lr_scheduler)
"""


def test_a_schedule_of_the_project_with_its_own_step_order_is_not_flagged(tmp_path: Path) -> None:
    code = STEPPED_EACH_ITERATION.format(made="StepwiseLR(optimizer, init_lr=0.01)")
    files = {"tools/__init__.py": "", "tools/lr_scheduler.py": OWN_SCHEDULE, "train.py": code}
    assert project_found(project(tmp_path, files)) == []


def test_a_torch_schedule_stepped_first_still_is(tmp_path: Path) -> None:
    made = "torch.optim.lr_scheduler.StepLR(optimizer, 10)"
    code = STEPPED_EACH_ITERATION.format(made=made)
    files = {"tools/__init__.py": "", "tools/lr_scheduler.py": OWN_SCHEDULE, "train.py": code}
    assert project_found(project(tmp_path, files)) == [("train.py", "RGT106", 8)]
