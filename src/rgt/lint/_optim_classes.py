"""An optimizer class of the project whose ``zero_grad`` does not clear what it steps
(``RGT105``): its override never reaches a clear (ElasticDL's ``_DistributedOptimizer``
returned ``super().zero_grad()`` only after a ``raise``, so no call cleared anything), or it
owns an inner optimizer that its ``step`` steps and nothing in the class clears (KempnerForge's
``Muon`` forwarded ``step`` and ``state_dict`` to its AdamW ``self._adam``, not ``zero_grad``).
Every training loop that calls ``zero_grad`` on such an optimizer lets those gradients add up
over the whole run.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from rgt.lint._facts import Facts
from rgt.lint._model import Hit
from rgt.lint._nodes import dotted, method
from rgt.lint._tree import walk

JUMPS = (ast.Raise, ast.Return, ast.Continue, ast.Break)
# What clears a gradient: a call (``zero_grad``, ``p.grad.zero_()``, ``p.grad.detach_()``)
# or an assignment to ``.grad``.
CLEARS = ("zero_grad", "zero_", "detach_")
# Optimizer classes an attribute may hold (``torch.optim.AdamW(...)``, ``SGD(...)``).
MADE = ("torch.optim.", "optim.")
NAMES = ("Adam", "AdamW", "SGD", "RMSprop", "Adagrad", "Adadelta", "Adamax", "NAdam", "RAdam")


def optimizer_classes(facts: Facts) -> Iterator[Hit]:
    for cls in facts.classes:
        if not any((dotted(b) or "").endswith("Optimizer") for b in cls.bases):
            continue
        methods = {f.name: f for f in cls.body if isinstance(f, ast.FunctionDef)}
        zero = methods.get("zero_grad")
        if zero is not None and not _trivial(zero) and not _clears(zero.body):
            yield Hit("RGT105", zero, f"`{cls.name}.zero_grad` never reaches a clear")
        for call, held in _inner_steps(cls, methods):
            if not any(_clears_held(f, held) for f in methods.values()):
                detail = (f"`{cls.name}` steps the optimizer it holds in `{held}`, and nothing "
                          "in the class clears its gradients")  # fmt: skip
                yield Hit("RGT105", call, detail)


def misaligned_clears(facts: Facts) -> Iterator[Hit]:
    """An accumulation whose clear runs only when ``i % n == 1`` and whose step when
    ``i % n == 0`` (simple-nmt's ignite step): with ``n == 1`` (its default) the clear never
    runs, and every gradient adds onto all the earlier ones."""
    for zero in facts.methods_called("zero_grad"):
        around = facts.functions_around(zero)
        if not around:
            continue
        for test in _tests_around(facts, zero, around[0]):
            count = _counted(test)
            if count is None or count[1] < 1:
                continue
            steps = [c for c in facts.calls_in(around[0]) if method(c) == "step"]
            if any(_stepped_when(facts, c, around[0], count[0]) for c in steps):
                detail = (f"it runs only when `{ast.unparse(test)}`, never when "
                          f"`{count[0]}` is {count[1]} or less")  # fmt: skip
                yield Hit("RGT105", zero, detail)
                return


def _tests_around(facts: Facts, node: ast.AST, func: ast.AST) -> list[ast.expr]:
    return [i.test for i in facts.ifs if _within(i, func) and any(_within(node, s) for s in i.body)]


def _within(node: ast.AST, outer: ast.AST) -> bool:
    first, last = getattr(outer, "lineno", 0), getattr(outer, "end_lineno", 0) or 0
    return bool(first <= getattr(node, "lineno", -1) <= last)


def _counted(test: ast.expr) -> tuple[str, int] | None:
    """``i % n == k`` with ``n`` not a number written there: (``n`` as written, k)."""
    if not isinstance(test, ast.Compare) or len(test.ops) != 1:
        return None
    left, right = test.left, test.comparators[0]
    if not isinstance(test.ops[0], ast.Eq) or not isinstance(right, ast.Constant):
        return None
    if not isinstance(left, ast.BinOp) or not isinstance(left.op, ast.Mod):
        return None
    if isinstance(left.right, ast.Constant) or not isinstance(right.value, int):
        return None
    return ast.unparse(left.right), right.value


def _stepped_when(facts: Facts, step: ast.Call, func: ast.AST, divisor: str) -> bool:
    for test in _tests_around(facts, step, func):
        count = _counted(test)
        if count is not None and count == (divisor, 0):
            return True
    return False


def _trivial(func: ast.FunctionDef) -> bool:
    """A body that is only ``pass``/a docstring: a no-op chosen on purpose."""
    return all(isinstance(s, ast.Pass | ast.Expr) for s in func.body)


def _clears(block: list[ast.stmt]) -> bool:
    """Can a statement of ``block`` clear a gradient before a ``raise``/``return`` ends the
    block (a call after it never runs)?"""
    for statement in block:
        if isinstance(statement, JUMPS) and not _clearing(statement):
            return False
        nested = [getattr(statement, f, None) for f in ("body", "orelse", "finalbody")]
        nested += [h.body for h in getattr(statement, "handlers", [])]
        inner = [b for b in nested if isinstance(b, list)]
        if inner:
            if any(_clears(b) for b in inner) or _clearing(_head(statement)):
                return True
        elif _clearing(statement):
            return True
    return False


def _head(statement: ast.stmt) -> ast.AST:
    """The part of a compound statement that is not a block (an ``if``'s test)."""
    for field in ("test", "iter", "items", "value"):
        part = getattr(statement, field, None)
        if isinstance(part, ast.AST):
            return part
    return ast.Pass()


def _clearing(node: ast.AST) -> bool:
    for child in walk(node):
        if isinstance(child, ast.Call) and (dotted(child.func) or "").endswith(CLEARS):
            return True
        if isinstance(child, ast.Call) and method(child) in CLEARS:
            return True
        targets = child.targets if isinstance(child, ast.Assign) else []
        if any(isinstance(t, ast.Attribute) and t.attr == "grad" for t in targets):
            return True
    return False


def _inner_steps(
    cls: ast.ClassDef, methods: dict[str, ast.FunctionDef]
) -> Iterator[tuple[ast.Call, str]]:
    """``self.X.step()`` calls of the class, where ``self.X`` holds an optimizer it built."""
    held: set[str | None] = set()
    for node in walk(methods["__init__"]) if "__init__" in methods else ():
        if isinstance(node, ast.Assign) and _builds_optimizer(node.value):
            held |= {dotted(t) for t in node.targets if (dotted(t) or "").startswith("self.")}
    for func in methods.values() if held else ():
        for node in walk(func):
            if isinstance(node, ast.Call) and method(node) == "step":
                owner = dotted(node.func.value)  # type: ignore[attr-defined]
                if owner is not None and owner in held:
                    yield node, owner


def _builds_optimizer(value: ast.AST) -> bool:
    for node in walk(value):
        if isinstance(node, ast.Call):
            name = dotted(node.func) or ""
            if name.startswith(MADE) or name.rpartition(".")[2] in NAMES:
                return True
    return False


def _clears_held(func: ast.FunctionDef, held: str) -> bool:
    for node in walk(func):
        called = isinstance(node, ast.Call) and method(node) in CLEARS
        if called and dotted(node.func.value) == held:  # type: ignore[attr-defined]
            return True
    return False
