"""The order of an update (``RGT105``, ``RGT106``, ``losses``): in each loop that steps an
optimizer after a backward pass, are the gradients cleared (``_clearing`` asks how), and does a
learning-rate scheduler step before the optimizer has?"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from typing import Any

from rgt.lint import _clearing
from rgt.lint._clearing import OPTIMIZERS
from rgt.lint._counted_clear import counted_clears
from rgt.lint._facts import LOOPS, Facts
from rgt.lint._model import Hit
from rgt.lint._nodes import dotted, local_name, method
from rgt.lint._optim_classes import misaligned_clears, optimizer_classes


def update_order(facts: Facts) -> Iterator[Hit]:
    yield from optimizer_classes(facts)  # an optimizer of the project that never clears
    yield from misaligned_clears(facts)
    yield from _stepped_first(facts)
    yield from _stepped_before_call(facts)
    yield from _branch_cleared_step(facts)
    yield from _one_optimizer_twice(facts)
    yield from counted_clears(facts)
    zero: bool | None = None  # does the module clear gradients? Asked only when it matters
    stepping = facts.loops_calling("step")
    for loop in facts.loops:
        if id(loop) not in stepping:
            continue
        inside = facts.calls_in(loop)
        steps = [c for c in inside if method(c) == "step" and not c.args and not c.keywords]
        opt = [c for c in steps if is_optimizer(facts, c)]
        if not opt:
            continue
        if zero is None and any(method(c) == "backward" for c in inside):
            zero = bool(facts.methods_called("zero_grad")) or _clearing.module_sets_grad_none(facts)
            zero = zero or _clearing.attached_privacy_engine(facts)
        if zero is False and not _clearing.accumulates(facts, loop, opt[0]):
            yield Hit("RGT105", opt[0])
            zero = True  # once per module: the fix is one line
        elif zero and any(method(c) == "backward" for c in inside):
            uncleared = (
                _clearing.uncleared(facts, opt)
                or _clearing.cleared_elsewhere(facts, loop, opt[0])
                or _clearing.cleared_before_step(facts, loop, opt[-1])
                or _clearing.cleared_in_other_branch(facts, loop, opt[0])
            )
            if uncleared is not None and not _clearing.accumulates(facts, loop, opt[0]):
                yield uncleared
        sched = [c for c in steps if is_scheduler(facts, c)]
        if sched and _first_line(sched) < _first_line(opt):
            yield Hit("RGT106", sched[0])


def sched_ctors(facts: Facts) -> list[list[Any]]:
    """The summary's: ``[line, class as spelled]`` of each scheduler stepped here whose name is
    bound, anywhere in the module, to an object built from a class (``lr_scheduler =
    StepwiseLR(optimizer, ...)`` in ``main``, stepped in ``train``): ``_join.withheld`` drops
    RGT106 on a scheduler of the project's own."""
    out: list[list[Any]] = []
    for call in facts.methods_called("step"):
        if call.args or call.keywords or not is_scheduler(facts, call):
            continue
        key = (dotted(call.func.value) or "").rpartition(".")[2]  # type: ignore[attr-defined]
        for value in facts.bindings.get(key, []):
            spelled = dotted(value.func) if isinstance(value, ast.Call) else None
            if spelled and spelled.rpartition(".")[2][:1].isupper():
                out.append([call.lineno, spelled])
                break
    return out


def _stepped_first(facts: Facts) -> Iterator[Hit]:
    """A function that steps the scheduler before the loop in it that steps the optimizer
    (ReActNet's ``train(epoch, ...)``: ``scheduler.step()``, then the batch loop): called
    once an epoch, its first scheduler step comes before any optimizer step."""
    owners: dict[int, ast.AST] = {}
    for call in facts.methods_called("step"):
        around = facts.functions_around(call)
        if around and not call.args:
            owners.setdefault(id(around[0]), around[0])
    for func in owners.values():  # only the functions that step something
        calls = [c for c in facts.calls_in(func) if method(c) == "step" and not c.args]
        opt = [c for c in calls if is_optimizer(facts, c)]
        sched = [c for c in calls if is_scheduler(facts, c)]
        if not opt or not sched or _first_line(sched) > _first_line(opt):
            continue
        first = min(sched, key=lambda c: (c.lineno, c.col_offset))
        loops = facts.loops_in(func)
        looped = [c for c in opt if any(_inside(c, loop) for loop in loops)]
        # a loop of its own around the scheduler's step (``for task in tasks:
        # task.scheduler.step()``) is no loop of the optimizer's
        before = looped and not any(
            _inside(first, loop) and _inside(c, loop) for loop in loops for c in looped
        )
        if before and not _counted(facts, first, func):
            yield Hit("RGT106", first, "before the loop that steps the optimizer")
        elif not loops and _unconditional_before(facts, first, opt, func):
            yield Hit("RGT106", first, "before this function steps the optimizer")


