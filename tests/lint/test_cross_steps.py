"""RGT204 where the backward pass is not in the loop that keeps the loss: a step method (in the
same class or another module) back-propagates and returns the loss or its terms, and the loop
adds what it returned to running totals; a loss stored under each step's number; a Lightning
``training_step`` appending the loss it returns to a list on ``self``. Each is clean once a
number (``.item()``) or a detached copy is kept."""

from __future__ import annotations

from pathlib import Path

from tests.lint._lint import project
from tests.lint._lint import project_found as found

TRAINER = """
import torch
import torch.nn.functional as F


class Trainer:
    def __init__(self, net, optimizer):
        self.net = net
        self.optimizer = optimizer

    def forward_losses(self, x, y):
        out = self.net(x)
        return F.l1_loss(out, y), F.mse_loss(out, y)

    def train_step(self, x, y):
        self.optimizer.zero_grad()
        first, second = self.forward_losses(x, y)
        total = first + second
        total.backward()
        self.optimizer.step()
        return first, second, total{cut}
"""
TRAIN = """
import torch

from trainer import Trainer


def fit_one_epoch(trainer, loader):
    total_loss = 0
    for x, y in loader:
        losses = trainer.train_step(x, y)
        first, second, total = losses
        total_loss += total
    return total_loss.item()
"""


def test_a_total_of_what_a_step_in_another_module_returns(tmp_path: Path) -> None:
    files = {"trainer.py": TRAINER.format(cut=""), "train.py": TRAIN}
    assert found(project(tmp_path, files)) == [("train.py", "RGT204", 11)]


def test_a_step_returning_numbers_is_clean(tmp_path: Path) -> None:
    files = {"trainer.py": TRAINER.format(cut=".item()"), "train.py": TRAIN}
    assert found(project(tmp_path, files)) == []


SAME_CLASS = """
from collections import defaultdict

import torch


class Solver:
    def __init__(self, model, loss_fn, optimizer):
        self.model, self.loss_fn, self.optimizer = model, loss_fn, optimizer

    def one_batch(self, images, targets):
        self.optimizer.zero_grad()
        loss, loss_parts = self.loss_fn(self.model(images), targets)
        loss.backward()
        self.optimizer.step()
        return loss_parts

    def one_epoch(self, loader):
        totals = defaultdict(lambda: torch.tensor(0.0))
        for n, images, targets in loader:
            parts = self.one_batch(images, targets)
            for name, value in parts.items():
                totals[name] += {kept} * n
        return totals
"""


def test_a_total_of_the_terms_a_method_of_the_class_returns(tmp_path: Path) -> None:
    code = SAME_CLASS.format(kept="value")
    assert found(project(tmp_path, {"solver.py": code})) == [("solver.py", "RGT204", 22)]
    clean = SAME_CLASS.format(kept="value.item()")
    assert found(project(tmp_path / "b", {"solver.py": clean})) == []


STORED = """
import torch


def run(model, loader, optimizer, epochs):
    history = []
    step = 1
    for epoch in range(epochs):
        per_step = {{}}
        for batch in loader:
            loss = model(**batch).loss
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            per_step[{key}] = loss{cut}
            step += 1
        history += [float(v) for v in per_step.values()]
    return history
"""


def test_a_loss_stored_under_each_steps_number(tmp_path: Path) -> None:
    code = STORED.format(key="step", cut="")
    assert found(project(tmp_path, {"run.py": code})) == [("run.py", "RGT204", 14)]


def test_a_fixed_key_or_a_number_stored_is_clean(tmp_path: Path) -> None:
    fixed = STORED.format(key='"last"', cut="")
    assert found(project(tmp_path / "a", {"run.py": fixed})) == []
    number = STORED.format(key="step", cut=".item()")
    assert found(project(tmp_path / "b", {"run.py": number})) == []


LIGHTNING = """
import lightning.pytorch as pl


class Model(pl.LightningModule):
    def __init__(self, net, loss):
        super().__init__()
        self.net, self.loss = net, loss
        self.outputs = []

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = self.loss(self.net(x), y)
        log = {{"loss": loss, "n": x.size(0)}}
        self.outputs.append({kept})
        return log
"""


def test_a_training_step_keeping_the_loss_it_returns(tmp_path: Path) -> None:
    code = LIGHTNING.format(kept="log")
    assert found(project(tmp_path, {"model.py": code})) == [("model.py", "RGT204", 14)]
    clean = LIGHTNING.format(kept="{k: v.detach() for k, v in log.items()}")
    assert found(project(tmp_path / "b", {"model.py": clean})) == []


