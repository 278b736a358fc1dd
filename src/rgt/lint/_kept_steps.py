"""Losses kept across steps where the backward pass is not in the loop that keeps them
(``RGT204``): a step function or method back-propagates the loss and returns it (or the dict
of loss terms made with it), and the loop that calls it every batch adds what it returned to
a running total (faster-rcnn's ``total_loss += total`` of ``train_util.train_step(...)``,
YOLO's ``total_loss[name] += loss_val * batch_size`` over the dict ``train_one_batch``
returns); a loop that stores the loss under each step's number
(``step_loss_log[step_count] = loss``); a Lightning ``training_step`` that appends the loss
it returns to a list on ``self`` (pytorch-forecasting's ``training_step_outputs``).

A step in another file is matched by name (``_join_losses``): the loop's file lists the
calls whose result it keeps (``step_sites``), the step's file the steps it offers
(``loss_steps``).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from typing import Any

from rgt.lint._facts import Facts
from rgt.lint._kept_losses import (
    accumulator,
    assigns_in,
    backed_loops,
    kept_name,
    root,
    untracked,
)
from rgt.lint._model import Hit
from rgt.lint._nodes import dotted, method
from rgt.lint._tree import walk

BACKWARD = ("backward", "manual_backward")
# Names too common to say a step: an optimizer's ``step``, a module's ``forward``, the
# closure an optimizer calls, Lightning's hooks (the framework keeps what they return).
COMMON = {"step", "forward", "__call__", "closure", "training_step", "validation_step"}
CALLEES = 8  # callees followed per loop: the work per file stays bounded


def loss_steps(facts: Facts) -> dict[str, list[int]]:
    """Functions and methods here that back-propagate a loss (not in a loop of their own)
    and return it, or what holds its graph: their names, each with the positions of the
    returned tuple that hold it (``WHOLE``: the value returned; worked out once per module)."""
    memo = facts.memo.get("loss_steps")
    if isinstance(memo, dict):
        return memo
    found: dict[str, list[int]] = {}
    owners = {}
    for call in [*facts.methods_called("backward"), *facts.methods_called("manual_backward")]:
        around = facts.functions_around(call)
        if around:
            owners[id(around[0])] = around[0]
    for func in owners.values():
        if func.name not in COMMON and func.name not in found:
            positions = _returns_loss(facts, func)
            if positions:
                found[func.name] = positions
    facts.memo["loss_steps"] = found
    return found


WHOLE = -1  # the value returned itself (a name, or a dict of loss terms), not a tuple's part


def _returns_loss(facts: Facts, func: ast.FunctionDef | ast.AsyncFunctionDef) -> list[int]:
    calls = [c for c in facts.calls_in(func) if method(c) in BACKWARD]
    inner = facts.loops_in(func)
    calls = [c for c in calls if not any(_inside(c, loop) for loop in inner)]
    if not calls or facts.functions_around(calls[0])[0] is not func:
        return []
    losses = {n for n in (_backed_root(c) for c in calls) if n}
    out: set[int] = set()
    for ret in facts.returns_in(func):
        for position, name in _returned(ret.value):
            if name in losses or any(_siblings(facts, func, name, n, ret) for n in losses):
                out.add(position)
    return sorted(out)


def _inside(node: ast.Call, loop: ast.For | ast.While | ast.AsyncFor) -> bool:
    here = (node.lineno, node.col_offset)
    return (
        (loop.lineno, loop.col_offset) <= here <= (loop.end_lineno or 0, loop.end_col_offset or 0)
    )


def _backed_root(call: ast.Call) -> str | None:
    """The name a backward pass runs on, through an attribute of a local too
    (``losses.total_loss.backward()``: ``losses``)."""
    owner = call.func.value if isinstance(call.func, ast.Attribute) else call.func
    if call.args and isinstance(call.args[0], ast.Name):  # ``accelerator.backward(loss)``
        return call.args[0].id
    while isinstance(owner, ast.Attribute) and isinstance(owner.value, ast.Name | ast.Attribute):
        if dotted(owner.value) == "self":
            return None
        owner = owner.value
    return root(owner)


def _returned(value: ast.AST | None) -> list[tuple[int, str]]:
    """Names a ``return`` hands back, each with its position: itself (``WHOLE``), a tuple's
    (its index) or a dict's (``WHOLE``: the dict is what the caller holds)."""
    if isinstance(value, ast.Name):
        return [(WHOLE, value.id)]
    if isinstance(value, ast.Tuple):
        return [(i, e.id) for i, e in enumerate(value.elts) if isinstance(e, ast.Name)]
    if isinstance(value, ast.Dict):
        return [(WHOLE, v.id) for v in value.values if isinstance(v, ast.Name)]
    return []


