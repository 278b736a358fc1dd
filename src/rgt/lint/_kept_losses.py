"""A loss tensor kept across steps (``RGT204``, ``modes``): a running total, a list or a
tracker that holds the tensor a backward pass went through keeps its whole autograd graph
alive, one more graph every step, until the epoch ends (Amphion's ``epoch_sum_loss += loss``,
RecBole's ``losses_list.append(losses)``, packnet-sfm's ``outputs.append(output)`` of a dict
holding the loss).

The loss is what ``backward`` runs on, however it is reached: ``loss.backward()``,
``output["loss"].backward()`` (the dict holds it), ``scaler.scale(loss).backward()``,
``accelerator.backward(loss)``; and what it was made from in one step of arithmetic
(``loss = sum(losses)``: each of ``losses`` holds the same graph).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from typing import Any

from rgt.lint._facts import Facts
from rgt.lint._mode_grads import mentions
from rgt.lint._model import Hit
from rgt.lint._nodes import dotted, method
from rgt.lint._tree import walk

# Objects whose ``backward(loss)`` runs the loss's backward pass (Accelerate, Fabric,
# DeepSpeed's engine): the argument is the loss.
RUNNERS = ("accelerator", "fabric", "engine", "model_engine")
# Methods that keep the graph of what they are called on (``loss.mean().backward()``).
REDUCE = {"mean", "sum", "squeeze", "view", "reshape", "float", "double"}
NO_TAPE = ("no_grad", "inference_mode")  # blocks that record no autograd graph
# Methods whose result still holds the graph of what they are called on (``val.cpu()``).
KEEP = REDUCE | {"cpu", "cuda", "to", "clone", "contiguous", "flatten", "half"}
# Functions handed a tensor that give back a number or an array (no graph), and words in a
# helper's name that say it does (``to_numpy(val)``, ``tensor2float(val)``).
CONVERT = {"float", "int", "round", "len", "str", "bool", "list", "tuple", "isinstance"}
NUMERIC = ("np.", "numpy.", "math.")
CUT = ("item", "numpy", "float", "scalar", "detach", "np", "int", "list")


def kept_losses(facts: Facts) -> Iterator[Hit]:
    for loop, inside, backed in backed_loops(facts):
        for node in [*facts.augmented_in(loop), *inside, *_rebinds(facts, loop)]:
            target = accumulator(node, backed)
            kept = target and target not in backed and not _is_backed_later(facts, target)
            kept = kept and not untracked(facts, node)
            if target and kept and accumulator(node, backed - _detached(facts, loop, backed)):
                yield Hit("RGT204", node, target)
        yield from _handed_totals(facts, loop, inside, backed)
    for func, inside, backed in backed_steps(facts):
        yield from _handed_totals(facts, func, inside, backed)


def _handed_totals(
    facts: Facts, loop: ast.AST, inside: list[ast.Call], backed: set[str]
) -> Iterator[Hit]:
    """A loss handed to a method of this module that adds it to a total on ``self``."""
    for call, index, name in _handed(inside, backed):
        own = facts.memo.get("accumulators")  # worked out once, when a call is handed a loss
        if not isinstance(own, dict):
            own = facts.memo["accumulators"] = accumulators(facts)
        held = root(call.args[index])
        if (
            index in own.get(name, ())
            and held not in _detached(facts, loop, backed)
            and not untracked(facts, call)
        ):
            yield Hit("RGT204", call, f"`{name}` adds its argument to a running total")


def backed_loops(facts: Facts) -> Iterator[tuple[ast.AST, list[ast.Call], set[str]]]:
    """Each loop that runs a backward pass, its calls, and the names holding that loss."""
    backward = facts.loops_calling("backward") | facts.loops_calling("manual_backward")
    for loop in facts.loops:
        if id(loop) not in backward:
            continue
        inside = facts.calls_in(loop)
        backed: set[str] = set()
        for call in inside:
            if method(call) in ("backward", "manual_backward"):
                backed |= _made_from(facts, _loss_of(call), call)
        if backed:
            yield loop, inside, backed


def _handed(inside: list[ast.Call], backed: set[str]) -> Iterator[tuple[ast.Call, int, str]]:
    """Method calls handed a loss: ``tracker.update_losses(loss)`` -> (call, 0, name)."""
    for call in inside:
        name = method(call)
        if name is None or name in ("backward", "append", "manual_backward"):
            continue
        for index, arg in enumerate(call.args):  # ``meter.update(out["loss"])`` too
            if isinstance(arg, ast.Name | ast.Subscript) and root(arg) in backed:
                yield call, index, name
            elif isinstance(arg, ast.List | ast.Tuple | ast.BinOp) and _holds(arg, backed):
                yield call, index, name  # SpareNet's ``update([coarse_loss * 1000, ...])``


def _holds(arg: ast.List | ast.Tuple | ast.BinOp, backed: set[str]) -> bool:
    """A product of the loss, or a list of them: still the loss's graph."""
    items = arg.elts if isinstance(arg, ast.List | ast.Tuple) else [arg]
    return any(kept_name(e, backed) for e in items if isinstance(e, ast.Name | ast.BinOp))


