"""What every rule asks of a module: resolved call names, bindings, loops and function scopes.

Real training code spells one thing many ways: ``F.cross_entropy`` after ``import
torch.nn.functional as F``, ``nn.CrossEntropyLoss()`` stored in ``self.criterion`` in ``__init__``
and called in ``training_step``, ``from torch.optim import Adam``. ``Facts`` resolves import
aliases once, so a rule compares full names (``torch.nn.functional.cross_entropy``), and keeps
where each name and ``self.attribute`` is bound, so a rule can follow a value one step.
"""

from __future__ import annotations

import ast
from bisect import bisect_left
from collections import defaultdict
from collections.abc import Callable, Iterable
from operator import attrgetter

from rgt.lint._facts_index import Binding, bindings_by_name, call_names
from rgt.lint._nodes import dotted
from rgt.lint._spans import Spans, end, position, start
from rgt.lint._tree import BIND_TYPES, nodes, walk

Scope = ast.FunctionDef | ast.AsyncFunctionDef | ast.Module

MOVES = {"to", "cuda", "cpu", "float", "half", "double", "bfloat16", "train", "eval"}
CONTAINERS = (ast.For, ast.While, ast.AsyncFor, ast.FunctionDef, ast.AsyncFunctionDef, ast.Module)
LOOPS = (ast.For, ast.While, ast.AsyncFor)


