"""Throughput hints (advice only): host syncs every step, pageable memory, loading in the main
process. They never fail a run; they say where a rented GPU waits.
"""

from __future__ import annotations

import ast
from collections import deque
from collections.abc import Iterator

from rgt.lint._facts import Facts
from rgt.lint._model import Hit, Rule, Severity
from rgt.lint._nodes import constant, keyword, method
from rgt.lint._tree import children
from rgt.lint.data import in_memory, loaders, workers

A = Severity.INFO
RULES = (
    Rule(
        "RGT501",
        A,
        "host-sync-every-step",
        "`.item()`/`.cpu()` on every training step waits "
        "for the GPU to finish before the next step can be queued",
        "log every N steps (inside `if step % N == 0:`), or accumulate on the device",
        "T23",
    ),
    Rule(
        "RGT502",
        A,
        "pin-memory-off",
        "batches are copied to the GPU from pageable memory, on the critical path",
        "DataLoader(..., pin_memory=True) and .to(device, non_blocking=True)",
        "T6",
    ),
    Rule(
        "RGT503",
        A,
        "loader-in-main-process",
        "num_workers=0 loads and augments every batch in the training process while the GPU waits",
        "num_workers > 0 (about the CPU cores per GPU, within RAM)",
        "T4",
    ),
)
SYNCS = ("item", "cpu")
GPU = {"cuda", "accelerator"}  # torch.cuda / .cuda() / "cuda:0" / torch.accelerator


def may_find(text: str) -> bool:
    """False only when no rule here can fire in ``text`` (``_run.worth_parsing``)."""
    return "backward" in text or "DataLoader" in text


def check(facts: Facts, words: set[str]) -> Iterator[Hit]:
    if not words & GPU:  # a CPU-only script has no GPU to keep busy
        return
    for loop in facts.loops:
        if _inner_training_loop(facts, loop):
            sync = _unconditional_sync(facts, loop)
            if sync is not None:
                yield Hit("RGT501", sync)
    for call in loaders(facts):
        if any(kw.arg is None for kw in call.keywords) or in_memory(facts, call):
            continue  # **kwargs: not seen whole; tensors in memory: nothing to load
        if keyword(call, "pin_memory") is None or constant(keyword(call, "pin_memory")) is False:
            yield Hit("RGT502", call)
        if workers(call) == 0:
            yield Hit("RGT503", call)


def _inner_training_loop(facts: Facts, loop: ast.AST) -> bool:
    """A loop that back-propagates and holds no other loop that does (the step loop)."""
    backward = facts.loops_calling("backward")
    if id(loop) not in backward:
        return False
    return not any(id(inner) in backward for inner in facts.loops_in(loop))


def _unconditional_sync(facts: Facts, loop: ast.For | ast.While | ast.AsyncFor) -> ast.Call | None:
    """The first ``.item()``/``.cpu()`` in the loop body that is not under an ``if``."""
    if not any(method(c) in SYNCS and not c.args for c in facts.calls_in(loop)):
        return None  # none at all: the body is not walked
    pending: deque[ast.AST] = deque(loop.body)
    while pending:
        node = pending.popleft()
        if isinstance(node, ast.If | ast.FunctionDef | ast.Lambda):
            continue
        if isinstance(node, ast.Call) and method(node) in SYNCS and not node.args:
            return node
        pending.extend(children(node))
    return None