def _unconditional_before(
    facts: Facts, first: ast.Call, opt: list[ast.Call], func: ast.AST
) -> bool:
    """A function with no loop (an ``OptimizerScheduler.step`` that wraps both): the
    scheduler steps first on every call, under no ``if`` that the optimizer's step is not
    under too; the first call of the function already skips the schedule's first value."""
    step = min(opt, key=lambda c: (c.lineno, c.col_offset))
    for branch in (o for o in facts.ifs if _inside(o, func) and _inside(first, o)):
        arm = next(
            (a for a in (branch.body, branch.orelse) if any(_inside(first, s) for s in a)), []
        )
        if not any(_inside(step, s) for s in arm):
            return False
    return True


def _stepped_before_call(facts: Facts) -> Iterator[Hit]:
    """A loop that steps the scheduler, then calls a function or method of this module that
    steps the optimizer (NeuralRecon's epoch loop: ``lr_scheduler.step()``, then
    ``train_sample(sample)`` for every batch, which runs ``optimizer.step()``): its first
    scheduler step comes before any optimizer step."""
    stepping = _optimizer_steppers(facts)
    for loop in facts.loops if stepping else ():
        inside = facts.calls_in(loop)
        steps = [c for c in inside if method(c) == "step" and not c.args and not c.keywords]
        sched = [c for c in steps if is_scheduler(facts, c)]
        if not sched or any(is_optimizer(facts, c) for c in steps):
            continue  # none here, or the single loop's rule (``update_order``)
        first = min(sched, key=lambda c: (c.lineno, c.col_offset))
        func = facts.functions_around(loop)
        if _counted(facts, first, loop) or (func and func[0].name in stepping):
            continue
        later = [local_name(c) for c in inside if c.lineno > first.lineno]
        name = next((n for n in later if n in stepping), None)
        if name is not None:
            detail = f"before `{name}()` (line {stepping[name]}) steps the optimizer"
            yield Hit("RGT106", first, detail)


def _branch_cleared_step(facts: Facts) -> Iterator[Hit]:
    """A step function (no loop of its own) that clears after the optimizer's step in one
    branch only (FlagAI's ``train_step_pytorch``: ``if self.fp16: optimizer.step();
    optimizer.zero_grad()``, ``else: optimizer.step()``), called from a loop of this module
    that clears nothing itself: the other branch's gradients add up over the whole run."""
    for call in facts.methods_called("step"):
        around = facts.functions_around(call)
        if not around or call.args or call.keywords or not is_optimizer(facts, call):
            continue
        func = around[0]
        if any(_inside(call, loop) for loop in facts.loops_in(func)):
            continue  # the loop rules' (``update_order``)
        if not any(method(c) == "backward" for c in facts.calls_in(func)):
            continue
        hit = _clearing.cleared_in_other_branch(facts, func, call)
        if hit is not None and _looped_without_clearing(facts, func.name):
            yield hit


def _looped_without_clearing(facts: Facts, name: str) -> bool:
    """Is ``name`` called (``name(...)``, ``self.name(...)``) only in loops that clear no
    gradients, and in one at least?"""
    loops = [
        next((o for o in facts.around(c) if isinstance(o, LOOPS)), None)
        for c in facts.callers(name)
    ]
    return bool(loops) and all(
        loop is not None and not any("zero_grad" in (method(c) or "") for c in facts.calls_in(loop))
        for loop in loops
    )