class Facts:
    """One parsed module, walked once: aliases, bindings, and for every loop and function the
    calls, augmented assignments and loops inside it (rules never walk a subtree again). A
    plain class: a dataclass of this many fields costs ~3 ms to define, on every start-up."""

    def __init__(self, tree: ast.Module, path: str = "") -> None:
        self.tree = tree
        self.path = path  # the file's, as given
        self.aliases: dict[str, str] = {}
        self.bindings: dict[str, list[ast.expr]] = defaultdict(list)
        self.calls: list[ast.Call] = []
        self.loops: list[ast.For | ast.While | ast.AsyncFor] = []
        self.functions: list[ast.FunctionDef | ast.AsyncFunctionDef] = []
        self.classes: list[ast.ClassDef] = []
        self.ifs: list[ast.If] = []
        self.returns: list[ast.Return] = []
        self.augmented: list[ast.AugAssign] = []
        self.withs: list[ast.With] = []
        self.imports: list[ast.Import | ast.ImportFrom] = []  # at any depth, in walk order
        self.memo: dict[str, object] = {}  # a rule's per-module answers
        self._keys: dict[str, list[tuple[int, int]]] = {}  # positions, sorted
        self._function_spans = Spans([])
        self._block_spans = Spans([])
        self._assignments: dict[int, ast.Assign] = {}  # id(value) → statement
        self._names: dict[int, str | None] = {}  # id(call) → full name
        self._by_last: dict[str, list[int]] = defaultdict(list)  # indices in ``calls``
        self._by_function: dict[str, list[ast.Call]] = defaultdict(list)  # ``name(...)``
        self._by_method: dict[str, list[ast.Call]] = defaultdict(list)
        self._binds: list[ast.stmt] = []  # statements that bind names, in walk order
        # name → (statement, line, value) of each binding (``last_value``), made when first
        # asked; each statement's scope (``_scope_ids``) is worked out only if asked about.
        self._named: dict[str, list[Binding]] | None = None
        self._scope_ids: dict[int, int] = {}
        # id(container) → its start, end and itself (kept, so that the id is not reused)
        self._spans: dict[int, tuple[tuple[int, int], tuple[int, int], ast.AST]] = {}

    @classmethod
    def build(cls, tree: ast.Module, path: str = "") -> Facts:
        facts = cls(tree, path)
        calls, noted = nodes(tree)
        facts.calls = calls
        binds = facts._sort_noted(noted)
        facts.augmented = [n for n in binds if type(n) is ast.AugAssign]  # type: ignore[misc]
        for found in (
            facts.calls, facts.loops, facts.functions, facts.classes, facts.ifs, facts.returns,
            facts.augmented,
        ):  # fmt: skip
            found.sort(key=_POSITION)
        for name in ("calls", "loops", "returns", "augmented"):
            facts._keys[name] = list(map(_POSITION, getattr(facts, name)))
        facts._function_spans = Spans(facts.functions)
        facts._block_spans = Spans([*facts.functions, *facts.loops, *facts.withs])
        facts._names, facts._by_last, facts._by_function, facts._by_method = call_names(
            facts.calls, facts.aliases
        )
        facts._binds = binds
        return facts

    def _sort_noted(self, noted: list[ast.AST]) -> list[ast.stmt]:
        """Each noted statement into its list (imports and assignments noted as bindings and
        aliases); the statements that bind names, in walk order."""
        binds: list[ast.stmt] = []
        kept: dict[type, list] = {  # type: ignore[type-arg]  # each list holds its own kinds
            ast.For: self.loops, ast.While: self.loops, ast.AsyncFor: self.loops,
            ast.FunctionDef: self.functions, ast.AsyncFunctionDef: self.functions,
            ast.ClassDef: self.classes, ast.If: self.ifs, ast.Return: self.returns,
            ast.With: self.withs,
        }  # fmt: skip
        get, note, bind, bind_types = kept.get, self._note, binds.append, BIND_TYPES
        Assign, bindings, assignments = ast.Assign, self.bindings, self._assignments
        for node in noted:
            kind = type(node)
            found = get(kind)
            if found is not None:
                found.append(node)
            elif kind is Assign:  # most noted statements: the common case inline
                value = node.value  # type: ignore[attr-defined]
                for target in node.targets:  # type: ignore[attr-defined]
                    key = dotted(target)
                    if key is not None:
                        bindings[key].append(value)
                assignments[id(value)] = node  # type: ignore[assignment]
            else:
                note(node)  # other assignments and imports
            if kind in bind_types:
                bind(node)  # type: ignore[arg-type]  # BIND_TYPES are statements
        return binds

    def assignment_statements(self) -> Iterable[ast.Assign]:
        """Every ``=`` statement of the module, at any depth (no walk: noted when built)."""
        return self._assignments.values()

    def calls_ending(self, last: Callable[[str], bool]) -> list[ast.Call]:
        """The calls whose full name's last part passes ``last`` (``DataLoader``,
        ``cross_entropy`` after ``from torch.nn.functional import cross_entropy as ce``), in
        source order; each distinct last part is asked once."""
        found = [i for part, at in self._by_last.items() if last(part) for i in at]
        return [self.calls[i] for i in sorted(found)]

    def _note(self, node: ast.AST) -> None:
        """An assignment's bindings, or an import's aliases."""
        if isinstance(node, ast.Assign | ast.AnnAssign):
            if node.value is None:
                return
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                key = dotted(target)
                if key is not None:
                    self.bindings[key].append(node.value)
            if isinstance(node, ast.Assign):
                self._assignments[id(node.value)] = node
        elif isinstance(node, ast.Import):
            self.imports.append(node)
            for alias in node.names:
                local = alias.asname or alias.name.split(".")[0]
                self.aliases[local] = alias.name if alias.asname else local
        elif isinstance(node, ast.ImportFrom):
            self.imports.append(node)
            if not node.module or node.level:
                return
            for alias in node.names:
                self.aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"

    def calls_in(self, node: ast.AST) -> list[ast.Call]:
        """Every call inside ``node`` (a loop, a function, the module: in source order; any
        other node: in ``ast.walk`` order)."""
        if isinstance(node, CONTAINERS):
            return self._within("calls", node)  # type: ignore[return-value]
        return [n for n in walk(node) if isinstance(n, ast.Call)]

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
        spans nest, so its descendants are exactly the nodes that start within its span (each
        container's span worked out once: the rules ask about the same loops many times)."""
        span = self._spans.get(id(node))
        if span is None:
            if isinstance(node, ast.Module):
                return list(getattr(self, kind))
            if not isinstance(node, CONTAINERS):
                return []
            span = self._spans[id(node)] = (start(node), end(node), node)
        keys = self._keys[kind]
        first = bisect_left(keys, span[0])
        last = bisect_left(keys, span[1], first)
        return getattr(self, kind)[first:last]  # type: ignore[no-any-return]

    def last_value(self, scope: ast.AST, name: str, before: int) -> ast.AST | None:
        """The value last bound to ``name`` in ``scope`` before line ``before`` (None: unknown
        or not one plain value)."""
        named = self._named
        if named is None:
            named = self._named = bindings_by_name(self._binds)
        best: tuple[int, ast.AST | None] = (-1, None)
        wanted, scopes = id(scope), self._scope_ids
        for node, line, value in named.get(name, ()):
            if best[0] <= line < before:
                held = scopes.get(id(node))
                if held is None:
                    held = scopes[id(node)] = id(self._function_spans.around(node) or self.tree)
                if held == wanted:
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
        found = list(self._by_function.get(name, ()))
        for call in self._by_method.get(name, ()):
            owner = call.func.value  # type: ignore[attr-defined]  # an Attribute: ``x.name``
            if type(owner) is ast.Name and owner.id == "self":
                found.append(call)
        return sorted(found, key=position)

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

    def functions_around(self, node: ast.AST) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
        """The functions around ``node``, innermost first."""
        return self._function_spans.chain(node)  # type: ignore[return-value]

    def methods_called(self, name: str) -> list[ast.Call]:
        """Calls ``anything.name(...)`` in the module, in source order."""
        return list(self._by_method.get(name, ()))

    def loops_calling(self, name: str) -> set[int]:
        """The ids of the loops with a call ``anything.name(...)`` anywhere inside."""
        key = f"loops_calling:{name}"
        found = self.memo.get(key)
        if not isinstance(found, set):
            found = self.memo[key] = {
                id(outer)
                for call in self._by_method.get(name, ())
                for outer in self.around(call)
                if isinstance(outer, LOOPS)
            }
        return found


_UNKNOWN = object()
_POSITION = attrgetter("lineno", "col_offset")  # ``position`` of a parsed statement or expression
