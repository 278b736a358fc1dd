"""The parts of a module's summary (``_cross``) about objects handed from call to call: the
calls that hand an object built here (by a class or a factory) to a function (``handed``),
and the functions that hand a parameter of theirs on to another (``forwards``). Only calls
that can reach the project's own code are looked at (``project_heads``): a call starting with
a local object (``x.append``), a builtin or a library (``torch.cat``) is never one the joins
follow."""

from __future__ import annotations

import ast
from typing import Any

from rgt.lint._facts import Facts
from rgt.lint._flow_data import made_by, qualname, ref
from rgt.lint._flow_make import LIBRARIES, MAX_PASSES, _library, _params, maker
from rgt.lint._mode_loops import BUILTINS
from rgt.lint._nodes import dotted

Function = ast.FunctionDef | ast.AsyncFunctionDef


def handed(facts: Facts) -> list[list[Any]]:
    """Calls that hand an object built here (by a class or a factory) to a function:
    ``[line, col, callee (_flow_data.ref), position, keyword, maker as spelled]``
    (``get_loader(dataset=dataset)`` after ``dataset = build_dataset(config)``)."""
    out: list[list[Any]] = []
    heads = project_heads(facts)
    for call in facts.calls:
        if (not call.args and not call.keywords) or _head(call) not in heads:
            continue
        pairs: list[tuple[int, str | None, ast.expr]] = [
            (i, None, a) for i, a in enumerate(call.args) if _built(facts, a)
        ]
        pairs += [(-1, k.arg, k.value) for k in call.keywords if k.arg and _built(facts, k.value)]
        made = [
            (i, k, m) for i, k, a in pairs if (m := maker(facts, a)) and m not in facts.bindings
        ]
        callee = ref(facts, call) if made and not _library(facts, call) else None
        if callee is None or callee.removeprefix("name:").startswith(LIBRARIES):
            continue
        out += [[call.lineno, call.col_offset, callee, i, k, m] for i, k, m in made]
        if len(out) >= MAX_PASSES:
            break
    return out[:MAX_PASSES]


def project_heads(facts: Facts) -> frozenset[str]:
    """The first names a call of the project's own code can start with: an import, a function
    or class defined here, ``self``, a name bound to an object built from a class
    (``trainer = Trainer(...)``, then ``trainer.fit(...)``); a call starting otherwise
    (``x.append``, ``len``, ``torch.cat``) is never one the joins follow."""
    found = facts.memo.get("project_heads")
    if isinstance(found, frozenset):
        return found
    heads = {a.asname or a.name.split(".")[0] for i in facts.imports for a in i.names}
    heads |= {n.name for n in facts.tree.body if isinstance(n, Function | ast.ClassDef)}
    heads.add("self")
    for name, values in facts.bindings.items():
        if "." not in name and any(_class_call(v) for v in values):
            heads.add(name)
    heads -= {"torch", "nn", "F", "np", "numpy", "math", "os", "sys"}
    facts.memo["project_heads"] = frozen = frozenset(heads)
    return frozen


def _class_call(node: ast.AST) -> bool:
    return (
        type(node) is ast.Call and (dotted(made_by(node)) or "a").rpartition(".")[2][:1].isupper()
    )


def _head(call: ast.Call) -> str:
    func = call.func
    while type(func) is ast.Attribute:
        func = func.value  # type: ignore[attr-defined]
    return func.id if type(func) is ast.Name else ""  # type: ignore[attr-defined]


def _built(facts: Facts, node: ast.expr) -> bool:
    """A cheap first test for ``maker``: a call, or a name some call was bound to, of
    something not bound here itself (``Points(...)``, ``build(cfg)``; not ``model(x)``)."""
    if type(node) is ast.Name:
        return any(_made_call(facts, v) for v in facts.bindings.get(node.id, ()))
    return _made_call(facts, node)


def _made_call(facts: Facts, node: ast.AST) -> bool:
    if type(node) is not ast.Call:
        return False
    name = dotted(node.func)  # type: ignore[attr-defined]
    if name is None or name in facts.bindings or name.split(".")[0] in BUILTINS:
        return False
    return not (facts.call_name(node) or "").startswith(LIBRARIES)


def forwards(facts: Facts) -> dict[str, list[list[Any]]]:
    """Functions that hand a parameter of theirs on to another call: ``qualname ->
    [[position, name, callee (_flow_data.ref), position there, keyword there]]``
    (``train(model, loader)`` calling ``run_epoch(model=model)``): the join follows an object
    through them (``_join_base.through``), a few calls deep, across files."""
    out: dict[str, list[list[Any]]] = {}
    names_of: dict[int, list[str]] = {}
    count = 0
    heads = project_heads(facts)
    for call in facts.calls:
        if _head(call) not in heads:
            continue
        if not any(type(a) is ast.Name for a in [*call.args, *(k.value for k in call.keywords)]):
            continue
        around = facts.functions_around(call)
        if not around:
            continue
        func = around[0]
        if id(func) not in names_of:
            names_of[id(func)] = _params(func)
        names = names_of[id(func)]
        spots: list[tuple[int, str | None, str]] = [
            (i, None, a.id)
            for i, a in enumerate(call.args)
            if type(a) is ast.Name and a.id in names
        ]
        spots += [
            (-1, k.arg, k.value.id)
            for k in call.keywords
            if type(k.value) is ast.Name and k.value.id in names
        ]
        callee = ref(facts, call) if spots and not _library(facts, call) else None
        if callee is None or _outside(callee):
            continue
        here = out.setdefault(qualname(facts, func), [])
        here += [[names.index(name), name, callee, index, word] for index, word, name in spots]
        count += len(spots)
        if count >= MAX_PASSES:
            break
    return out


def _outside(callee: str) -> bool:
    """A call into a builtin or a library: nothing of the project's to follow there."""
    name = callee.partition(":")[2]
    return name.split(".")[0] in BUILTINS or name.startswith(LIBRARIES)
