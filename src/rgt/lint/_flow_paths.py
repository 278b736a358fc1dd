"""The part of a module's summary (``_cross``) about where its imports lead: the folders a
script or a helper (CenterNet's ``_init_paths.py``) puts on ``sys.path``."""

from __future__ import annotations

import ast
import os

from rgt.lint._facts import Facts
from rgt.lint._flow import params


def sys_paths(facts: Facts) -> list[str]:
    """Folders a script puts on ``sys.path`` (``sys.path.insert(0, osp.join(this_dir, "lib"))``),
    as absolute paths: its own imports then resolve there too."""
    out = []
    for call in facts.calls_ending(lambda last: last in ("insert", "append")):
        if not (facts.call_name(call) or "").startswith("sys.path.") or not call.args:
            continue
        for value in _path_args(facts, call.args[-1]):
            where = _path_value(facts, value, 0)
            if where:
                out.append(os.path.normpath(where))
    return out


def _path_args(facts: Facts, node: ast.expr) -> list[ast.expr]:
    """The value given to ``sys.path.insert``; for a helper's parameter
    (``def add_path(path): sys.path.insert(0, path)``), what its callers here pass."""
    around = facts.functions_around(node)
    if not isinstance(node, ast.Name) or not around or node.id not in params(around[0]):
        return [node]
    index = params(around[0]).index(node.id)
    calls = facts.callers(around[0].name)
    return [c.args[index] for c in calls if len(c.args) > index]


def _path_value(facts: Facts, node: ast.AST, depth: int) -> str | None:
    """A path expression's value, when it is built from ``__file__`` and constants."""
    here = os.path.dirname(os.path.abspath(facts.path))
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return os.path.join(here, node.value)
    if isinstance(node, ast.Name):
        if node.id == "__file__":
            return os.path.abspath(facts.path)
        values = facts.bindings.get(node.id, [])
        return _path_value(facts, values[-1], depth + 1) if values and depth < 4 else None
    if not isinstance(node, ast.Call) or depth > 6:
        return None
    last = (facts.call_name(node) or "").rpartition(".")[2]
    parts = [_path_value(facts, a, depth + 1) for a in node.args]
    if last in ("dirname", "abspath", "realpath", "normpath") and len(parts) == 1 and parts[0]:
        return os.path.dirname(parts[0]) if last == "dirname" else parts[0]
    if last == "join" and parts and all(parts):
        tail = [a.value for a in node.args[1:] if isinstance(a, ast.Constant)]
        return os.path.join(parts[0], *tail) if len(tail) == len(parts) - 1 else None  # type: ignore[arg-type]
    return None
