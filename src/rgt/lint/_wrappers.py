"""Loss wrappers: a function, method or loss class that hands one of its parameters to
``CrossEntropyLoss``/``NLLLoss``/``BCEWithLogitsLoss`` (``RGT101``-``RGT103``, ``losses``).

Projects rarely call the loss where the model's output is: a focal loss whose ``forward`` calls
``F.binary_cross_entropy_with_logits(inputs, ...)`` (LMFD-PAD's ``WeightedFocalLoss``), a
``criterion(logits, labels)`` helper (GeneralDyG), a ``self.loss(logits, labels)`` method around
``self.loss_func`` (Lightning's fine-tuning example). A sigmoid output handed to any of them is
squashed twice, the same bug one call away. A wrapper is keyed by its function's name
(``name(...)``, ``self.name(...)``), or ``class:Name`` for a module class whose ``forward`` does it
(called through an instance); ``_join`` matches wrappers and calls across files.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from typing import Any

from rgt.lint._facts import Facts
from rgt.lint._model import Hit
from rgt.lint._nodes import dotted, keyword, unshaped

Function = ast.FunctionDef | ast.AsyncFunctionDef
OUTPUT = {"ce": "softmax", "nll": "softmax", "bce": "sigmoid"}
CODES = {"ce": "RGT101", "nll": "RGT102", "bce": "RGT103"}
LOSSES = {"ce": "CrossEntropyLoss", "nll": "NLLLoss", "bce": "BCEWithLogitsLoss"}
Entry = list[Any]  # [position, parameter, kind, line of the loss]


def wrappers(facts: Facts, loss_calls: list[tuple[ast.Call, str]]) -> dict[str, list[Entry]]:
    """Each wrapper here: ``key -> [[position, parameter, kind, loss line]]``, the position
    counted as its callers pass arguments (without ``self``)."""
    from rgt.lint import losses  # the rules module imports this one

    out: dict[str, list[Entry]] = {}
    for call, kind in loss_calls:
        first = losses.first_arg(call)
        node = rows(first) if first is not None else None
        around = facts.functions_around(call)
        if not isinstance(node, ast.Name) or not around:
            continue
        func = around[0]
        names = _params(func)
        if node.id not in names or _rebound(facts, func, node.id, call.lineno):
            continue  # not a parameter, or one rebound before the loss (``x = x.sigmoid()``)
        entry = [names.index(node.id), node.id, kind, call.lineno]
        out.setdefault(_key(facts, func), []).append(entry)
    return out


def _rebound(facts: Facts, func: Function, name: str, line: int) -> bool:
    """Is parameter ``name`` bound to something else before ``line``? A reshape of itself
    (``x = x.permute(0, 2, 1)``) keeps what it holds."""

    for _ in range(4):
        value = facts.last_value(func, name, line)
        if value is None:
            return False
        shaped = unshaped(value)
        if shaped is value or not isinstance(shaped, ast.Name) or shaped.id != name:
            return True
        line = getattr(value, "lineno", line)
    return True


def _params(func: Function) -> list[str]:
    names = [a.arg for a in func.args.posonlyargs + func.args.args]
    return names[1:] if names[:1] in (["self"], ["cls"]) else names


def _key(facts: Facts, func: Function) -> str:
    if func.name == "forward":
        owner = [c for c in facts.classes if func in c.body]
        if owner:
            return f"class:{owner[0].name}"
    return func.name


def calls_of(facts: Facts, key: str) -> list[ast.Call]:
    """The calls here of the wrapper ``key``: ``name(...)``/``self.name(...)``, or calls of a
    name bound only to instances of the class."""
    kind, _, name = key.rpartition(":")
    if not kind:
        return facts.callers(name)
    bound = {k.rpartition(".")[2] for k in facts.bindings}
    found = facts.calls_ending(lambda last: last in bound)
    return [c for c in found if facts.is_instance_of(c.func, (name,))]


def argument(call: ast.Call, position: int, name: str) -> ast.expr | None:
    if position < len(call.args) and not isinstance(call.args[position], ast.Starred):
        return call.args[position]
    return keyword(call, name)


def hits(facts: Facts, probs: Any, wraps: dict[str, list[Entry]]) -> Iterator[Hit]:
    """Calls of a wrapper defined here with probabilities where it expects logits."""
    for key, entries in wraps.items():
        for call in calls_of(facts, key):
            for position, name, kind, line in entries:
                arg = argument(call, position, name)
                if arg is not None and _probabilities(facts, probs, call, key, line, arg, kind):
                    shown = key.rpartition(":")[2]
                    detail = (f"`{shown}` hands its `{name}` to {LOSSES[kind]} (line {line}); "
                              f"this is {OUTPUT[kind]} output")  # fmt: skip
                    yield Hit(CODES[kind], call, detail)
                    break


def _probabilities(
    facts: Facts, probs: Any, call: ast.Call, key: str, line: int, arg: ast.expr, kind: str
) -> bool:
    """Is ``arg`` ``kind``'s probabilities: as this class runs, or, for ``self.key(...)`` in a
    base class, as a subclass here runs that defines the wrapper or its own ``forward``."""
    from rgt.lint import _overrides

    node, output = unshaped(arg), OUTPUT[kind]
    if probs.of(node, output):
        return True
    own = _overrides.holder(facts, call.lineno) if dotted(call.func) == f"self.{key}" else None
    wrapper = _overrides.holder(facts, line)
    for sub in _overrides.subclasses(facts, own.name) if own and wrapper else ():
        if _overrides.defining(facts, sub, key) is not wrapper:
            continue  # the loss method this subclass runs is another one
        forward = _overrides.defining(facts, sub, "forward")
        if forward is not None and forward is not own and probs.of(node, output, forward.name):
            return True
    return False


def wrapper_calls(facts: Facts) -> list[list[Any]]:
    """Calls of an imported function, or of an instance of an imported class, with an argument
    that is probabilities here or the output of a model built from a class defined elsewhere:
    ``[line, col, callee as spelled, instance?, [[index, kind or None, class or None, part]]]``
    (``_join`` looks the callee up among the other modules' wrappers)."""
    from rgt.lint import _flow, losses

    imported = set(facts.aliases) | {
        a.asname or a.name.split(".")[0] for i in facts.imports for a in i.names
    }
    local = {c.name for c in facts.classes}
    probs = None
    out = []
    for call in facts.calls:
        callee, instance = _imported_callee(facts, call, imported)
        if callee is None or not call.args:
            continue
        probs = probs or losses._Probabilities(facts)
        args = []
        for index, arg in enumerate(call.args[:4]):
            node = unshaped(arg)
            made = [k for k in ("softmax", "sigmoid") if probs.of(node, k)]
            if made:
                args.append([index, made[0], None, losses.WHOLE])
                continue
            source, part = _flow.origin_part(facts, node)
            cls = _flow.built_from(facts, _flow._callee(source), loose=True) if source else None
            if cls and cls not in local and cls.split(".")[0] in imported:
                args.append([index, None, cls, part])
        if args:
            out.append([call.lineno, call.col_offset, callee, instance, args])
    return out


def _imported_callee(facts: Facts, call: ast.Call, imported: set[str]) -> tuple[str | None, bool]:
    """``focal(...)`` with ``focal`` imported: ``("focal", False)``; ``crit(...)`` with ``crit
    = losses.Focal(...)``: ``("losses.Focal", True)``."""
    spelled = dotted(call.func)
    if spelled is None or spelled.startswith("self."):
        return None, False
    if spelled.split(".")[0] in imported and spelled.split(".")[0] not in ("torch", "F", "nn"):
        return spelled, False
    from rgt.lint import _flow

    cls = _flow.built_from(facts, call.func)
    if cls and cls.split(".")[0] in imported and cls.split(".")[0] not in ("torch", "nn"):
        return cls, True
    return None, False


def rows(node: ast.AST) -> ast.AST:
    """``probs[:, i, :]``, ``probs[mask]``, ``probs[i].view(-1, n)``: rows of ``probs``, their
    last axis (the classes) kept whole, are ``probs`` (``unshaped`` too)."""
    node = unshaped(node)
    while isinstance(node, ast.Subscript) and _keeps_last(node.slice):
        node = unshaped(node.value)
    return node


def _keeps_last(index: ast.AST) -> bool:
    """An index that picks rows: one expression (the first axis), or a tuple ending in ``:``."""
    if isinstance(index, ast.Tuple):
        last = index.elts[-1] if index.elts else None
        whole = isinstance(last, ast.Slice) and not (last.lower or last.upper or last.step)
        return whole and not any(isinstance(e, ast.Starred) for e in index.elts)
    return not isinstance(index, ast.Slice | ast.Constant)
