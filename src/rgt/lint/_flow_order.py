"""The parts of a module's summary (``_cross``) about the order of an update (``RGT106``):
methods that step a learning-rate scheduler, methods that step an optimizer, and the order in
which a loop calls methods of one object.

pytorch-CycleGAN-and-pix2pix's ``train.py`` (copied into many projects) called
``model.update_learning_rate()`` at the top of every epoch, before the batch loop's
``model.optimize_parameters()``: ``BaseModel.update_learning_rate`` steps every scheduler,
``CycleGANModel.optimize_parameters`` steps the optimizers, in other files. The first
learning rate of the schedule is skipped (qsparse's copy, fixed by moving the call to the end of
the epoch).
"""

from __future__ import annotations

import ast
from typing import Any

from rgt.lint._facts import Facts
from rgt.lint._nodes import dotted, method
from rgt.lint._update_order import is_optimizer, is_scheduler


def _stepping_methods(facts: Facts, which: str) -> list[str]:
    test = is_scheduler if which == "scheduler" else is_optimizer
    found: set[str] = set()
    for call in facts.methods_called("step"):
        around = facts.functions_around(call)
        if not around or [a.arg for a in around[0].args.args][:1] != ["self"]:
            continue
        plain = not call.args and not call.keywords
        if (plain and test(facts, call)) or (which == "optimizer" and _scaler_step(call)):
            found.add(around[0].name)
    return sorted(found)


def _scaler_step(call: ast.Call) -> bool:
    """``scaler.step(self.optimizer_G)``: AMP's optimizer step."""
    return len(call.args) == 1 and "optim" in (dotted(call.args[0]) or "").lower()


def sched_methods(facts: Facts) -> list[str]:
    """Methods here that step a learning-rate scheduler."""
    return _stepping_methods(facts, "scheduler")


def opt_methods(facts: Facts) -> list[str]:
    """Methods here that step an optimizer."""
    return _stepping_methods(facts, "optimizer")


def method_orders(facts: Facts) -> list[list[Any]]:
    """For each loop with a nested loop, the methods it calls on one object, in order, the
    first call of each, when one is called with no arguments (a scheduler's method needs
    none): ``[object, [[method, line, col], ...]]``."""
    out: list[list[Any]] = []
    for loop in facts.loops:
        if not facts.loops_in(loop):
            continue
        seen: dict[str, list[list[Any]]] = {}
        for call in facts.calls_in(loop):
            name = method(call)
            owner = dotted(call.func.value) if name else None  # type: ignore[attr-defined]
            if owner is None or owner == "self":
                continue
            calls = seen.setdefault(owner, [])
            if all(c[0] != name for c in calls):
                calls.append([name, call.lineno, call.col_offset, not call.args])
        for owner, calls in seen.items():
            if len(calls) > 1 and any(c[3] for c in calls):
                out.append([owner, [c[:3] for c in calls[:8]]])
    return out
