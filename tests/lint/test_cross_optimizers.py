"""RGT105 on an optimizer class of the project whose ``zero_grad`` clears nothing: an
override whose only clear follows a ``raise``, or an inner optimizer its ``step`` steps and
nothing in the class clears; clean once the override reaches the clear or forwards it."""

from __future__ import annotations

from pathlib import Path

from tests.lint._lint import project
from tests.lint._lint import project_found as found

OVERRIDE = """
import torch


class DistributedOptimizer(torch.optim.Optimizer):
    def __init__(self, params):
        super().__init__(params, {{}})
        self._handles = {{}}

    def step(self, closure=None):
        self._handles.clear()
        return super().step(closure)

    def zero_grad(self):
        if self._handles:
            raise AssertionError("zero_grad() before step()")
{indent}return super().zero_grad()
"""


def test_a_zero_grad_override_whose_clear_never_runs(tmp_path: Path) -> None:
    code = OVERRIDE.format(indent="            ")
    assert found(project(tmp_path, {"opt.py": code})) == [("opt.py", "RGT105", 13)]


def test_a_zero_grad_override_that_reaches_its_clear_is_clean(tmp_path: Path) -> None:
    code = OVERRIDE.format(indent="        ")
    assert found(project(tmp_path, {"opt.py": code})) == []


INNER = """
import torch


class Hybrid(torch.optim.Optimizer):
    def __init__(self, params, rest, lr=0.02):
        self._adam = torch.optim.AdamW(rest, lr=lr) if rest else None
        super().__init__(params, dict(lr=lr))

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    p.add_(p.grad, alpha=-group["lr"])
        if self._adam is not None:
            self._adam.step()
{forward}"""
FORWARD = """
    def zero_grad(self, set_to_none=True):
        super().zero_grad(set_to_none=set_to_none)
        if self._adam is not None:
            self._adam.zero_grad(set_to_none=set_to_none)
"""


def test_an_inner_optimizer_stepped_and_never_cleared(tmp_path: Path) -> None:
    code = INNER.format(forward="")
    assert found(project(tmp_path, {"hybrid.py": code})) == [("hybrid.py", "RGT105", 16)]


def test_an_inner_optimizer_whose_zero_grad_is_forwarded_is_clean(tmp_path: Path) -> None:
    code = INNER.format(forward=FORWARD)
    assert found(project(tmp_path, {"hybrid.py": code})) == []


SKIPPED = """
import torch


def train(model, loader, optimizer, loss_fn):
    for x, y in loader:
        loss = loss_fn(model(x), y)
        loss.backward()
        if not torch.isfinite(loss):
            optimizer.zero_grad()
{jump}        optimizer.step()
        optimizer.zero_grad()
"""


def test_a_clear_on_a_path_that_skips_the_step_is_not_before_it(tmp_path: Path) -> None:
    code = SKIPPED.format(jump="            continue\n")
    assert found(project(tmp_path / "a", {"train.py": code})) == []
    fall = SKIPPED.format(jump="            print('non-finite loss')\n")
    assert found(project(tmp_path / "b", {"train.py": fall})) == [("train.py", "RGT105", 11)]


ACCUMULATED = """
import torch


def train_step(engine, batch):
    engine.model.train()
    if {clear}:
        engine.optimizer.zero_grad()
    loss = engine.crit(engine.model(batch.x), batch.y)
    (loss / engine.config.iteration_per_update).backward()
    if engine.state.iteration % engine.config.iteration_per_update == 0:
        engine.optimizer.step()
    return loss.item()
"""
ONE = "engine.state.iteration % engine.config.iteration_per_update == 1"


def test_a_clear_at_count_one_never_runs_when_every_step_updates(tmp_path: Path) -> None:
    code = ACCUMULATED.format(clear=ONE)
    assert found(project(tmp_path, {"trainer.py": code})) == [("trainer.py", "RGT105", 7)]


def test_a_clear_that_also_runs_when_every_step_updates_is_clean(tmp_path: Path) -> None:
    code = ACCUMULATED.format(clear=f"{ONE} or engine.config.iteration_per_update == 1")
    assert found(project(tmp_path, {"trainer.py": code})) == []
