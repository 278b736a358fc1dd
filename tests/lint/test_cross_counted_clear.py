"""RGT105 on gradient accumulation that counts only its clear: ``zero_grad`` under ``if i % n
== 0`` while the optimizer steps on every batch, in the same loop or in a method the batch
method calls (``_counted_clear``); a step counted like its clear stays clean."""

from __future__ import annotations

from pathlib import Path

from tests.lint._lint import found

LOOP = """
import torch
import torch.nn.functional as F


def fit(model, loader, every=4):
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for i, (x, y) in enumerate(loader):
        if i % every == 0:
            opt.zero_grad()
        F.mse_loss(model(x), y).backward()
{step}
"""
EVERY = "        opt.step()"
COUNTED = "        if (i + 1) % every == 0:\n            opt.step()"

TRAINER = """
import torch
import torch.nn.functional as F


class Runner:
    def __init__(self, model, accumulate):
        self.model = model
        self.accumulate = accumulate
        self.opt = torch.optim.Adam(model.parameters())

    def batch(self, n, x, y):
        if self.accumulate > 1:
            if n % self.accumulate == 0:
                self.opt.zero_grad()
        else:
            self.opt.zero_grad()
        return self.update(x, y)

    def update(self, x, y):
        loss = F.l1_loss(self.model(x), y)
        loss.backward()
{step}
        return loss.item()

    def epoch(self, loader):
        for n, (x, y) in enumerate(loader):
            self.batch(n, x, y)
"""
METHOD_EVERY = "        self.opt.step()"
METHOD_COUNTED = "        if self.calls % self.accumulate == 0:\n            self.opt.step()"


def _clears(tmp_path: Path, source: str) -> list[tuple[str, int]]:
    return [f for f in found(tmp_path, source) if f[0] == "RGT105"]


def test_a_counted_clear_with_a_step_on_every_batch(tmp_path: Path) -> None:
    assert _clears(tmp_path, LOOP.format(step=EVERY)) == [("RGT105", 9)]


def test_a_step_counted_like_its_clear_is_accumulation(tmp_path: Path) -> None:
    assert _clears(tmp_path, LOOP.format(step=COUNTED)) == []


def test_a_counted_clear_then_a_method_that_steps_every_call(tmp_path: Path) -> None:
    assert _clears(tmp_path, TRAINER.format(step=METHOD_EVERY)) == [("RGT105", 14)]


def test_a_method_whose_step_is_counted_too(tmp_path: Path) -> None:
    assert _clears(tmp_path, TRAINER.format(step=METHOD_COUNTED)) == []
