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
from bisect import bisect_left
from collections import defaultdict
from dataclasses import dataclass, field

from rgt.lint._nodes import bound_names, dotted
from rgt.lint._spans import Spans, end, position, start

Scope = ast.FunctionDef | ast.AsyncFunctionDef | ast.Module


SUITE_FOLDERS = frozenset({"test", "tests"})
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
    calls: list[ast.Call] = field(default_factory=list)
    loops: list[ast.For | ast.While | ast.AsyncFor] = field(default_factory=list)
    functions: list[ast.FunctionDef | ast.AsyncFunctionDef] = field(default_factory=list)
    classes: list[ast.ClassDef] = field(default_factory=list)
    ifs: list[ast.If] = field(default_factory=list)
    returns: list[ast.Return] = field(default_factory=list)
    augmented: list[ast.AugAssign] = field(default_factory=list)
    _keys: dict[str, list[tuple[int, int]]] = field(default_factory=dict)  # positions, sorted
    withs: list[ast.With] = field(default_factory=list)
    _function_spans: Spans = field(default_factory=lambda: Spans([]))
    _block_spans: Spans = field(default_factory=lambda: Spans([]))
    _assignments: dict[int, ast.Assign] = field(default_factory=dict)  # id(value) → statement
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
        AST, fields, leaves, push = ast.AST, _CHILD_FIELDS, LEAVES, stack.append
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
                        if type(child) not in leaves and isinstance(child, AST):
                            push(child)
                elif type(value) not in leaves and isinstance(value, AST):
                    push(value)
            if kind in NOTED_TYPES:
                facts._note(node)
                if kind in BIND_TYPES:
                    binds.append(node)  # type: ignore[arg-type]  # BIND_TYPES are statements
        facts.augmented = [n for n in binds if isinstance(n, ast.AugAssign)]
        for found in (
            facts.calls, facts.loops, facts.functions, facts.classes, facts.ifs, facts.returns,
            facts.augmented,
        ):  # fmt: skip
            found.sort(key=position)
        for name in ("calls", "loops", "returns", "augmented"):
            facts._keys[name] = [position(n) for n in getattr(facts, name)]
        facts._function_spans = Spans(facts.functions)
        facts._block_spans = Spans([*facts.functions, *facts.loops, *facts.withs])
        for call in facts.calls:
            if isinstance(call.func, ast.Attribute):
                facts._by_method[call.func.attr].append(call)
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
            if isinstance(node, ast.Assign):
                self._assignments[id(node.value)] = node
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
        elif isinstance(node, ast.With):
            self.withs.append(node)

    def calls_in(self, node: ast.AST) -> list[ast.Call]:
        """Every call inside ``node`` (a loop, a function, the module: in source order; any
        other node: in ``ast.walk`` order)."""
        if isinstance(node, CONTAINERS):
            return self._within("calls", node)  # type: ignore[return-value]
        return [n for n in ast.walk(node) if isinstance(n, ast.Call)]

    def loops_in(self, node: ast.AST) -> list[ast.For | ast.While | ast.AsyncFor]:
        """The loops inside ``node`` (a loop, a function or the module), not ``node`` itself."""
        return [n for n in self._within("loops", node) if n is not node]  # type: ignore[misc]

    def returns_in(self, function: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ast.Return]:
        """The ``return`` statements inside a function (nested functions' too)."""
        return self._within("returns", function)  # type: ignore[return-value]

    def augmented_in(self, node: ast.AST) -> list[ast.AugAssign]:
        return self._within("augmented", node)  # type: ignore[return-value]

    def _within(self, kind: str, node: ast.AST) -> list[ast.AST]:
        """The nodes of a kind (``calls``...) inside a container, by position: a syntax tree's
        spans nest, so its descendants are exactly the nodes that start within its span."""
        if isinstance(node, ast.Module):
            return list(getattr(self, kind))
        if not isinstance(node, CONTAINERS):
            return []
        keys = self._keys[kind]
        first = bisect_left(keys, start(node))
        last = bisect_left(keys, end(node), first)
        return getattr(self, kind)[first:last]  # type: ignore[no-any-return]

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
        name = self._names.get(id(call), _UNKNOWN)
        if name is _UNKNOWN:  # the hot path above: rules ask for every call's name
            name = self.qualname(call.func) if isinstance(call, ast.Call) else None
            self._names[id(call)] = name
        return name  # type: ignore[return-value]

    def callers(self, name: str) -> list[ast.Call]:
        """The calls of ``name(...)`` or ``self.name(...)``, in source order."""
        index = self.memo.get("callers")
        if not isinstance(index, dict):
            by_name: dict[str | None, list[ast.Call]] = {}
            for call in self.calls:
                by_name.setdefault(dotted(call.func), []).append(call)
            self.memo["callers"] = index = by_name
        return sorted(index.get(name, []) + index.get(f"self.{name}", []), key=position)

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
        """The innermost function around ``node`` (its decorators and defaults included), or
        the module."""
        if node is self.tree or not hasattr(node, "lineno"):
            return self.tree
        return self._function_spans.around(node) or self.tree  # type: ignore[return-value]

    def around(self, node: ast.AST) -> list[ast.AST]:
        """The loops, ``with`` blocks and functions around ``node``, innermost first."""
        return self._block_spans.chain(node)  # type: ignore[return-value]

    def assignment_of(self, value: ast.AST) -> ast.Assign | None:
        """The ``x = value`` statement whose whole value ``value`` is, if any."""
        return self._assignments.get(id(value))

    def in_suite_test(self, node: ast.AST) -> bool:
        """Is ``node`` part of a test suite rather than training code: anywhere in a
        ``test_*.py``/``*_test.py`` module that imports pytest or unittest or sits in a
        ``test``/``tests`` folder, or in a ``test_*``
        function there that takes no arguments or one of pytest's own fixtures, or in any
        module right in such a folder (``suite_helper``)? (A ``test_net.py`` evaluation
        script's ``def test_net(cfg, model)`` is checked.)"""
        name = os.path.basename(self.path)
        if not _suite_file(name):
            return suite_helper(self.path)
        if any(full.split(".")[0] in ("pytest", "unittest") for full in self.aliases.values()):
            return True
        folders = set(os.path.normpath(os.path.dirname(self.path)).split(os.sep))
        if folders & SUITE_FOLDERS:  # pytorch_geometric's test/transforms/test_to_device.py
            return True
        for outer in [node, *self._function_spans.chain(node)]:
            if isinstance(outer, ast.FunctionDef | ast.AsyncFunctionDef) and outer.name.startswith(
                "test_"
            ):
                params = {a.arg for a in outer.args.posonlyargs + outer.args.args}
                if not params or params & PYTEST_FIXTURES:
                    return True
        return False

    def methods_called(self, name: str) -> list[ast.Call]:
        """Calls ``anything.name(...)`` in the module, in source order."""
        return list(self._by_method.get(name, ()))


_UNKNOWN = object()


def _suite_file(name: str) -> bool:
    return name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py"))


def suite_helper(path: str) -> bool:
    """A module right in a ``test``/``tests`` folder: a suite's helper (fairseq's
    ``tests/utils.py`` builds tiny CPU loaders for its tests, which no throughput advice
    concerns). Decided by the path alone, which the cache's key holds."""
    return bool(path) and os.path.basename(os.path.dirname(os.path.abspath(path))) in SUITE_FOLDERS
