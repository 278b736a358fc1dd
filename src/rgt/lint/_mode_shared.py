"""A loop shared by training and validation whose ``no_grad`` wraps only what is computed
from the model's output, not the forward pass (``RGT203``): particleflow's
``train_and_valid(..., is_train)`` runs ``ypred = model(X)`` for both, and on the validation
path computes the loss under ``torch.no_grad()``; the forward already recorded its graph, so
validation holds every activation as training does, and the batch that fits training runs
out of memory there."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from rgt.lint._facts import LOOPS, Facts
from rgt.lint._mode_grads import guarded, mentions
from rgt.lint._model import Hit
from rgt.lint._nodes import dotted, method
from rgt.lint._tree import walk

MODEL = re.compile(r"(?i)(model|net|network|encoder|decoder|backbone|classifier)s?$")
NO_TAPE = ("no_grad", "inference_mode")


def late_guards(facts: Facts) -> Iterator[Hit]:
    backward = facts.loops_calling("backward")
    for block in facts.withs:
        if not any(mentions(i, NO_TAPE, loose=True) for i in block.items):
            continue
        loop = next((o for o in facts.around(block) if isinstance(o, LOOPS)), None)
        if loop is None or id(loop) not in backward or not _in_a_branch(facts, block, loop):
            continue
        if any(_is_model_call(c) for c in facts.calls_in(block)):
            continue
        run = _forward_used(facts, block, loop)
        if run is not None:
            detail = (f"the forward pass at line {run.lineno} runs before this `no_grad` "
                      "block, with autograd on")  # fmt: skip
            yield Hit("RGT203", block, detail)


def looped_evaluations(facts: Facts, named: re.Pattern[str]) -> Iterator[Hit]:
    """An evaluation function with no loop of its own (``evaluate(mod, inp)``: ``return
    mod(inp)``) that the module calls over and over in a loop, outside ``no_grad``, a loop
    that never back-propagates: every call records a graph (the torch.compile tutorial timed
    its ``evaluate`` so, before ``no_grad`` was added)."""
    backward = facts.loops_calling("backward")
    for func in facts.functions:
        if not named.search(func.name) or facts.loops_in(func) or mentions(func, NO_TAPE, True):
            continue
        params = {a.arg for a in func.args.args}
        runs = [c for c in facts.calls_in(func) if isinstance(c.func, ast.Name)]
        if not any(c.func.id in params for c in runs):  # type: ignore[attr-defined]
            continue
        for call in facts.callers(func.name):
            loops = [o for o in facts.around(call) if isinstance(o, LOOPS)]
            if loops and id(loops[0]) not in backward and not guarded(facts, call):
                yield Hit(
                    "RGT203", func, f"called over and over from the loop at line {loops[0].lineno}"
                )
                break


def _in_a_branch(facts: Facts, block: ast.With, loop: ast.AST) -> bool:
    """Is the block on the validation path: in one arm of an ``if`` of the loop, every
    backward pass of the loop in the other arm of an ``if`` on the same test (``if
    is_train:``)? A metric under ``no_grad`` every few training steps is not that path."""
    backs = [c for c in facts.calls_in(loop) if method(c) == "backward"]
    for fork in (i for i in facts.ifs if _inside(i, loop)):
        arm = _arm(fork, block)
        if arm is None:
            continue
        test = ast.dump(fork.test)
        forks = [i for i in facts.ifs if _inside(i, loop) and ast.dump(i.test) == test]
        if backs and all(any(_arm(i, c) == 1 - arm for i in forks) for c in backs):
            return True
    return False


def _arm(fork: ast.If, node: ast.AST) -> int | None:
    """0: ``node`` is in the body of ``fork``, 1: in its ``else``, None: in neither."""
    for index, arm in enumerate((fork.body, fork.orelse)):
        if any(_inside(node, s) for s in arm):
            return index
    return None


def _forward_used(facts: Facts, block: ast.With, loop: ast.AST) -> ast.Call | None:
    """A model call, in the loop before the block and outside any ``no_grad``, whose output
    the block reads (through up to three assignments: ``ypred = unpack(ypred)``)."""
    scope = facts.scope_of(block)
    todo = [(n.id, block.lineno) for n in walk(block) if isinstance(n, ast.Name)]
    for _ in range(3):
        later = []
        for name, before in todo:
            value = facts.last_value(scope, name, before)
            if value is None or not _inside(value, loop):
                continue
            for call in (n for n in walk(value) if isinstance(n, ast.Call)):
                if _is_model_call(call) and not guarded(facts, call):
                    return call
            later += [(n.id, value.lineno) for n in walk(value) if isinstance(n, ast.Name)]  # type: ignore[attr-defined]
        todo = later
    return None


def _is_model_call(call: ast.Call) -> bool:
    spelled = dotted(call.func) or ""
    return bool(spelled) and MODEL.search(spelled.rpartition(".")[2]) is not None


def _inside(node: ast.AST, outer: ast.AST) -> bool:
    first, last = getattr(outer, "lineno", 0), getattr(outer, "end_lineno", 0) or 0
    return bool(first <= getattr(node, "lineno", -1) <= last)
