"""RGT106 in a function with no loop that steps a learning-rate scheduler before the optimizer
(a class keeping both and stepping them with one call): its first call already skips the
schedule's first value (``_update_order._stepped_first``)."""

from __future__ import annotations

from pathlib import Path

from tests.lint._lint import found

PAIR = """
import torch


class Stepper:
    def __init__(self, optimizer, scheduler):
        self.optimizer = optimizer
        self.scheduler = scheduler

    def step(self):
{body}


def make(model):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    sched = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda n: min(1.0, n / 100))
    return Stepper(optimizer, sched)
"""
FIRST = "        self.scheduler.step()\n        self.optimizer.step()"
AFTER = "        self.optimizer.step()\n        self.scheduler.step()"
GUARDED = (
    "        if self.optimizer.param_groups:\n            self.scheduler.step()\n"
    "        else:\n            self.optimizer.step()"
)


def _order(tmp_path: Path, body: str) -> list[tuple[str, int]]:
    return [f for f in found(tmp_path, PAIR.format(body=body)) if f[0] == "RGT106"]


def test_a_wrapper_that_steps_the_scheduler_first(tmp_path: Path) -> None:
    assert _order(tmp_path, FIRST) == [("RGT106", 10)]


def test_a_wrapper_that_steps_the_optimizer_first(tmp_path: Path) -> None:
    assert _order(tmp_path, AFTER) == []


def test_a_scheduler_step_in_a_branch_the_optimizer_is_not_in(tmp_path: Path) -> None:
    assert _order(tmp_path, GUARDED) == []