def backed_steps(facts: Facts) -> Iterator[tuple[ast.AST, list[ast.Call], set[str]]]:
    """Each function that runs a backward pass outside any loop of its own (a step the
    training loop calls, SpareNet's ``train_step``), its calls outside loops, and the names
    holding that loss."""
    seen: set[int] = set()
    for call in facts.methods_called("backward"):
        around = facts.functions_around(call)
        if not around or id(around[0]) in seen or _in_loop(facts, call, around[0]):
            continue
        seen.add(id(around[0]))
        backed = _made_from(facts, _loss_of(call), call) | _siblings(
            around[0], _loss_of(call), call
        )
        calls = [c for c in facts.calls_in(around[0]) if not _in_loop(facts, c, around[0])]
        if backed:
            yield around[0], calls, backed


def _siblings(func: ast.AST, name: str | None, call: ast.Call) -> set[str]:
    """The losses unpacked with the one back-propagated, from the same call (SpareNet's
    ``_loss, ..., refine_loss, coarse_loss = self.completion(data)``): its parts, on its graph."""
    found: set[str] = set()
    for node in ast.walk(func) if name else ():
        if not isinstance(node, ast.Assign) or node.lineno >= call.lineno:
            continue
        target = node.targets[0]
        names = [e.id for e in target.elts if isinstance(e, ast.Name)] if isinstance(
            target, ast.Tuple) else []  # fmt: skip
        if name in names and isinstance(node.value, ast.Call):
            found = {n for n in names if "loss" in n.lower()}
    return found


def _in_loop(facts: Facts, node: ast.AST, func: ast.AST) -> bool:
    """Is ``node`` in a loop inside ``func``?"""
    for outer in facts.around(node):
        if outer is func:
            return False
        if isinstance(outer, ast.For | ast.While | ast.AsyncFor):
            return True
    return False


def kept_calls(facts: Facts) -> list[list[Any]]:
    """The summary's: ``[line, col, method, argument index]`` of each method call a loss is
    handed to in a loop that back-propagates it (``_join`` asks the files around whether that
    method keeps it)."""
    return [
        [call.lineno, call.col_offset, name, index]
        for _loop, inside, backed in [*backed_loops(facts), *backed_steps(facts)]
        for call, index, name in _handed(inside, backed)
        if not untracked(facts, call)
    ]


def accumulators(facts: Facts) -> dict[str, list[int]]:
    """Methods of the classes here that add an argument itself to a total kept on ``self``
    (``self.sum += val * n``, ``self.totals[key] += losses[key]``, ``self.seen.append(x)``):
    ``name -> [argument positions, without self]``."""
    out: dict[str, list[int]] = {}
    for node in [*facts.augmented, *facts.methods_called("append")]:
        around = facts.functions_around(node)
        func = around[0] if around else None
        if func is None or func.name.startswith("__"):
            continue
        names = [a.arg for a in func.args.args]
        if names[:1] != ["self"]:
            continue
        kept = _kept_argument(node, names[1:])
        if kept is not None and kept in _rebound(func):
            continue  # ``val = val.detach().item()`` first: what it adds is a number
        if kept is not None and names[1:].index(kept) not in out.get(func.name, []):
            out.setdefault(func.name, []).append(names[1:].index(kept))
    return out