def _siblings(facts: Facts, func: ast.AST, one: str, other: str, at: ast.AST) -> bool:
    """Were ``one`` and ``other`` unpacked from the same call (``loss, loss_item =
    self.loss_fn(...)``): the terms of one loss, on one graph."""
    first = facts.last_value(func, one, at.lineno)  # type: ignore[attr-defined]
    second = facts.last_value(func, other, at.lineno)  # type: ignore[attr-defined]
    both = isinstance(first, ast.Subscript) and isinstance(second, ast.Subscript)
    return both and first.value is second.value  # type: ignore[union-attr]


def kept_steps(facts: Facts) -> Iterator[Hit]:
    """RGT204 on what a loop keeps of a loss a step here returned, on a loss stored under
    each step's number, and on a ``training_step`` keeping the loss it returns."""
    seen: set[int] = set()
    for loop, inside, backed in step_loops(facts, loss_steps(facts)):
        for node, target in kept_in(facts, loop, inside, backed):
            if id(node) not in seen:
                seen.add(id(node))
                yield Hit("RGT204", node, f"{target}: what a step that ran backward returned")
    backward = facts.loops_calling("backward")
    for loop, inside, backed in backed_loops(facts):
        if any(id(inner) in backward for inner in facts.loops_in(loop)):
            continue  # the innermost loop that back-propagates is the one that keeps
        for node, target in _stored(facts, loop, backed):
            yield Hit("RGT204", node, f"{target}: one entry per step")
        for node, target in _history(facts, loop, inside):
            yield Hit("RGT204", node, f"{target}: backward runs on one entry, all are kept")
    yield from _outputs_kept(facts)


def _stored(facts: Facts, loop: ast.AST, backed: set[str]) -> Iterator[tuple[ast.AST, str]]:
    """``log[step] = loss`` where ``step`` is the loop's own counter or variable: a new
    entry, and a graph kept, every step (a fixed key is overwritten: nothing grows)."""
    counters = _counters(facts, loop)
    for node in assigns_in(facts, loop):
        if len(node.targets) != 1:
            continue
        target = node.targets[0]
        if not isinstance(target, ast.Subscript) or dotted(target.slice) not in counters:
            continue
        held = dotted(target.value)
        if (
            held
            and held not in backed
            and kept_name(node.value, backed)
            and not untracked(facts, node)
        ):
            yield node, held


def _history(facts: Facts, loop: ast.AST, inside: list[ast.Call]) -> Iterator[tuple[ast.AST, str]]:
    """A list the backward pass runs on one entry of (``losses[-1].backward()``), that the
    loop adds an entry to every step (``losses.append(...)``, ``losses[i], cost = ...``) and
    never empties: every entry is a loss with its graph (tntorch's ``optimize``)."""
    lists = set()
    counters = _counters(facts, loop)
    for call in inside:
        owner = call.func.value if isinstance(call.func, ast.Attribute) else None
        if (
            method(call) in BACKWARD
            and isinstance(owner, ast.Subscript)
            and _indexed(owner, counters)
        ):
            lists.add(dotted(owner.value))
    lists.discard(None)
    if lists:
        lists -= _reset(facts, loop)
    if not lists:
        return
    for call in inside:
        held = dotted(call.func.value) if isinstance(call.func, ast.Attribute) else None
        if method(call) == "append" and held in lists and call.args and not _cut(call.args[0]):
            yield call, held  # type: ignore[misc]
    for node in assigns_in(facts, loop):
        if not _cut(node.value):
            for target in node.targets:
                for part in getattr(target, "elts", [target]):
                    if (
                        isinstance(part, ast.Subscript)
                        and dotted(part.value) in lists
                        and _counted(part.slice, counters)  # ``losses[i]``: a new entry
                    ):
                        yield node, dotted(part.value)  # type: ignore[misc]


