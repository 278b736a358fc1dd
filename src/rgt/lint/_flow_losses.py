"""The parts of a module's summary (``_cross``) about losses built elsewhere: functions and
methods that build and return a loss object of one kind (``build_loss(cfg)`` returning
``nn.BCEWithLogitsLoss()``: ``loss_factories``), and losses applied to a model's output where
the loss object came from a builder this module does not define (``built_losses``): a
function of another module, or a method a base class in another module defines."""

from __future__ import annotations

import ast
from typing import Any

from rgt.lint._facts import Facts
from rgt.lint._flow import _callee, built_from, origin_part
from rgt.lint._flow_data import qualname, ref
from rgt.lint._flow_make import LIBRARIES
from rgt.lint._loss_kinds import KINDS, _loss_kind
from rgt.lint._mode_loops import BUILTINS
from rgt.lint._nodes import dotted
from rgt.lint._suite import in_suite_test


def loss_factories(facts: Facts) -> dict[str, str]:
    """``qualname -> kind`` ("ce", "nll", "bce") of each function or method whose returns build
    losses of that one kind (other returns may build losses that take probabilities)."""
    out: dict[str, str] = {}
    for func in facts.functions:
        kinds = set()
        for returned in facts.returns_in(func):
            value = returned.value
            for made in _choices(value) if value is not None else ():
                name = facts.call_name(made) or ""
                kinds |= {k for k, (cls, _f) in KINDS if name.rpartition(".")[2] == cls}
        if len(kinds) == 1:
            out[qualname(facts, func)] = kinds.pop()
    return out


def built_losses(facts: Facts) -> list[list[Any]]:
    """Calls of a loss object made by a builder not defined here, on a model's output:
    ``[line, col, "via:" + builder (_flow_data.ref), class as spelled, position]`` (the
    ``model_losses`` shape, the kind left to the join: ``loss_factories`` of the builder)."""
    local = {c.name for c in facts.classes}
    own = {f.name for f in facts.functions}
    out: list[list[Any]] = []
    for call in facts.calls:
        values = facts.bindings.get(dotted(call.func) or "", []) if len(call.args) >= 2 else []
        if len(values) != 1 or not isinstance(values[0], ast.Call):
            continue
        builder = ref(facts, values[0])
        name = (dotted(values[0].func) or "").rpartition(".")[2]
        if builder is None or name in own or _outside(builder) or _loss_kind(facts, call):
            continue
        source, position = origin_part(facts, call.args[0])
        cls = built_from(facts, _callee(source), loose=True) if source is not None else None
        if not cls or cls in local or cls.split(".")[0] in BUILTINS or in_suite_test(facts, call):
            continue
        out.append([call.lineno, call.col_offset, "via:" + builder, cls, position])
    return out


def _outside(builder: str) -> bool:
    name = builder.partition(":")[2]
    return name.split(".")[0] in BUILTINS or name.startswith(LIBRARIES)


def _choices(value: ast.expr) -> list[ast.Call]:
    """The calls a returned value may be: ``a() if x else b()`` is either."""
    if isinstance(value, ast.IfExp):
        return _choices(value.body) + _choices(value.orelse)
    return [value] if isinstance(value, ast.Call) else []
