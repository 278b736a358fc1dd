"""What every rule asks of a module: resolved call names, bindings, loops and function scopes.

Real training code spells one thing many ways: ``F.cross_entropy`` after ``import
torch.nn.functional as F``, ``nn.CrossEntropyLoss()`` stored in ``self.criterion`` in ``__init__``
and called in ``training_step``, ``from torch.optim import Adam``. ``Facts`` resolves import
aliases once, so a rule compares full names (``torch.nn.functional.cross_entropy``), and keeps
where each name and ``self.attribute`` is bound, so a rule can follow a value one step.
"""

from __future__ import annotations

import ast
import os
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field

from rgt.lint._nodes import bound_names, dotted

Scope = ast.FunctionDef | ast.AsyncFunctionDef | ast.Module


PYTEST_FIXTURES = {"tmp_path", "tmpdir", "monkeypatch", "capsys", "capfd", "caplog", "request"}
MOVES = {"to", "cuda", "cpu", "float", "half", "double", "bfloat16", "train", "eval"}


# Fields that never hold a node: names and constants, Load/Store contexts and operators (a
# third of all nodes). A node type's other fields are looked at (``_child_fields``).
NOT_CHILDREN = frozenset(
    {"ctx", "op", "ops", "id", "attr", "arg", "name", "kind", "module", "level", "asname",
     "type_comment", "is_async", "conversion", "simple"}
)  # fmt: skip
_CHILD_FIELDS: dict[type, tuple[str, ...]] = {ast.Constant: ()}
LEAVES = frozenset({ast.Name, ast.Constant})  # a third of all nodes: parented, never pushed


def _child_fields(kind: type) -> tuple[str, ...]:
    return tuple(f for f in getattr(kind, "_fields", ()) if f not in NOT_CHILDREN)


CONTAINERS = (ast.For, ast.While, ast.AsyncFor, ast.FunctionDef, ast.AsyncFunctionDef, ast.Module)
LOOPS = (ast.For, ast.While, ast.AsyncFor)
BINDS = (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.For, ast.With)
NOTED = (
    ast.Import,
    ast.ImportFrom,
    ast.Assign,
    ast.AnnAssign,
    ast.AugAssign,
    ast.Call,
    ast.For,
    ast.While,
    ast.AsyncFor,
    ast.FunctionDef,
    ast.AsyncFunctionDef,
    ast.ClassDef,
    ast.If,
    ast.With,
    ast.Return,
)
NOTED_TYPES = frozenset(NOTED)
BIND_TYPES = frozenset(BINDS)


