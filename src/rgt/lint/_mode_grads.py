"""Autograd left on where a model only predicts (``RGT203``, ``modes``): a loop that runs a
model over batches right after ``model.eval()``, in the same function, with no ``no_grad``.

``model.eval()`` says the author is evaluating; if the batch loop that follows never calls
``backward`` or asks for a gradient, every forward pass still records its graph and keeps the
activations alive until the outputs are dropped (end2end-asr's validation inside ``train``,
spvnas's ``evaluate.py``: both ran out of GPU memory before ``no_grad`` was added).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from rgt.lint._facts import LOOPS, Facts
from rgt.lint._mode_helpers import freezes
from rgt.lint._model import Hit
from rgt.lint._nodes import dotted, method
from rgt.lint._tree import walk

Function = ast.FunctionDef | ast.AsyncFunctionDef
NO_GRAD = ("no_grad", "inference_mode", "set_grad_enabled", "enable_grad")
# Calls that show the loop wants gradients: a backward pass, a step, ``autograd.grad``, or
# inputs that ask for them (adversarial attacks and saliency maps run in eval mode on purpose).
WANTS_GRAD = ("backward", "step", "grad", "requires_grad_", "retain_grad")


def eval_loops_with_grad(facts: Facts, checked: list[Function]) -> Iterator[Hit]:
    """Each ``model.eval()`` (outside ``no_grad``, not in a function ``checked`` already as an
    evaluation) followed, before any ``model.train()`` and within the loop around it, by a loop
    that runs ``model`` and nothing in it wants gradients."""
    skip = {id(f) for f in checked}
    frozen: bool | None = None  # asked once, and only when a loop is found (a whole walk)
    for switch in facts.methods_called("eval"):
        model = None if switch.args else dotted(switch.func.value)  # type: ignore[attr-defined]
        scope = facts.scope_of(switch)
        if model is None or id(scope) in skip or guarded(facts, switch):
            continue
        run = _first_run(facts, switch, scope, model)
        if run is not None and isinstance(scope, Function):
            # a ``no_grad`` anywhere in the function: its author chose where (one walk, so
            # asked only of a function with such a loop)
            run = None if mentions(scope, NO_GRAD, loose=True) else run
        if run is not None and frozen is None:
            frozen = freezes(facts)  # ``v.requires_grad = False``: no graph is recorded
        if run is not None and not frozen:
            yield Hit(
                "RGT203",
                run,
                f"`{model}` runs over batches after `{model}.eval()` at line {switch.lineno}, "
                "with autograd on",
            )


def _first_run(facts: Facts, switch: ast.Call, scope: ast.AST, model: str) -> ast.Call | None:
    """The first call of ``model`` in a loop that starts after ``switch`` (in the same function
    and the same pass of the loop around it), unless the loop wants gradients or ``model`` is
    put back in training mode first."""
    outer = next((o for o in facts.around(switch) if isinstance(o, LOOPS)), None)
    for call in facts.calls_in(scope):
        if call.lineno <= switch.lineno or (outer is not None and not _inside(call, outer)):
            continue
        if method(call) == "train" and dotted(call.func.value) == model:  # type: ignore[attr-defined]
            return None
        if not _runs(call, model) or facts.scope_of(call) is not scope:
            continue
        loop = _loop_after(facts, call, switch)
        if loop is None or guarded(facts, call):
            continue
        inside = facts.calls_in(loop)
        if any(method(c) in WANTS_GRAD or dotted(c.func) == "grad" for c in inside):
            return None
        if any(k.arg == "volatile" for c in inside for k in c.keywords):
            return None  # ``Variable(x, volatile=True)``: torch < 0.4's no_grad, chosen then
        return None if mentions(loop, ("requires_grad",)) else call
    return None


def _runs(call: ast.Call, model: str) -> bool:
    if dotted(call.func) == model:
        return True
    return method(call) == "forward" and dotted(call.func.value) == model  # type: ignore[attr-defined]


def _loop_after(facts: Facts, call: ast.Call, switch: ast.Call) -> ast.AST | None:
    """The outermost loop around ``call`` that starts after ``switch``."""
    loops = [o for o in facts.around(call) if isinstance(o, LOOPS) and o.lineno > switch.lineno]
    return loops[-1] if loops else None


def _inside(node: ast.AST, outer: ast.AST) -> bool:
    end = getattr(outer, "end_lineno", 0) or 0
    return getattr(outer, "lineno", 0) <= getattr(node, "lineno", -1) <= end


def guarded(facts: Facts, node: ast.AST) -> bool:
    """Is ``node`` under a ``with torch.no_grad()`` (or in a function decorated so)?"""
    return any(
        isinstance(o, ast.With | ast.FunctionDef) and mentions_head(o) for o in facts.around(node)
    )


def mentions_head(node: ast.With | ast.FunctionDef) -> bool:
    heads: list[ast.AST] = []
    heads.extend(node.items if isinstance(node, ast.With) else node.decorator_list)
    return any(mentions(h, NO_GRAD, loose=True) for h in heads)


def mentions(node: ast.AST, names: tuple[str, ...], loose: bool = False) -> bool:
    """Does a name or attribute in ``node`` read one of ``names`` (``loose``: or contain one,
    as yolov5's ``@smart_inference_mode()`` does)?"""
    for child in walk(node):
        if isinstance(child, ast.Attribute):
            word = child.attr
        elif isinstance(child, ast.Name):
            word = child.id
        else:
            continue
        if word in names or (loose and any(n in word for n in names)):
            return True
    return False


def phase_loops(facts: Facts) -> Iterator[Hit]:
    """``for phase in ("train", "val"):`` running the model with the same code for both
    phases and stepping only ``if phase == "train"``: without a ``.eval()`` in the loop the
    validation phase runs in training mode (RGT201), and without ``no_grad`` (or
    ``set_grad_enabled(phase == "train")``) it records graphs (RGT203) (ZOO-Attack's ``fit``)."""
    for loop in facts.loops:
        phases = _phases(loop)
        if phases is None:
            continue
        calls = facts.calls_in(loop)
        steps = [c for c in calls if method(c) in ("backward", "step")]
        runs = [c for c in calls if isinstance(c.func, ast.Name) and _model_like(facts, c, loop)]
        guarded_steps = steps and all(_under_phase_test(facts, s, loop, phases) for s in steps)
        runs = [r for r in runs if not _under_phase_test(facts, r, loop, phases)]
        if not guarded_steps or not runs:
            continue
        model = runs[0].func.id  # type: ignore[attr-defined]
        if not any(method(c) in ("eval", "train") for c in calls):
            yield Hit("RGT201", runs[0], f"`{model}` runs the validation phase in training mode")
        if not mentions(loop, NO_GRAD, loose=True):
            yield Hit("RGT203", runs[0], f"`{model}` runs the validation phase with autograd on")


def _model_like(facts: Facts, call: ast.Call, loop: ast.AST) -> bool:
    """``model(x)``: a name holding a module here, or a parameter of the function around the
    loop named like one (``model``, ``net``, ``classifier``)."""
    from rgt.lint._mode_loops import holds_model

    name = call.func.id  # type: ignore[attr-defined]  # the caller checked: a Name
    if holds_model(facts, name):
        return True
    around = facts.functions_around(loop)
    params = [a.arg for a in around[0].args.args] if around else []
    return name in params and MODEL_NAME.search(name) is not None


MODEL_NAME = re.compile(r"(?i)(model|net|classifier|encoder)$")


def _phases(loop: ast.AST) -> str | None:
    """The loop variable of ``for phase in ("train", "val")`` (a literal list of names, one of
    them training, one evaluating)."""
    target, items = getattr(loop, "target", None), getattr(loop, "iter", None)
    if not isinstance(target, ast.Name) or not isinstance(items, ast.Tuple | ast.List):
        return None
    words: list[str] = [
        e.value for e in items.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)
    ]
    if len(words) != len(items.elts):
        return None
    training = any(w.startswith("train") for w in words)
    evaluating = any(w.startswith(("val", "test", "eval")) for w in words)
    return target.id if training and evaluating else None


def _under_phase_test(facts: Facts, node: ast.AST, loop: ast.AST, phase: str) -> bool:
    return any(
        _inside(i, loop) and _inside(node, i) and mentions(i.test, (phase,)) for i in facts.ifs
    )
