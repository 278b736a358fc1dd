"""A prediction method that forgets the mode its sibling sets (``RGT201``, ``modes``): one
method of a class puts the model it keeps on ``self`` in eval mode for its loop over batches,
another runs the same model over batches to predict and never does (ludwig's
``Predictor.batch_predict`` beside ``batch_evaluation`` before its fix): its predictions come
with dropout on and batch-norm using each batch's statistics. The sibling's ``.eval()`` is the
author's word that the model has such layers."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from rgt.lint._facts import Facts
from rgt.lint._mode_helpers import train_false
from rgt.lint._mode_loops import Function, within
from rgt.lint._model import Hit
from rgt.lint._nodes import dotted, method, methods_of

PREDICTS = re.compile(r"(?i)(^|_)(predict|predictions|infer|inference)(_|$)")


def forgotten_modes(facts: Facts) -> Iterator[Hit]:
    switches = [c for c in facts.methods_called("eval") if not c.args]
    if not switches:
        return
    for cls in facts.classes:
        methods = methods_of(cls)
        evaluated = _evaluated(facts, methods, switches)
        for func in methods if evaluated else ():
            if not PREDICTS.search(func.name) or not facts.loops_in(func):
                continue
            model = _runs(facts, func, evaluated)
            if model is not None and not _callers_switch(facts, func, model):
                yield Hit("RGT201", func, f"`{func.name}` runs `{model}` over batches in the "
                          f"mode it was left in; the class's other loop puts it in eval mode "
                          "first")  # fmt: skip


def _evaluated(facts: Facts, methods: list[Function], switches: list[ast.Call]) -> set[str]:
    """``self.x`` put in eval mode (``self.x.eval()``) by a method of the class, in its own
    body before a loop of that method."""
    found = set()
    for func in methods:
        loops = facts.loops_in(func)
        for call in (c for c in switches if within(c, func)):
            key = dotted(call.func.value) or ""  # type: ignore[attr-defined]
            later = any(loop.lineno > call.lineno for loop in loops)
            if key.startswith("self.") and key.count(".") == 1 and later:
                found.add(key)
    return found


def _runs(facts: Facts, func: Function, evaluated: set[str]) -> str | None:
    """The ``self.x`` of ``evaluated`` that ``func`` runs inside a loop (called, a method of it
    called, or handed to a call), when ``func`` trains nothing and sets no mode of it."""
    calls = facts.calls_in(func)
    if any(method(c) in ("backward", "step") for c in calls):
        return None
    for model in sorted(evaluated):
        if any(method(c) in ("eval", "train") and dotted(c.func.value) == model for c in calls):  # type: ignore[attr-defined]
            continue
        looped = [c for c in calls if any(within(c, loop) for loop in facts.loops_in(func))]
        for call in looped:
            name = dotted(call.func) or ""
            ran = name == model or (name.startswith(model + ".") and method(call) not in QUIET)
            if ran or any(dotted(a) == model for a in call.args):
                return model
    return None


# Methods of a module that do not run it.
QUIET = frozenset({"parameters", "state_dict", "to", "cuda", "cpu", "zero_grad", "modules",
                   "named_parameters", "children", "buffers", "train", "eval"})  # fmt: skip


def _callers_switch(facts: Facts, func: Function, model: str) -> bool:
    """Does a caller of ``func`` in this module put ``model`` in eval mode before the call?"""
    for call in facts.callers(func.name):
        scope = facts.scope_of(call)
        before = [
            c
            for c in facts.calls_in(scope)
            if c.lineno < call.lineno
            and isinstance(c.func, ast.Attribute)
            and dotted(c.func.value) == model
        ]
        if any(method(c) == "eval" or train_false(c) for c in before):
            return True
    return False