def _rebound(func: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    """The names a method assigns anew (its arguments among them)."""
    return {t.id for n in walk(func) if isinstance(n, ast.Assign) for t in n.targets
            if isinstance(t, ast.Name)}  # fmt: skip


def _kept_argument(node: ast.AST, names: list[str]) -> str | None:
    """The argument ``node`` adds to ``self``'s state, if it does."""
    if isinstance(node, ast.AugAssign) and isinstance(node.op, ast.Add):
        target = node.target.value if isinstance(node.target, ast.Subscript) else node.target
        if not (dotted(target) or "").startswith("self."):
            return None
        return kept_name(node.value, names)
    if isinstance(node, ast.Call) and method(node) == "append" and len(node.args) == 1:
        owner = dotted(node.func.value) or ""  # type: ignore[attr-defined]
        arg = node.args[0]
        if owner.startswith("self.") and isinstance(arg, ast.Name) and arg.id in names:
            return arg.id
    return None


def kept_name(value: ast.AST, names: list[str] | set[str]) -> str | None:
    """The one of ``names`` whose graph ``value`` still holds: the name itself, a product
    (``val * n``), an entry (``val[key]``), or what a call that keeps the graph made of it
    (``hvd.allreduce(val.cpu())``, ``reduce_tensor(val)``); not ``val.item()``,
    ``float(val)``, ``val.detach()``."""
    while True:
        if isinstance(value, ast.BinOp):
            return kept_name(value.left, names) or kept_name(value.right, names)
        elif isinstance(value, ast.Subscript):
            value = value.value
        elif isinstance(value, ast.Call) and _keeps_graph(value):
            value = value.func.value if method(value) in KEEP else value.args[0]  # type: ignore[attr-defined]
        else:
            return value.id if isinstance(value, ast.Name) and value.id in names else None


def _keeps_graph(call: ast.Call) -> bool:
    """Does the call return a tensor on its argument's graph: a method that moves or reduces
    it, or a function handed it first that does not convert it to a number or an array."""
    if method(call) in KEEP:
        return True
    spelled = (dotted(call.func) or "").lower()
    if not call.args or not spelled or spelled in CONVERT or spelled.startswith(NUMERIC):
        return False
    return not any(word in spelled.rpartition(".")[2] for word in CUT)


def _loss_of(call: ast.Call) -> str | None:
    """The name of the tensor a backward pass runs on (``output`` for
    ``output["loss"].backward()``), or None."""
    assert isinstance(call.func, ast.Attribute)
    owner = call.func.value
    if call.args and isinstance(call.args[0], ast.Name):
        spelled = dotted(owner) or ""
        if spelled.rpartition(".")[2] in RUNNERS or method(call) == "manual_backward":
            return call.args[0].id
        return None
    return root(owner)


def assigns_in(facts: Facts, loop: ast.AST) -> list[ast.Assign]:
    """The assignments inside a loop, found by one walk of it per module (the loss rules ask
    about the same loops several times)."""
    memo = facts.memo.setdefault("assigns_in", {})
    assert isinstance(memo, dict)
    found = memo.get(id(loop))
    if found is None:
        found = memo[id(loop)] = [n for n in _statements(loop) if isinstance(n, ast.Assign)]
    return found  # type: ignore[no-any-return]


def _statements(node: ast.AST) -> Iterator[ast.stmt]:
    """The statements inside a compound statement, at any depth (not its expressions: an
    assignment is a statement, so they are all seen, at a fraction of a whole walk)."""
    todo = [node]
    while todo:
        current = todo.pop()
        for field in ("body", "orelse", "finalbody", "handlers", "cases"):
            block = getattr(current, field, None)
            if isinstance(block, list):
                for child in reversed(block):
                    if isinstance(child, ast.stmt):
                        yield child
                    todo.append(child)


def _detached(facts: Facts, loop: ast.AST, backed: set[str]) -> set[str]:
    """Dicts whose loss entry is replaced by a detached copy in the loop (packnet-sfm's fix:
    ``output["loss"] = output["loss"].detach()``): they no longer hold the graph."""
    found = set()
    for node in assigns_in(facts, loop):
        if isinstance(node.value, ast.Call):
            cut = method(node.value) in ("detach", "item", "cpu")
            for target in node.targets if cut else ():
                if isinstance(target, ast.Subscript) and root(target) in backed:
                    found.add(root(target) or "")
    return found


def root(node: ast.AST) -> str | None:
    """``output["loss"]`` -> ``output``; ``loss.mean()`` -> ``loss``; ``scaler.scale(loss)``
    -> ``loss``."""
    while True:
        if isinstance(node, ast.Subscript):
            node = node.value
        elif isinstance(node, ast.Call) and method(node) == "scale" and node.args:
            node = node.args[0]
        elif isinstance(node, ast.Call) and method(node) in REDUCE:
            node = node.func.value  # type: ignore[attr-defined]  # a method: an Attribute
        else:
            return node.id if isinstance(node, ast.Name) else None


def _made_from(facts: Facts, name: str | None, call: ast.Call) -> set[str]:
    """``name`` and the names its value was made from by arithmetic, ``sum``, a subscript or
    a conditional (``loss = sum(losses) if isinstance(losses, tuple) else losses``)."""
    if name is None:
        return set()
    found = {name}
    value = facts.last_value(facts.scope_of(call), name, call.lineno)
    todo = [value] if value is not None else []
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Name):
            found.add(node.id)
        elif isinstance(node, ast.BinOp):
            todo += [node.left, node.right]
        elif isinstance(node, ast.IfExp):
            todo += [node.body, node.orelse]
        elif isinstance(node, ast.Subscript):
            todo.append(node.value)
        elif isinstance(node, ast.Call) and dotted(node.func) == "sum" and node.args:
            todo.append(node.args[0])
    return found


