"""A clear that counts, a step that does not (``RGT105``): gradient accumulation whose
``optimizer.zero_grad()`` runs only under ``if i % n == 0`` while ``optimizer.step()`` runs
on every batch, in the same function or in a function of this module it then calls. Between
two clears each step applies the earlier batches' gradients again."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from rgt.lint._facts import LOOPS, Facts
from rgt.lint._model import Hit
from rgt.lint._nodes import dotted, local_name, method
from rgt.lint._tree import walk


def counted_clears(facts: Facts) -> Iterator[Hit]:
    for clear in facts.methods_called("zero_grad"):
        key = dotted(clear.func.value)  # type: ignore[attr-defined]
        guard = _counting_guard(facts, clear)
        around = facts.functions_around(clear)
        if key is None or guard is None or not around:
            continue
        func = around[0]
        step = _uncounted_step(facts, func, key, after=guard)
        if step is None or not _per_batch(facts, func, clear, step):
            continue
        line = step.lineno
        yield Hit(
            "RGT105",
            clear,
            f"`{key}.zero_grad()` runs only when the `if` at line {guard.lineno} counts, "
            f"but `{key}.step()` (line {line}) runs on every batch",
        )


def _counting_guard(facts: Facts, node: ast.AST) -> ast.If | None:
    """The innermost ``if`` around ``node`` whose test takes a remainder (``i % n == 0``)."""
    found = [
        i
        for i in facts.ifs
        if _inside(node, i) and any(_inside(node, s) for s in i.body) and _remainder(i.test)
    ]
    return found[-1] if found else None


def _remainder(test: ast.AST) -> bool:
    return any(isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mod) for n in walk(test))


def _uncounted_step(facts: Facts, func: ast.AST, key: str, after: ast.If) -> ast.Call | None:
    """``key.step()`` after the guard in ``func`` under no counting ``if``, or in a function
    of this module that ``func`` then calls (``self.update(...)``), unguarded in both."""
    end = getattr(after, "end_lineno", 0) or 0
    for call in facts.calls_in(func):
        if call.lineno <= end or _counting_guard(facts, call) is not None:
            continue
        if _plain_step(call, key):
            return call
        name = local_name(call)
        callee = next((f for f in facts.functions if f.name == name), None) if name else None
        if callee is not None and callee is not func:
            for inner in facts.calls_in(callee):
                if _plain_step(inner, key) and _counting_guard(facts, inner) is None:
                    return inner
    return None


def _plain_step(call: ast.Call, key: str) -> bool:
    return (
        method(call) == "step"
        and not call.args
        and not call.keywords
        and dotted(call.func.value) == key  # type: ignore[attr-defined]
    )


def _per_batch(facts: Facts, func: ast.AST, clear: ast.Call, step: ast.Call) -> bool:
    """Do the clear and the step run once a batch: in one loop of ``func``, or ``func`` is
    called from a loop of this module?"""
    loop = next((o for o in facts.around(clear) if isinstance(o, LOOPS)), None)
    if loop is not None and _inside(loop, func):
        return _inside(step, loop) or not _inside(step, func)
    name = getattr(func, "name", "")
    return any(any(isinstance(o, LOOPS) for o in facts.around(c)) for c in facts.callers(name))


def _inside(node: ast.AST, outer: ast.AST) -> bool:
    start = (getattr(outer, "lineno", 0), getattr(outer, "col_offset", 0))
    end = (getattr(outer, "end_lineno", 0), getattr(outer, "end_col_offset", 0))
    return start <= (getattr(node, "lineno", 0), getattr(node, "col_offset", 0)) <= end
