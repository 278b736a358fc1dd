"""The order of an update (``RGT105``, ``RGT106``, ``losses``): in each loop that steps an
optimizer after a backward pass, are the gradients cleared (``_clearing`` asks how), and does a
learning-rate scheduler step before the optimizer has?"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from rgt.lint import _clearing
from rgt.lint._clearing import OPTIMIZERS
from rgt.lint._facts import Facts
from rgt.lint._model import Hit
from rgt.lint._nodes import dotted, method


def update_order(facts: Facts) -> Iterator[Hit]:
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
            zero = bool(facts.methods_called("zero_grad")) or _clearing.sets_grad_none(facts.tree)
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
    return key.split(".")[-1].lower().endswith(("optimizer", "optim", "opt"))


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
