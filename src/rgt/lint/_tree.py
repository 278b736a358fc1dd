"""One pass over a syntax tree: its calls and the statements ``Facts`` keeps, nothing else.

The walk is the hot loop of every lint run (a node's fields read one by one, as
``ast.iter_child_nodes`` would, without a generator per node); names and constants, a third of
all nodes, are never pushed, and fields that never hold a node are never read.
"""

from __future__ import annotations

import ast
from collections import deque
from collections.abc import Iterator

# Fields that never hold a node: names and constants, Load/Store contexts and operators (a
# third of all nodes). A node type's other fields are looked at (``_child_fields``).
NOT_CHILDREN = frozenset(
    {"ctx", "op", "ops", "id", "attr", "arg", "name", "kind", "module", "level", "asname",
     "type_comment", "is_async", "conversion", "simple"}
)  # fmt: skip
_CHILD_FIELDS: dict[type, tuple[str, ...]] = {ast.Constant: ()}
LEAVES = frozenset({ast.Name, ast.Constant})  # a third of all nodes: parented, never pushed

BINDS = (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.For, ast.With)
# Kinds of statement kept, besides calls.
NOTED = (
    ast.Import, ast.ImportFrom, ast.Assign, ast.AnnAssign, ast.AugAssign, ast.For, ast.While,
    ast.AsyncFor, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.If, ast.With, ast.Return,
)  # fmt: skip
NOTED_TYPES = frozenset(NOTED)
BIND_TYPES = frozenset(BINDS)


def nodes(tree: ast.AST) -> tuple[list[ast.Call], list[ast.AST]]:
    """Every call in the tree, and every statement of a ``NOTED`` kind (each in walk order:
    depth first, later fields first)."""
    calls: list[ast.Call] = []
    noted: list[ast.AST] = []
    stack: list[ast.AST] = [tree]
    AST, fields, leaves, push, pop = ast.AST, _CHILD_FIELDS, LEAVES, stack.append, stack.pop
    Call, call, note, kept = ast.Call, calls.append, noted.append, NOTED_TYPES
    while stack:
        node = pop()
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
        if kind is Call:
            call(node)  # type: ignore[arg-type]  # its type is Call
        elif kind in kept:
            note(node)
    return calls, noted


def walk(node: ast.AST) -> Iterator[ast.AST]:
    """``ast.walk``: the nodes under ``node`` (itself first), breadth first, in the same order,
    less contexts and operators (``Load``, ``Add``: reached through their parent's field)."""
    todo = deque([node])
    pop, push, fields, AST = todo.popleft, todo.append, _CHILD_FIELDS, ast.AST
    while todo:
        node = pop()
        kind = type(node)
        names = fields.get(kind)
        if names is None:
            names = fields[kind] = _child_fields(kind)
        for name in names:  # ``children``, inline: a call per node is most of a walk's cost
            value = getattr(node, name, None)
            if type(value) is list:
                for child in value:
                    if isinstance(child, AST):
                        push(child)
            elif isinstance(value, AST):
                push(value)
        yield node


def children(node: ast.AST) -> list[ast.AST]:
    """``ast.iter_child_nodes``, as a list, less contexts and operators."""
    kind = type(node)
    names = _CHILD_FIELDS.get(kind)
    if names is None:
        names = _CHILD_FIELDS[kind] = _child_fields(kind)
    found: list[ast.AST] = []
    AST = ast.AST
    for name in names:
        value = getattr(node, name, None)
        if type(value) is list:
            found += [child for child in value if isinstance(child, AST)]
        elif isinstance(value, AST):
            found.append(value)
    return found


def _child_fields(kind: type) -> tuple[str, ...]:
    return tuple(f for f in getattr(kind, "_fields", ()) if f not in NOT_CHILDREN)
