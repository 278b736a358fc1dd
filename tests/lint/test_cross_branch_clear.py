"""A trainer's step method called once a batch (FlagAI's ``Trainer``): it clears the gradients
after the optimizer's step only on its fp16 branch (RGT105 on the other branch's step), and it
is handed both the optimizer and the schedule, so the order of the two is its own (no RGT106 on
the call that hands them)."""

from __future__ import annotations

from pathlib import Path

from tests.lint._lint import found, project, project_found

TRAINER = """
import torch


class Trainer:
    def __init__(self, fp16=False):
        self.fp16 = fp16

    def train(self, model, optimizer, lr_scheduler, loader, ddp=False):
        for batch in loader:
            if ddp:
                self.train_step_ddp(batch, model, optimizer, lr_scheduler)
            else:
                self.train_step(batch, model, optimizer, lr_scheduler)

    def train_step(self, batch, model, optimizer, lr_scheduler):
        loss = model(batch).sum()
        loss.backward()
        if self.fp16:
            optimizer.step()
            optimizer.zero_grad()
        else:
            optimizer.step()
{clear}
        lr_scheduler.step()

    def train_step_ddp(self, batch, model, optimizer, lr_scheduler):
        loss = model(batch).sum()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        lr_scheduler.step()
"""


def test_a_step_method_that_clears_on_one_branch_only(tmp_path: Path) -> None:
    code = TRAINER.format(clear="            # optimizer.zero_grad()")
    assert found(tmp_path, code) == [("RGT105", 22)]
    clean = TRAINER.format(clear="            optimizer.zero_grad()")
    assert found(tmp_path, clean) == []


def test_a_loop_that_clears_before_the_call_leaves_the_branch_alone(tmp_path: Path) -> None:
    code = TRAINER.format(clear="").replace(
        "        for batch in loader:\n",
        "        for batch in loader:\n            optimizer.zero_grad()\n",
    )
    assert found(tmp_path, code) == []


EXAMPLE = """
import torch
from flag.trainer import Trainer

model = torch.nn.Linear(2, 2)
optimizer = torch.optim.SGD(model.parameters(), 0.1)
Trainer().train(model, optimizer, None, [])
"""


def test_a_call_handed_the_optimizer_and_the_schedule_orders_them_itself(tmp_path: Path) -> None:
    trainer = TRAINER.format(clear="            optimizer.zero_grad()")
    files = {"setup.py": "", "flag/__init__.py": "", "flag/trainer.py": trainer}
    assert project_found(project(tmp_path, {**files, "examples/train.py": EXAMPLE})) == []
