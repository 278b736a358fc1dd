"""Which class's method ``self.name(...)`` runs: a method of a base class calls ``self.forward``
and ``self.loss_of(...)``, and a subclass defined in the same module overrides either (a model
whose subclass ends ``forward`` in a softmax and overrides the loss method with
``CrossEntropyLoss``, the training step left to the base class). Followed 3 levels, within the
module."""

from __future__ import annotations

import ast

from rgt.lint._facts import Facts
from rgt.lint._nodes import dotted


def subclasses(facts: Facts, name: str) -> list[ast.ClassDef]:
    """The classes here that derive from ``name`` (3 levels down), not ``name`` itself."""
    found: list[ast.ClassDef] = []
    wanted = {name}
    for _ in range(3):
        new = [c for c in facts.classes if c not in found and _derives(c, wanted)]
        if not new:
            break
        found += new
        wanted |= {c.name for c in new}
    return found


def _derives(cls: ast.ClassDef, names: set[str]) -> bool:
    """Does ``cls`` name one of ``names`` among its bases (not itself)?"""
    bases = {(dotted(b) or "").rpartition(".")[2] for b in cls.bases}
    return cls.name not in names and bool(bases & names)


def defining(facts: Facts, cls: ast.ClassDef, method: str) -> ast.ClassDef | None:
    """The class here (``cls`` or a base, 3 levels up) whose body defines ``method``."""
    by_name = {c.name: c for c in facts.classes}
    current: ast.ClassDef | None = cls
    for _ in range(4):
        if current is None:
            return None
        if any(getattr(f, "name", "") == method for f in current.body):
            return current
        bases = [(dotted(b) or "").rpartition(".")[2] for b in current.bases]
        current = next((by_name[b] for b in bases if b in by_name), None)
    return None


def holder(facts: Facts, line: int) -> ast.ClassDef | None:
    """The innermost class here whose body spans ``line``."""
    around = [c for c in facts.classes if c.lineno <= line <= (c.end_lineno or 0)]
    return around[-1] if around else None
