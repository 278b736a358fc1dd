"""A model built by a factory that hands it back in eval mode, then trained (``RGT202``
across files): neural-swipe-typing's ``get_model_from_configs`` (src/model.py) ends with
``_set_state``, which returns ``model.eval()``; the training script builds its model with it,
wraps it in a LightningModule and fits it, and nothing calls ``.train()``, so dropout stays
off for the whole run (recent Lightning no longer puts every module in training mode).

The factory's module offers ``eval_returns`` (functions returning a model they put in eval
mode, through a helper of the same module too); the training file lists ``eval_made``:
models it builds by a call, trains (their parameters go to an optimizer, or what wraps them to
a ``.fit``), and never puts back in training mode.
"""

from __future__ import annotations

import ast
from typing import Any

from rgt.lint._facts import Facts
from rgt.lint._nodes import dotted, method
from rgt.lint._tree import walk

# A model kept in eval mode on purpose: a teacher, an EMA copy, a frozen reference.
KEPT_NAMES = ("teacher", "ema", "target", "frozen", "ref", "critic_old", "old")


def eval_returns(facts: Facts) -> dict[str, int]:
    """Module-level functions that return a model in eval mode: ``name -> line``."""
    if not facts.methods_called("eval"):
        return {}  # nothing here puts a model in eval mode
    top = [f for f in facts.tree.body if isinstance(f, ast.FunctionDef)]
    found: dict[str, int] = {}
    for _ in range(2):  # a helper first (``_set_state``), then the function calling it
        for func in top:
            if func.name not in found and _returns_eval(facts, func, found):
                found[func.name] = func.lineno
    return found


def _returns_eval(facts: Facts, func: ast.FunctionDef, known: dict[str, int]) -> bool:
    for ret in facts.returns_in(func):
        value: ast.AST | None = ret.value
        if isinstance(value, ast.Name):
            value = facts.last_value(func, value.id, ret.lineno)
        if _evaluated(value, known):
            return True
    return False


def _evaluated(value: ast.AST | None, known: dict[str, int]) -> bool:
    """``x.eval()`` (after moves: ``x.eval().to(d)``), or a call of a known such function."""
    while isinstance(value, ast.Call) and method(value) in ("to", "cuda", "cpu", "float", "half"):
        value = value.func.value  # type: ignore[attr-defined]  # a method: an Attribute
    if not isinstance(value, ast.Call):
        return False
    if method(value) == "eval" and not value.args:
        return True
    return isinstance(value.func, ast.Name) and value.func.id in known


def eval_made(facts: Facts) -> list[list[Any]]:
    """``[line, col, callee as spelled, name]`` of each model built here by a function call,
    trained here and never put in training mode in this file (a ``.train()`` anywhere:
    chosen)."""
    if any(not c.args or not _false(c.args[0]) for c in facts.methods_called("train")):
        return []
    fits = facts.methods_called("fit")
    params = {_owner(c) for c in facts.calls if method(c) in ("parameters", "named_parameters")}
    if not fits and not params:
        return []
    trained = params | _fitted(facts, fits)
    out: list[list[Any]] = []
    for call in facts.calls:
        spelled = dotted(call.func) or ""
        assign = facts.assignment_of(call)
        if not spelled or not spelled.rpartition(".")[2][:1].islower() or assign is None:
            continue
        target = assign.targets[0] if len(assign.targets) == 1 else None
        if not isinstance(target, ast.Name) or any(k in target.id.lower() for k in KEPT_NAMES):
            continue
        if target.id in trained:
            out.append([call.lineno, call.col_offset, spelled, target.id])
    return out


def _fitted(facts: Facts, fits: list[ast.Call]) -> set[str | None]:
    """Names handed to a ``.fit``, and names handed to the call that made one of those
    (``lit = LitModel(model=model)``, ``trainer.fit(lit)``): one pass over the calls."""
    fitted: set[str | None] = {n.id for c in fits for n in walk(c) if isinstance(n, ast.Name)}
    out = set(fitted)
    for call in facts.calls if fitted else ():
        assign = facts.assignment_of(call)
        targets = assign.targets if assign is not None else []
        if any(isinstance(t, ast.Name) and t.id in fitted for t in targets):
            handed = [*call.args, *(k.value for k in call.keywords)]
            out |= {a.id for a in handed if isinstance(a, ast.Name)}
    return out


def _owner(call: ast.Call) -> str | None:
    return dotted(call.func.value) if isinstance(call.func, ast.Attribute) else None


def _false(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and not node.value