def _indexed(node: ast.Subscript, counters: set[str | None]) -> bool:
    """A list's entry (``losses[-1]``, ``losses[i]`` with ``i`` the loop's), not a dict's
    under a fixed key (``state[LOSS]``, ``out["loss"]``: overwritten every step)."""
    key = node.slice
    if isinstance(key, ast.UnaryOp) and isinstance(key.op, ast.USub):
        key = key.operand
    if isinstance(key, ast.Constant):
        return isinstance(key.value, int) and not isinstance(key.value, bool)
    return _counted(key, counters)


def _counted(key: ast.AST, counters: set[str | None]) -> bool:
    """Does an index change with the step (``i``, ``iter_count - 1``, ``self.step``)?"""
    if dotted(key) in counters:
        return True
    return any(isinstance(n, ast.Name) and n.id in counters for n in walk(key))


def _counters(facts: Facts, loop: ast.AST) -> set[str | None]:
    """The names that change every step: the loop's variables and the counters it adds to."""
    counters = {dotted(n.target) for n in facts.augmented_in(loop)}
    return counters | set(_names_bound(getattr(loop, "target", None)))


def _names_bound(target: ast.AST | None) -> list[str]:
    """The names a ``for`` binds (``i``, ``(i, (x, y))``); not those a subscript or an
    attribute target only reads (``for state[X], state[Y] in loader``: ``state`` stays)."""
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, ast.Starred):
        return _names_bound(target.value)
    if isinstance(target, ast.Tuple | ast.List):
        return [n for e in target.elts for n in _names_bound(e)]
    return []


def _reset(facts: Facts, loop: ast.AST) -> set[str | None]:
    """Names the loop binds anew (``losses = []`` each step: nothing grows)."""
    return {dotted(t) for n in assigns_in(facts, loop) for t in n.targets}


def _cut(value: ast.AST) -> bool:
    """A number or a detached copy (``loss.item()``, ``float(loss)``, ``loss.detach()``)."""
    if not isinstance(value, ast.Call):
        return isinstance(value, ast.Constant)
    spelled = dotted(value.func) or ""
    return method(value) in ("item", "detach", "tolist") or spelled in ("float", "int")


def _outputs_kept(facts: Facts) -> Iterator[Hit]:
    """A Lightning ``training_step`` that appends to a list on ``self`` the loss (or the
    dict holding it) it returns: the framework runs backward on it, the list keeps every
    step's graph until the epoch ends."""
    for func in facts.functions:
        if func.name != "training_step":
            continue
        returned = {n for r in facts.returns_in(func) for _, n in _returned(r.value)}
        for call in facts.calls_in(func):
            owner = dotted(call.func.value) if isinstance(call.func, ast.Attribute) else None
            kept = method(call) == "append" and (owner or "").startswith("self.") and call.args
            if kept and kept_name(call.args[0], returned):
                yield Hit("RGT204", call, f"{owner}: the loss `training_step` returns")


def step_loops(
    facts: Facts, steps: dict[str, list[int]]
) -> Iterator[tuple[ast.AST, list[ast.Call], set[str]]]:
    """Each loop that calls a step of ``steps`` and keeps the loss it returns in a name, its
    calls, and the names holding that loss (spread through unpacking and ``.items()``)."""
    if not steps:
        return
    for loop in facts.loops:
        inside = facts.calls_in(loop)
        seeds = {
            name
            for c in inside
            if _callee(c) in steps
            for position, name in _bound(facts, c)
            if holds(position, steps[_callee(c)])  # type: ignore[index]
        }
        if seeds:
            yield loop, inside, spread(loop, seeds)


