"""The parts of a module's summary (``_cross``) about a model an object keeps from its
constructor and evaluates in a method (``Evaluator(model).run(loader)``, ``runner =
Tester(model, cfg)`` then ``runner.test()``): which attributes a class keeps from which
constructor argument (``kept_params``), and the method calls made on such an object while the
model handed to its constructor is in training mode (``ctor_calls``). Joined with the
evaluation methods that run ``self.model`` without ``.eval()`` (``_flow_modes.runners``)."""

from __future__ import annotations

import ast
from typing import Any

from rgt.lint._facts import Facts
from rgt.lint._flow import class_like, models
from rgt.lint._flow_kept import _unmoved
from rgt.lint._flow_modes import HELD, _evaluation_loop, _training_mode, runners
from rgt.lint._nodes import dotted

Function = ast.FunctionDef | ast.AsyncFunctionDef


def kept_params(facts: Facts) -> dict[str, dict[str, int]]:
    """``class -> {"self.attr": constructor position}`` for each attribute ``__init__`` binds to
    one of its parameters (``self.model = model``), in the classes whose evaluation methods
    run a model kept on ``self`` (``_flow_modes.runners``: the only ones a join asks about)."""
    wanted = {
        qual.rpartition(".")[0]
        for qual, (_line, pairs, *_rest) in runners(facts).items()
        if any(position == HELD for position, _name in pairs)
    }
    out: dict[str, dict[str, int]] = {}
    for cls in (c for c in facts.classes if c.name in wanted):
        held = {n for q, (_l, pairs, *_r) in runners(facts).items() if q.startswith(cls.name + ".")
                for p, n in pairs if p == HELD}  # fmt: skip
        for attr in held:
            found = _kept_from(facts, cls, attr)
            if found is not None:
                out.setdefault(cls.name, {})[attr] = found
    return out


def _kept_from(facts: Facts, cls: ast.ClassDef, attr: str) -> int | None:
    """The position of the constructor parameter ``self.attr`` is bound to, if that is its
    one binding (``self.model = model``, ``self.model = model.to(device)``)."""
    init = next((f for f in cls.body if isinstance(f, Function) and f.name == "__init__"), None)
    values = facts.bindings.get(attr, [])
    if init is None or len(values) != 1:
        return None
    value = _unmoved(values[0])
    names = [a.arg for a in init.args.posonlyargs + init.args.args][1:]
    inside = init.lineno <= value.lineno <= (init.end_lineno or init.lineno)
    if inside and isinstance(value, ast.Name) and value.id in names:
        return names.index(value.id)
    return None


def ctor_calls(facts: Facts) -> list[list[Any]]:
    """Method calls on an object built here with a model handed to its constructor, made
    while that model is in training mode: ``[line, col, "class:X:method", constructor
    position, model, why, in an evaluation loop]``."""
    named = models(facts)
    out: list[list[Any]] = []
    for call in facts.calls if named else ():
        if not isinstance(call.func, ast.Attribute) or not _maybe_built(facts, call.func.value):
            continue
        built = _construction(facts, call.func.value)
        cls = dotted(built.func) if built is not None else None
        if built is None or not cls or not class_like(cls):
            continue
        for index, arg in enumerate(built.args):
            why = _training_mode(facts, call, arg.id) if isinstance(arg, ast.Name) else ""
            if why and arg.id in named:  # type: ignore[attr-defined]
                ref = f"class:{cls}:{call.func.attr}"
                looping = _evaluation_loop(facts, call)
                out.append([call.lineno, call.col_offset, ref, index, arg.id, why, looping])  # type: ignore[attr-defined]
    return out


def _construction(facts: Facts, node: ast.expr) -> ast.Call | None:
    """``X(...)`` itself, or the value a name was last bound to before its use."""
    if isinstance(node, ast.Name):
        value = facts.last_value(facts.scope_of(node), node.id, node.lineno)
        return value if isinstance(value, ast.Call) else None
    return node if isinstance(node, ast.Call) else None


def _maybe_built(facts: Facts, node: ast.expr) -> bool:
    """A cheap first test: a call, or a name some call was bound to."""
    if isinstance(node, ast.Name):
        return any(isinstance(v, ast.Call) for v in facts.bindings.get(node.id, ()))
    return isinstance(node, ast.Call)