def _one_optimizer_twice(facts: Facts) -> Iterator[Hit]:
    """A call of a function of this module that hands one optimizer for two of its parameters
    that it steps (ESRGAN-PyTorch's ``train(..., g_optimizer, g_optimizer, ...)`` for
    ``g_optimizer, d_optimizer``): the other optimizer never steps, and its schedule steps
    with no optimizer step before it."""
    stepped = _stepped_params(facts)
    for call in [c for name in stepped for c in facts.callers(name)]:
        func, params = stepped[local_name(call) or ""]
        if isinstance(call.func, ast.Attribute) and params[:1] == ["self"]:
            params = params[1:]  # ``self.train(...)``
        given: dict[str, list[str]] = {}
        for index, arg in enumerate(call.args):
            if index < len(params) and params[index] in func:
                given.setdefault(dotted(arg) or "", []).append(params[index])
        for word in call.keywords:
            if word.arg in func:
                given.setdefault(dotted(word.value) or "", []).append(word.arg)
        twice = next(((k, v) for k, v in given.items() if k and len(set(v)) > 1), None)
        if twice is not None:
            first, other = list(dict.fromkeys(twice[1]))[:2]
            detail = (f"`{twice[0]}` is handed for both `{first}` and `{other}`: `{other}` "
                      "never steps, its schedule steps with no optimizer step")  # fmt: skip
            yield Hit("RGT106", call, detail)


def _stepped_params(facts: Facts) -> dict[str, tuple[set[str], list[str]]]:
    """Functions of this module that step optimizers they are handed (``opt.step()``,
    ``scaler.step(opt)``): ``name -> (the stepped parameters, every parameter)``."""
    out: dict[str, tuple[set[str], list[str]]] = {}
    for call in facts.methods_called("step"):
        around = facts.functions_around(call)
        owner = dotted(call.func.value) if not call.args else None  # type: ignore[attr-defined]
        if len(call.args) == 1 and "optim" in (dotted(call.args[0]) or "").lower():
            owner = dotted(call.args[0])  # AMP's ``scaler.step(optimizer)``
        elif owner is None or call.keywords or not is_optimizer(facts, call):
            continue
        params = [a.arg for a in around[0].args.args] if around else []
        if owner in params:
            out.setdefault(around[0].name, (set(), params))[0].add(owner)
    return out


def _optimizer_steppers(facts: Facts) -> dict[str, int]:
    """The functions and methods of this module that step an optimizer themselves, each with
    the line of its first step."""
    found: dict[str, int] = {}
    for call in facts.methods_called("step"):
        around = facts.functions_around(call)
        if around and not call.args and not call.keywords and is_optimizer(facts, call):
            found.setdefault(around[0].name, call.lineno)
    return found


def _inside(node: ast.AST, outer: ast.AST) -> bool:
    first, last = getattr(outer, "lineno", 0), getattr(outer, "end_lineno", 0) or 0
    return bool(first <= getattr(node, "lineno", -1) <= last)


def _counted(facts: Facts, call: ast.Call, func: ast.AST) -> bool:
    """Under an ``if`` that compares (``if epoch > 0:``): its author chose when it runs."""
    return any(
        isinstance(o.test, ast.Compare) and _inside(o, func) and _inside(call, o) for o in facts.ifs
    )


def _first_line(calls: list[ast.Call]) -> tuple[int, int]:
    return min((c.lineno, c.col_offset) for c in calls)


def is_optimizer(facts: Facts, call: ast.Call) -> bool:
    assert isinstance(call.func, ast.Attribute)
    key = dotted(call.func.value) or ""
    made = facts.bound_calls(key)
    if made and any("lr_scheduler" in n for n in made):
        return False
    if made and all(n.startswith(OPTIMIZERS) for n in made):
        return True
    last = key.split(".")[-1].lower()
    return last.endswith(("optimizer", "optim", "opt")) or bool(_OPTIMIZER_PART.search(last))


# ``optimizer_cls``, ``optimizer_G``, ``optim_d``: a part of the name, between underscores
_OPTIMIZER_PART = re.compile(r"(?:^|_)(?:optimizer|optimiser|optim)(?:_|$)")


def is_scheduler(facts: Facts, call: ast.Call) -> bool:
    assert isinstance(call.func, ast.Attribute)
    key = dotted(call.func.value) or ""
    made = facts.bound_calls(key)
    if made:
        return all("lr_scheduler" in n or SCHEDULE.search(n.rpartition(".")[2]) for n in made)
    return key.split(".")[-1] in ("scheduler", "lr_scheduler", "sched")


# A scheduler made outside ``torch.optim.lr_scheduler``: ``get_linear_schedule_with_warmup``,
# pytorch-transformers' ``WarmupLinearSchedule``, a project's ``WarmupLR``.
SCHEDULE = re.compile(r"(?i)schedul|^\w*LR$")