HISTORY = """
import torch


def optimize(params, loss_function, steps):
    optimizer = torch.optim.Adam(params)
    losses = []
    for i in range(steps):
        optimizer.zero_grad()
        losses.append(sum(loss_function(*params)){cut})
        if len(losses) > 2 and abs(losses[-1] - losses[-2]) < 1e-6:
            break
        losses[-1].backward()
        optimizer.step()
    return losses
"""


def test_a_history_whose_last_entry_is_back_propagated(tmp_path: Path) -> None:
    code = HISTORY.format(cut="")
    assert found(project(tmp_path, {"opt.py": code})) == [("opt.py", "RGT204", 9)]


FIXED_HISTORY = """
import torch


def optimize(params, loss_function, steps):
    optimizer = torch.optim.Adam(params)
    losses = []
    for i in range(steps):
        optimizer.zero_grad()
        total = sum(loss_function(*params))
        total.backward()
        optimizer.step()
        losses.append(total.detach())
        if len(losses) > 2 and abs(losses[-1] - losses[-2]) < 1e-6:
            break
    return losses
"""


def test_a_history_of_detached_totals_is_clean(tmp_path: Path) -> None:
    assert found(project(tmp_path, {"opt.py": FIXED_HISTORY})) == []
    kept = FIXED_HISTORY.replace("total.detach()", "total")
    assert found(project(tmp_path / "b", {"opt.py": kept})) == [("opt.py", "RGT204", 12)]


LINE_SEARCH = """
import torch


class LineSearch(torch.optim.Optimizer):
    def directional_evaluate(self, closure, params, t, directions):
        for i in range(len(params)):
            params[i].data.add_(directions[i], alpha=t)
        return closure()
"""


def test_an_optimizer_calling_its_closure_is_no_evaluation(tmp_path: Path) -> None:
    assert found(project(tmp_path, {"line_search.py": LINE_SEARCH})) == []


TASK = """
import torch.nn.functional as F


def train_step(model, optimizer, x, y):
    optimizer.zero_grad()
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
    return loss, x.size(0), {"n": 1}
"""
RUNNER = """
import torch

from task import train_step

model = torch.nn.Linear(8, 3)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
total, seen = 0, 0
for x, y in loader:
    loss, size, log = train_step(model, optimizer, x, y)
    {kept}
"""


def test_only_the_returned_part_that_holds_the_loss_is_a_kept_loss(tmp_path: Path) -> None:
    # fairseq's Trainer: ``loss, sample_size, logging_output = task.train_step(...)``, and
    # ``sample_size`` summed: the size is no loss.
    files = {"task.py": TASK, "run.py": RUNNER.format(kept="seen += size")}
    assert found(project(tmp_path, files)) == []
    files = {"task.py": TASK, "run.py": RUNNER.format(kept="total += loss")}
    assert found(project(tmp_path / "b", files)) == [("run.py", "RGT204", 10)]


STATE = """
import torch

LOSS, PRED = "loss", "pred"


def fit(model, criterion, optimizer, loader):
    state = {{}}
    for x, y in loader:
        optimizer.zero_grad()
        state[PRED] = model(x)
        state[{key}] = criterion(state[PRED], y)
        state[LOSS].backward()
        optimizer.step()
"""


def test_a_dict_under_fixed_keys_is_overwritten_not_kept(tmp_path: Path) -> None:
    # torchbearer's ``state[torchbearer.LOSS].backward()``: each step overwrites the entry.
    assert found(project(tmp_path, {"fit.py": STATE.format(key="LOSS")})) == []


def test_a_loop_that_unpacks_into_the_dict_still_overwrites_it(tmp_path: Path) -> None:
    # torchbearer's ``for state[X], state[Y_TRUE] in self.generator``: ``state`` is no counter.
    code = (
        STATE.format(key="keys.LOSS")
        .replace('LOSS, PRED = "loss", "pred"', "import keys")
        .replace("for x, y in loader:", "for state[keys.X], state[keys.Y] in loader:")
        .replace("[PRED]", "[keys.PRED]")
        .replace("state[LOSS]", "state[keys.LOSS]")
    )
    assert found(project(tmp_path, {"fit.py": code})) == []
