"""The part of a module's summary (``_cross``) about models handed to functions: calls passing
a model built from a class (``passes``), by a name or built right in the call
(``fit(Net().cuda(), loader)``)."""

from __future__ import annotations

import ast
from typing import Any

from rgt.lint._facts import Facts
from rgt.lint._flow import NOT_MODELS, built_from, class_like, models
from rgt.lint._flow_data import made_by, ref
from rgt.lint._flow_hands import _head, project_heads
from rgt.lint._nodes import dotted


def passes(facts: Facts) -> list[list[Any]]:
    """Calls passing a model built from a class: ``[line, col, callee, position, keyword,
    class]`` (``train.source_only(encoder, classifier)`` with
    ``classifier = model.Classifier()``)."""
    built = models(facts)
    out = []
    heads = project_heads(facts)
    for call in facts.calls:
        if _head(call) not in heads:
            continue  # not a call of the project's own code
        given = [*call.args, *(k.value for k in call.keywords)]
        if not any(type(a) is ast.Call or (type(a) is ast.Name and a.id in built) for a in given):
            continue  # the common case, tested cheaply
        pairs: list[tuple[int, str | None, ast.expr]] = [
            (i, None, _copied(a)) for i, a in enumerate(call.args)
        ]
        pairs += [(-1, k.arg, _copied(k.value)) for k in call.keywords if k.arg]
        pairs = [p for p in pairs if _model_like(facts, p[2], built)]
        callee = ref(facts, call) if pairs else None
        if callee is None:
            continue
        for index, keyword, arg in pairs:
            for cls in _classes_of(facts, arg):
                out.append([call.lineno, call.col_offset, callee, index, keyword, cls])
    return out


def _copied(node: ast.expr) -> ast.expr:
    """``copy.deepcopy(global_model)`` hands over a copy of the same model."""
    if type(node) is ast.Call and dotted(node.func) in ("copy.deepcopy", "deepcopy"):
        return node.args[0] if node.args else node
    return node


def _classes_of(facts: Facts, name: ast.expr) -> list[str]:
    """The class a name was built from, or each class of a choice (``net = CNN(...)`` in one
    branch, ``net = MLP(...)`` in the other: whichever the run picks is handed over)."""
    cls = built_from(facts, name)
    if cls:
        return [cls]
    values = facts.bindings.get(dotted(name) or "", [])
    found = [built_from(facts, v) for v in values if isinstance(v, ast.Call)]
    return sorted({c for c in found if c}) if found and all(found) else []


def _model_like(facts: Facts, node: ast.expr, built: set[str]) -> bool:
    """A name that holds a model, or a model built right there (``Net().cuda()``)."""
    if isinstance(node, ast.Name):
        return node.id in built
    if not isinstance(node, ast.Call):
        return False
    name = dotted(made_by(node))  # a first test, cheaper than ``built_from``
    if name is None or not class_like(name) or NOT_MODELS.search(name.rpartition(".")[2]):
        return False
    return built_from(facts, node) is not None
