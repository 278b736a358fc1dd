"""RGT203 on an evaluation whose ``no_grad`` block holds only the move of the batch to the
device while the model runs after it: every batch still builds a graph. Clean once the
model call is inside the block."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.lint._lint import project
from tests.lint._lint import project_found as found

VALIDATION = """
import torch


class Learner:
    def __init__(self, model):
        self.model = model

    def validation(self, loader):
        self.model.eval()
        correct = 0
        for x, y in loader:
            with torch.no_grad():
                x = x.cuda()
                y = y.cuda()
{indent}out = self.model.forward(x)
{indent}correct += (out.argmax(1) == y).sum().item()
        self.model.train()
        return correct
"""


def test_a_no_grad_block_that_leaves_the_model_call_out(tmp_path: Path) -> None:
    code = VALIDATION.format(indent="            ")
    assert found(project(tmp_path, {"learner.py": code})) == [("learner.py", "RGT203", 8)]


def test_the_model_call_inside_the_no_grad_block_is_clean(tmp_path: Path) -> None:
    code = VALIDATION.format(indent="                ")
    assert found(project(tmp_path, {"learner.py": code})) == []


SHARED = """
import torch


def train_and_valid(model, optimizer, loader, loss_fn, is_train):
    model.train() if is_train else model.eval()
    total = 0.0
    for x, y in loader:
        out = model(x)
        if is_train:
            loss = loss_fn(out, y)
            optimizer.zero_grad()
        else:
            with torch.no_grad():
                loss = loss_fn(out, y)
        if is_train:
            loss.backward()
            optimizer.step()
        total += loss.item()
    return total
"""


def test_a_shared_loop_whose_validation_no_grad_comes_after_the_forward(tmp_path: Path) -> None:
    assert found(project(tmp_path, {"loop.py": SHARED})) == [("loop.py", "RGT203", 13)]


METRIC = """
import torch


def train(model, optimizer, loader, loss_fn):
    for i, (x, y) in enumerate(loader):
        out = model(x)
        loss = loss_fn(out, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if i % 100 == 0:
            with torch.no_grad():
                print((out.argmax(1) == y).float().mean().item())
"""


def test_a_metric_of_the_training_forward_under_no_grad_is_clean(tmp_path: Path) -> None:
    assert found(project(tmp_path, {"train.py": METRIC})) == []


TIMED = """
import time

import torch


def evaluate(mod, inp):
{body}


def timed(fn):
    start = time.perf_counter()
    result = fn()
    return result, time.perf_counter() - start


def compare(model, make_input, runs=10):
    times = []
    for _ in range(runs):
        inp = make_input()
        _, elapsed = timed(lambda: evaluate(model, inp))
        times.append(elapsed)
    return times
"""


def test_an_evaluation_without_a_loop_called_over_and_over(tmp_path: Path) -> None:
    code = TIMED.format(body="    return mod(inp)")
    assert found(project(tmp_path, {"bench.py": code})) == [("bench.py", "RGT203", 6)]


def test_an_evaluation_under_no_grad_called_over_and_over_is_clean(tmp_path: Path) -> None:
    code = TIMED.format(body="    with torch.no_grad():\n        return mod(inp)")
    ast.parse(code)  # the clean variant is code the rules read
    assert found(project(tmp_path, {"bench.py": code})) == []
