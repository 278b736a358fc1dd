"""What every rule asks of a module: resolved call names, bindings, loops and function scopes.

Real training code spells one thing many ways: ``F.cross_entropy`` after ``import
torch.nn.functional as F``, ``nn.CrossEntropyLoss()`` stored in ``self.criterion`` in ``__init__``
and called in ``training_step``, ``from torch.optim import Adam``. ``Facts`` resolves import
aliases once, so a rule compares full names (``torch.nn.functional.cross_entropy``), and keeps
where each name and ``self.attribute`` is bound, so a rule can follow a value one step.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field

Scope = ast.FunctionDef | ast.AsyncFunctionDef | ast.Module


def dotted(node: ast.AST) -> str | None:
    """``a.b.c`` for a chain of names and attributes, else None (calls, subscripts...)."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def method(call: ast.AST) -> str | None:
    """The method name of ``anything.name(...)``, else None."""
    if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute):
        return call.func.attr
    return None


def keyword(call: ast.Call, name: str) -> ast.expr | None:
    for kw in call.keywords:
        if kw.arg == name:
            return kw.value
    return None


def constant(node: ast.AST | None) -> object:
    """The literal value of a constant node (``-1`` too), else the ``NOT_CONSTANT`` marker."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = constant(node.operand)
        if isinstance(inner, int | float) and not isinstance(inner, bool):
            return -inner
    return NOT_CONSTANT


NOT_CONSTANT = object()
MOVES = {"to", "cuda", "cpu", "float", "half", "double", "bfloat16", "train", "eval"}


@dataclass
class Facts:
    """One parsed module, its aliases and bindings; built once, read by every rule."""

    tree: ast.Module
    aliases: dict[str, str] = field(default_factory=dict)
    bindings: dict[str, list[ast.expr]] = field(default_factory=lambda: defaultdict(list))
    parents: dict[ast.AST, ast.AST] = field(default_factory=dict)
    calls: list[ast.Call] = field(default_factory=list)
    _words: set[str] | None = field(default=None, repr=False)

    @classmethod
    def build(cls, tree: ast.Module) -> Facts:
        facts = cls(tree)
        for node in ast.walk(tree):
            for child in ast.iter_child_nodes(node):
                facts.parents[child] = node
            facts._note(node)
        return facts

    def _note(self, node: ast.AST) -> None:
        if isinstance(node, ast.Import):
            for alias in node.names:
                local = alias.asname or alias.name.split(".")[0]
                self.aliases[local] = alias.name if alias.asname else local
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                self.aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
        elif isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                key = dotted(target)
                if key is not None:
                    self.bindings[key].append(node.value)
        elif isinstance(node, ast.Call):
            self.calls.append(node)

    def qualname(self, node: ast.AST) -> str | None:
        """``F.softmax`` → ``torch.nn.functional.softmax`` (import aliases resolved)."""
        name = dotted(node)
        if name is None:
            return None
        head, _, rest = name.partition(".")
        full = self.aliases.get(head, head)
        return f"{full}.{rest}" if rest else full

    def call_name(self, call: ast.AST) -> str | None:
        return self.qualname(call.func) if isinstance(call, ast.Call) else None

    def construction(self, value: ast.AST) -> str | None:
        """The class or function a value was made by: ``Net().to(device)`` → ``Net``."""
        while (
            isinstance(value, ast.Call)
            and isinstance(value.func, ast.Attribute)
            and value.func.attr in MOVES
            and isinstance(value.func.value, ast.Call)
        ):
            value = value.func.value
        return self.call_name(value)

    def bound_calls(self, key: str) -> list[str]:
        """The full names of the calls a name (or ``self.attr``) was bound to, in any scope."""
        names = [self.construction(value) for value in self.bindings.get(key, [])]
        return [n for n in names if n]

    def is_instance_of(self, node: ast.AST, classes: tuple[str, ...]) -> bool:
        """Is ``node`` a name bound only to constructions of ``classes`` (last name part)?"""
        key = dotted(node)
        if key is None:
            return False
        names = [self.construction(v) for v in self.bindings.get(key, [])]
        return bool(names) and all(n is not None and n.rsplit(".", 1)[-1] in classes for n in names)

    def scope_of(self, node: ast.AST) -> Scope:
        parent = self.parents.get(node)
        while parent is not None:
            if isinstance(parent, ast.FunctionDef | ast.AsyncFunctionDef):
                return parent
            parent = self.parents.get(parent)
        return self.tree

    def ancestors(self, node: ast.AST) -> Iterator[ast.AST]:
        parent = self.parents.get(node)
        while parent is not None:
            yield parent
            parent = self.parents.get(parent)

    def methods_called(self, name: str) -> list[ast.Call]:
        return [c for c in self.calls if method(c) == name]

    def mentions(self, word: str) -> bool:
        """Does any name, attribute or called method spell ``word``?"""
        return word in self.words

    @property
    def words(self) -> set[str]:
        cached = self._words
        if cached is None:
            cached = set()
            for node in ast.walk(self.tree):
                if isinstance(node, ast.Name):
                    cached.add(node.id)
                elif isinstance(node, ast.Attribute):
                    cached.add(node.attr)
                elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    cached.add(node.name)
                elif isinstance(node, ast.keyword) and node.arg:
                    cached.add(node.arg)
                elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                    if node.value.startswith("cuda"):  # torch.device("cuda:0")
                        cached.add("cuda")
            self._words = cached
        return cached


def loops(scope: ast.AST) -> Iterator[ast.For | ast.While | ast.AsyncFor]:
    for node in ast.walk(scope):
        if isinstance(node, ast.For | ast.While | ast.AsyncFor):
            yield node


def functions(tree: ast.AST) -> Iterator[ast.FunctionDef | ast.AsyncFunctionDef]:
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield node


def calls_in(node: ast.AST) -> Iterator[ast.Call]:
    for child in ast.walk(node):
        if isinstance(child, ast.Call):
            yield child