@dataclass
class Facts:
    """One parsed module, walked once: aliases, bindings, and for every loop and function the
    calls, augmented assignments and loops inside it (rules never walk a subtree again)."""

    tree: ast.Module
    path: str = ""  # the file's, as given
    aliases: dict[str, str] = field(default_factory=dict)
    bindings: dict[str, list[ast.expr]] = field(default_factory=lambda: defaultdict(list))
    parents: dict[ast.AST, ast.AST] = field(default_factory=dict)
    calls: list[ast.Call] = field(default_factory=list)
    loops: list[ast.For | ast.While | ast.AsyncFor] = field(default_factory=list)
    functions: list[ast.FunctionDef | ast.AsyncFunctionDef] = field(default_factory=list)
    classes: list[ast.ClassDef] = field(default_factory=list)
    ifs: list[ast.If] = field(default_factory=list)
    returns: list[ast.Return] = field(default_factory=list)
    _inside: dict[int, list[ast.AST]] = field(default_factory=lambda: defaultdict(list))
    _scopes: dict[int, Scope] = field(default_factory=dict)
    _names: dict[int, str | None] = field(default_factory=dict)
    _by_method: dict[str, list[ast.Call]] = field(default_factory=lambda: defaultdict(list))
    memo: dict[str, object] = field(default_factory=dict)  # a rule's per-module answers
    _values: dict[tuple[int, str], list[tuple[int, ast.AST | None]]] = field(
        default_factory=lambda: defaultdict(list)
    )

    @classmethod
    def build(cls, tree: ast.Module, path: str = "") -> Facts:
        facts = cls(tree, path)
        binds: list[ast.stmt] = []
        stack: list[ast.AST] = [tree]
        parents, AST, fields, leaves = facts.parents, ast.AST, _CHILD_FIELDS, LEAVES
        while stack:  # one pass over the tree (iter_child_nodes inlined: it is the hot loop)
            node = stack.pop()
            kind = type(node)
            names = fields.get(kind)
            if names is None:
                names = fields[kind] = _child_fields(kind)
            for name in names:
                value = getattr(node, name, None)
                if type(value) is list:
                    for child in value:
                        if isinstance(child, AST):
                            parents[child] = node
                            if type(child) not in leaves:
                                stack.append(child)
                elif isinstance(value, AST):
                    parents[value] = node
                    if type(value) not in leaves:
                        stack.append(value)
            if kind in NOTED_TYPES:
                facts._note(node)
                if kind in BIND_TYPES:
                    binds.append(node)  # type: ignore[arg-type]  # BIND_TYPES are statements
        for found in (facts.calls, facts.loops, facts.functions, facts.classes, facts.ifs):
            found.sort(key=_position)
        for call in facts.calls:
            if isinstance(call.func, ast.Attribute):
                facts._by_method[call.func.attr].append(call)
        for node in [
            *facts.calls,
            *facts.loops,
            *(n for n in binds if isinstance(n, ast.AugAssign)),
            *facts.returns,
        ]:
            for outer in facts.ancestors(node):
                if isinstance(outer, CONTAINERS):
                    facts._inside[id(outer)].append(node)
        for node in binds:
            scope = id(facts.scope_of(node))
            for name, value in bound_names(node).items():
                facts._values[(scope, name)].append((node.lineno, value))
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
        elif isinstance(node, LOOPS):
            self.loops.append(node)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            self.functions.append(node)
        elif isinstance(node, ast.ClassDef):
            self.classes.append(node)
        elif isinstance(node, ast.If):
            self.ifs.append(node)
        elif isinstance(node, ast.Return):
            self.returns.append(node)

    def calls_in(self, node: ast.AST) -> list[ast.Call]:
        """Every call inside ``node`` (a loop, a function, the module, or any other node)."""
        if isinstance(node, CONTAINERS):
            return [n for n in self._inside.get(id(node), []) if isinstance(n, ast.Call)]
        return [n for n in ast.walk(node) if isinstance(n, ast.Call)]

    def loops_in(self, node: ast.AST) -> list[ast.For | ast.While | ast.AsyncFor]:
        """The loops inside ``node`` (a loop, a function or the module), not ``node`` itself."""
        inner = self._inside.get(id(node), [])
        return [n for n in inner if isinstance(n, LOOPS)]

    def returns_in(self, function: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ast.Return]:
        """The ``return`` statements inside a function (nested functions' too)."""
        return [n for n in self._inside.get(id(function), []) if isinstance(n, ast.Return)]

    def augmented_in(self, node: ast.AST) -> list[ast.AugAssign]:
        return [n for n in self._inside.get(id(node), []) if isinstance(n, ast.AugAssign)]

    def last_value(self, scope: ast.AST, name: str, before: int) -> ast.AST | None:
        """The value last bound to ``name`` in ``scope`` before line ``before`` (None: unknown
        or not one plain value)."""
        best: tuple[int, ast.AST | None] = (-1, None)
        for line, value in self._values.get((id(scope), name), []):
            if best[0] <= line < before:
                best = (line, value)
        return best[1]

    def qualname(self, node: ast.AST) -> str | None:
        """``F.softmax`` → ``torch.nn.functional.softmax`` (import aliases resolved)."""
        name = dotted(node)
        if name is None:
            return None
        head, _, rest = name.partition(".")
        full = self.aliases.get(head, head)
        return f"{full}.{rest}" if rest else full

    def call_name(self, call: ast.AST) -> str | None:
        if not isinstance(call, ast.Call):
            return None
        key = id(call)
        if key not in self._names:
            self._names[key] = self.qualname(call.func)
        return self._names[key]

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
        cached = self._scopes.get(id(node))
        if cached is None:
            cached = self.tree
            for parent in self.ancestors(node):
                if isinstance(parent, ast.FunctionDef | ast.AsyncFunctionDef):
                    cached = parent
                    break
            self._scopes[id(node)] = cached
        return cached

    def ancestors(self, node: ast.AST) -> Iterator[ast.AST]:
        parent = self.parents.get(node)
        while parent is not None:
            yield parent
            parent = self.parents.get(parent)

    def in_suite_test(self, node: ast.AST) -> bool:
        """Is ``node`` part of a test suite rather than training code: anywhere in a
        ``test_*.py``/``*_test.py`` module that imports pytest or unittest or sits in a
        ``test``/``tests`` folder, or in a ``test_*``
        function there that takes no arguments or one of pytest's own fixtures? (A
        ``test_net.py`` evaluation script's ``def test_net(cfg, model)`` is checked.)"""
        name = os.path.basename(self.path)
        suite_file = name.endswith(".py") and (
            name.startswith("test_") or name.endswith("_test.py")
        )
        if not suite_file:
            return False
        if any(full.split(".")[0] in ("pytest", "unittest") for full in self.aliases.values()):
            return True
        folders = set(os.path.normpath(os.path.dirname(self.path)).split(os.sep))
        if folders & {"test", "tests"}:  # pytorch_geometric's test/transforms/test_to_device.py
            return True
        outer: ast.AST | None = node
        while outer is not None:
            if isinstance(outer, ast.FunctionDef | ast.AsyncFunctionDef) and outer.name.startswith(
                "test_"
            ):
                params = {a.arg for a in outer.args.posonlyargs + outer.args.args}
                if not params or params & PYTEST_FIXTURES:
                    return True
            outer = self.parents.get(outer)
        return False

    def methods_called(self, name: str) -> list[ast.Call]:
        """Calls ``anything.name(...)`` in the module, in source order."""
        return list(self._by_method.get(name, ()))


def _position(node: ast.AST) -> tuple[int, int]:
    return getattr(node, "lineno", 0), getattr(node, "col_offset", 0)