def holds(position: int, offered: list[int]) -> bool:
    """Does the name bound at ``position`` of a call's result hold the loss the callee
    returns at ``offered`` (``loss, n, log = train_step(...)``: ``n`` does not)?"""
    return position == WHOLE or WHOLE in offered or position in offered


def _callee(call: ast.Call) -> str | None:
    name = method(call)
    return name if name is not None else dotted(call.func)


def _bound(facts: Facts, call: ast.Call) -> list[tuple[int, str]]:
    """The names a call's result is bound to, each with its position (``WHOLE``: the value
    itself, else its index in the unpacked tuple)."""
    assign = facts.assignment_of(call)
    if assign is None or len(assign.targets) != 1:
        return []
    target = assign.targets[0]
    if isinstance(target, ast.Name):
        return [(WHOLE, target.id)]
    elts = getattr(target, "elts", ())
    return [(i, e.id) for i, e in enumerate(elts) if isinstance(e, ast.Name)]


def spread(loop: ast.AST, names: set[str]) -> set[str]:
    """``names`` and what is unpacked or drawn from them in the loop (``a, b = losses``,
    ``for k, v in losses.items()``, ``total = losses["total"]``)."""
    found = set(names)
    for _ in range(2):
        for node in walk(loop):
            if isinstance(node, ast.Assign) and _from(node.value, found):
                for target in node.targets:
                    found |= {n.id for n in walk(target) if isinstance(n, ast.Name)}
            elif isinstance(node, ast.For) and _from(node.iter, found):
                elts = getattr(node.target, "elts", [node.target])
                found |= {e.id for e in elts[-1:] if isinstance(e, ast.Name)}
    return found


def _from(value: ast.AST, names: set[str]) -> bool:
    if isinstance(value, ast.Call) and method(value) in ("items", "values"):
        value = value.func.value  # type: ignore[attr-defined]  # a method: an Attribute
    while isinstance(value, ast.Subscript | ast.Attribute):
        value = value.value
    return isinstance(value, ast.Name) and value.id in names


def kept_in(
    facts: Facts, loop: ast.AST, inside: list[ast.Call], backed: set[str]
) -> Iterator[tuple[ast.AST, str]]:
    """What the loop keeps of ``backed`` every step: running totals and lists."""
    for node in [*facts.augmented_in(loop), *(c for c in inside if method(c) == "append")]:
        target = accumulator(node, backed)
        if target and target not in backed and not untracked(facts, node):
            yield node, target


def step_sites(facts: Facts) -> list[list[Any]]:
    """The summary's: ``[line, col, callee, total]`` of each running total a loop keeps of
    what a call it makes every step returned, where that callee is not a step here (a file
    around may offer it: ``loss_steps``). Only loops that keep a total are looked into, and
    in each the first few callees whose result it names."""
    local = set(loss_steps(facts)) | COMMON
    out: list[list[Any]] = []
    for loop in facts.loops:
        inside = facts.calls_in(loop)
        adds = any(isinstance(n.op, ast.Add) for n in facts.augmented_in(loop))
        if not adds and not any(method(c) == "append" for c in inside):
            continue
        seeds: dict[tuple[str, int], set[str]] = {}
        callees: set[str] = set()
        for call in inside:
            name, bound = _callee(call), _bound(facts, call)
            if name and bound and name not in local and len(callees | {name}) <= CALLEES:
                callees.add(name)
                for position, one in bound:
                    seeds.setdefault((name, position), set()).add(one)
        every = set().union(*seeds.values()) if seeds else set()
        if not every or not any(True for _ in kept_in(facts, loop, inside, spread(loop, every))):
            continue  # one spread of every seed: most loops keep nothing of them
        for (name, position), held in seeds.items():
            for node, target in kept_in(facts, loop, inside, spread(loop, held)):
                site = [node.lineno, node.col_offset, name, target, position]  # type: ignore[attr-defined]
                if site not in out:
                    out.append(site)
    return out
