"""The indexes ``Facts`` keeps of a module's calls and bindings, each made in one loop.

Every rule asks for the full names of calls (``torch.nn.functional.cross_entropy`` for
``F.cross_entropy(...)``), for the calls ending in a name, and for what a name was last bound
to; these loops run over every call and binding of every file, so they take the common shapes
(``x.name(...)``, ``name = value``) first, without building lists.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from collections.abc import Callable

from rgt.lint._nodes import bound_names

Binding = tuple[ast.stmt, int, "ast.AST | None"]  # the statement, its line, the value bound
CallIndex = tuple[
    dict[int, "str | None"],  # id(call) → full name (None: not a dotted name)
    dict[str, list[int]],  # the last part of the full name → indices in ``calls``
    dict[str, list[ast.Call]],  # ``name(...)``: calls by the bare name called
    dict[str, list[ast.Call]],  # ``anything.name(...)``: calls by the method name
]


def call_names(calls: list[ast.Call], aliases: dict[str, str]) -> CallIndex:
    """Every call's full name, import aliases resolved (``qualname`` of what is called), and
    the calls by their name's last part, by the function and by the method they call."""
    names: dict[int, str | None] = {}
    by_last: dict[str, list[int]] = defaultdict(list)
    by_function: dict[str, list[ast.Call]] = defaultdict(list)
    by_method: dict[str, list[ast.Call]] = defaultdict(list)
    alias, Attribute, Name = aliases.get, ast.Attribute, ast.Name
    for index, call in enumerate(calls):
        node = call.func
        kind = type(node)
        if kind is Name:  # ``name(...)``
            head = node.id  # type: ignore[attr-defined]
            full = alias(head, head)
            by_last[full.rpartition(".")[2]].append(index)
            by_function[head].append(call)
            names[id(call)] = full
            continue
        if kind is not Attribute:
            names[id(call)] = None
            continue
        last = node.attr  # type: ignore[attr-defined]
        by_method[last].append(call)
        node = node.value  # type: ignore[attr-defined]
        if type(node) is Name:  # ``x.name(...)``: most calls
            head = node.id  # type: ignore[attr-defined]
            names[id(call)] = f"{alias(head, head)}.{last}"
            by_last[last].append(index)
            continue
        names[id(call)] = _dotted_call(node, last, alias)
        if names[id(call)] is not None:
            by_last[last].append(index)
    return names, by_last, by_function, by_method


def _dotted_call(node: ast.AST, last: str, alias: Callable[[str, str], str]) -> str | None:
    """``a.b.c.last`` with ``a`` resolved, for the callee's ``node`` under its last part."""
    parts = [last]
    while type(node) is ast.Attribute:
        parts.append(node.attr)  # type: ignore[attr-defined]
        node = node.value  # type: ignore[attr-defined]
    if type(node) is not ast.Name:
        return None
    head = node.id  # type: ignore[attr-defined]
    parts.append(alias(head, head))
    parts.reverse()
    return ".".join(parts)


def bindings_by_name(binds: list[ast.stmt]) -> dict[str, list[Binding]]:
    """Each name's bindings in the statements that bind names, in their order (walk order)."""
    named: dict[str, list[Binding]] = defaultdict(list)
    Assign, Name = ast.Assign, ast.Name
    for node in binds:
        if type(node) is Assign and len(node.targets) == 1:  # type: ignore[attr-defined]
            target = node.targets[0]  # type: ignore[attr-defined]
            if type(target) is Name:  # most bindings: one name, one value
                named[target.id].append((node, node.lineno, node.value))  # type: ignore[attr-defined]
                continue
        for name, value in bound_names(node).items():
            named[name].append((node, node.lineno, value))
    return named