def _rebinds(facts: Facts, loop: ast.AST) -> list[ast.Assign]:
    """``total = total + x`` in the loop: a running total spelled without ``+=``."""
    out = []
    for node in assigns_in(facts, loop):
        value, target = node.value, node.targets[0]
        if len(node.targets) != 1 or not isinstance(target, ast.Name):
            continue
        added = isinstance(value, ast.BinOp) and isinstance(value.op, ast.Add)
        if added and target.id in (dotted(value.left), dotted(value.right)):  # type: ignore[attr-defined]
            out.append(node)
    return out


def accumulator(node: ast.AST, backed: set[str]) -> str | None:
    """``total += loss`` (or ``+= loss[key] * n``) or ``losses.append(loss)`` (or
    ``append(output["loss"])``) with a tensor a backward pass went through."""
    if isinstance(node, ast.Assign):  # ``total = total + loss`` (``_rebinds``)
        binop = node.value
        assert isinstance(binop, ast.BinOp)
        other = binop.right if dotted(binop.left) == dotted(node.targets[0]) else binop.left
        return dotted(node.targets[0]) if kept_name(other, backed) is not None else None
    if isinstance(node, ast.AugAssign) and isinstance(node.op, ast.Add):
        if kept_name(node.value, backed) is not None:
            target = node.target  # ``totals[key] += loss[key]``: ``totals`` keeps them
            return dotted(target.value if isinstance(target, ast.Subscript) else target)
        return None
    appended = isinstance(node, ast.Call) and method(node) == "append" and len(node.args) == 1
    if appended and kept_name(node.args[0], backed) is not None:  # type: ignore[attr-defined]
        owner = node.func.value  # type: ignore[attr-defined]  # a method: an Attribute
        while isinstance(owner, ast.Subscript):  # ``history["train_loss"].append(loss)``
            owner = owner.value
        return dotted(owner)
    return None


def untracked(facts: Facts, node: ast.AST) -> bool:
    """Is ``node`` under ``with torch.no_grad()`` (or ``inference_mode``): what it adds
    records no graph (pyg's ``total_loss[0] += loss * n`` under ``no_grad``)."""
    for around in facts.around(node):
        if isinstance(around, ast.With) and any(mentions(i, NO_TAPE, True) for i in around.items):
            return True
    return False


def _is_backed_later(facts: Facts, target: str) -> bool:
    """Is the total itself back-propagated (``sum(losses).backward()``): then it is meant."""
    for call in facts.methods_called("backward"):
        assert isinstance(call.func, ast.Attribute)
        if any(dotted(n) == target for n in walk(call.func.value)):
            return True
    return False
