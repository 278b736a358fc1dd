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

from rgt.lint._clearing import OPTIMIZERS
from rgt.lint._facts import Facts
from rgt.lint._flow import params
from rgt.lint._flow_data import qualname as qual
from rgt.lint._flow_data import ref
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


def opt_params(facts: Facts) -> dict[str, list[list[Any]]]:
    """Functions that step an optimizer they are passed (``train_one_epoch(model, loader,
    optimizer)``): ``qualname -> [[position, name, line of the step]]``."""
    return _stepped_params(facts, is_optimizer)


def sched_params(facts: Facts) -> dict[str, list[list[Any]]]:
    """Functions that step a scheduler they are passed (``adjust_lr(scheduler, epoch)``)."""
    return _stepped_params(facts, is_scheduler)


def _stepped_params(facts: Facts, test: Any) -> dict[str, list[list[Any]]]:
    out: dict[str, list[list[Any]]] = {}
    for call in facts.methods_called("step"):
        owner = dotted(call.func.value)  # type: ignore[attr-defined]
        around = facts.functions_around(call)
        if call.args or call.keywords or not around or not test(facts, call):
            continue
        names = params(around[0])
        if owner in names and not any(e[1] == owner for e in out.get(qual(facts, around[0]), ())):
            entry = [names.index(owner), owner, call.lineno]
            out.setdefault(qual(facts, around[0]), []).append(entry)
    return out


def sched_calls(facts: Facts) -> list[list[Any]]:
    """A scheduler stepped in a loop that steps no optimizer itself (by ``scheduler.step()``,
    or by a call that hands the scheduler to a function), before a call in the same loop that
    hands an optimizer on: ``[line, col, callee, position, keyword, optimizer, how]`` of the
    scheduler's step, ``how`` None for a ``step()`` here, else ``[callee, position, keyword]``
    of the call handing the scheduler (``_join_order`` checks that the callees step them)."""
    out: list[list[Any]] = []
    for loop in facts.loops:
        inside = facts.calls_in(loop)
        steps = [c for c in inside if method(c) == "step" and not c.args and not c.keywords]
        if any(is_optimizer(facts, c) for c in steps):
            continue  # the single-file rule's (``_update_order``)
        first = next((c for c in steps if is_scheduler(facts, c)), None)
        how = None
        if first is None:
            first, how = _handing(facts, inside, _scheduler_name)
            if first is not None and _handing(facts, [first], _optimizer_name)[0] is not None:
                continue  # one call is handed both (FlagAI's ``train_step``): its order is its own
        for call in [c for c in inside if first is not None and c.lineno > first.lineno]:
            _given, hands = _handing(facts, [call], _optimizer_name)
            if first is not None and hands is not None:
                out.append([first.lineno, first.col_offset, *hands, how])
        if len(out) > 16:
            break
    return out


def _handing(facts: Facts, calls: list[ast.Call], test: Any) -> tuple[ast.Call | None, Any]:
    """The first call that hands an object ``test`` accepts to a function, and ``[callee,
    position, keyword, name]`` of it."""
    for call in calls:
        spots: list[tuple[int, str | None, ast.expr]] = [
            (i, None, a) for i, a in enumerate(call.args)
        ]
        spots += [(-1, k.arg, k.value) for k in call.keywords if k.arg]
        for index, word, arg in spots:
            name = dotted(arg) or ""
            if (
                name
                and method(call) != "step"
                and test(facts, name)
                and (callee := ref(facts, call))
            ):
                return call, [callee, index, word, name]
    return None, None


def _scheduler_name(facts: Facts, name: str) -> bool:
    """A name bound to a learning-rate scheduler, or named like one."""
    made = facts.bound_calls(name)
    if made:
        return all("lr_scheduler" in n or "schedul" in n.lower() for n in made)
    return name.split(".")[-1] in ("scheduler", "lr_scheduler", "sched")


def _optimizer_name(facts: Facts, name: str) -> bool:
    """A name bound to an optimizer (``torch.optim``), or named like one."""
    made = facts.bound_calls(name)
    if made and all(n.startswith(OPTIMIZERS) or "optim" in n.lower() for n in made):
        return True
    return name.split(".")[-1].lower().endswith(("optimizer", "optim", "opt"))
