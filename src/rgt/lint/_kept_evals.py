"""A loss tensor kept across the batches of an evaluation loop that records a graph
(``RGT204``): no backward pass runs there, but with autograd on each batch's loss holds the
graph of its forward pass, and a running total of those tensors keeps every one alive until
the loop ends (CheXNet's ``epochVal``: ``model.eval()``, then ``losstensorMean +=
losstensor`` for every validation batch, ``Variable(..., volatile=True)`` having no effect
from PyTorch 0.4 on; out of memory at the end of the first epoch).

Only a loop in a function that puts a model in eval mode before it and runs no backward
pass, outside ``no_grad``/``inference_mode`` (a ``with`` block, a decorator, every call of the
function, which must be called in this module: a caller elsewhere may hold ``no_grad``),
whose loss is what a loss function (``criterion``, ``loss``, an ``nn.*Loss``) made of what a
call in the same loop returned.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from rgt.lint._facts import Facts
from rgt.lint._kept_losses import (
    NO_TAPE,
    _loss_of,
    _made_from,
    accumulator,
    kept_name,
    root,
    untracked,
)
from rgt.lint._mode_grads import mentions
from rgt.lint._model import Hit
from rgt.lint._nodes import dotted, method


def kept_eval_losses(facts: Facts) -> Iterator[Hit]:
    for func in _evaluating(facts):
        for loop in facts.loops_in(func):
            losses = _losses(facts, loop)
            if not losses or untracked(facts, loop):
                continue
            for node in facts.augmented_in(loop):
                target = accumulator(node, losses)
                if target and target not in losses and not untracked(facts, node):
                    detail = f"{target}: each batch's loss, with autograd on in this evaluation"
                    yield Hit("RGT204", node, detail)


def _evaluating(facts: Facts) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    """Functions that call ``.eval()`` and no backward, recording a graph when they run."""
    found = []
    for call in facts.methods_called("eval"):
        around = facts.functions_around(call)
        func = around[0] if around and not call.args else None
        if func is None or func in found or _no_tape(facts, func):
            continue
        if not any(method(c) in ("backward", "manual_backward") for c in facts.calls_in(func)):
            found.append(func)
    return found


def _no_tape(facts: Facts, func: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Decorated with ``no_grad`` (or a helper named for it), called under one here, or not
    called here at all (a caller in another file may hold ``no_grad`` around it)."""
    decorated = any(mentions(d, NO_TAPE, True) or "nograd" in (dotted(d) or "").lower()
                    for d in func.decorator_list)  # fmt: skip
    calls = [*facts.callers(func.name), *facts.methods_called(func.name)]
    return decorated or not calls or any(untracked(facts, c) for c in calls)


def _losses(facts: Facts, loop: ast.AST) -> set[str]:
    """Names the loop binds to a loss function's result on what a call in the loop made
    (``losstensor = loss(varOutput, varTarget)``, ``varOutput = model(varInput)``)."""
    made = [
        n for n in ast.walk(loop) if isinstance(n, ast.Assign) and isinstance(n.value, ast.Call)
    ]
    bound = {t.id for n in made for t in n.targets if isinstance(t, ast.Name)}
    found: set[str] = set()
    for node in made:
        call = node.value
        assert isinstance(call, ast.Call)
        first = call.args[0] if call.args else None
        if _is_loss_fn(facts, call) and isinstance(first, ast.Name) and first.id in bound:
            found.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return found


def _is_loss_fn(facts: Facts, call: ast.Call) -> bool:
    spelled = dotted(call.func) or ""
    last = spelled.rpartition(".")[2].lower()
    if "loss" in last or "criterion" in last:
        return True
    return any(n.endswith("Loss") for n in facts.bound_calls(spelled))


def added_in_place(facts: Facts) -> Iterator[Hit]:
    """``stat.add_(loss)`` in the function that back-propagates ``loss``, into a tensor it did
    not make (NVIDIA's BERT pre-training: ``stats.device_stat('average_loss').add_(loss)``):
    the in-place add puts the kept tensor on each step's graph until it is reset."""
    for call in facts.methods_called("backward"):
        around = facts.functions_around(call)
        if not around:
            continue
        losses = _made_from(facts, _loss_of(call), call)
        adds = [c for c in facts.calls_in(around[0]) if method(c) == "add_" and len(c.args) == 1]
        adds = [c for c in adds if kept_name(c.args[0], losses) and not untracked(facts, c)]
        local = _bound_in(around[0]) if adds else set()
        for add in adds:
            held = root(add.func.value)  # type: ignore[attr-defined]
            if held not in local and held not in losses:
                yield Hit("RGT204", add, "added in place into a tensor kept across steps")


def _bound_in(func: ast.AST) -> set[str]:
    return {t.id for n in ast.walk(func) if isinstance(n, ast.Assign) for t in n.targets
            if isinstance(t, ast.Name)}  # fmt: skip
