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
from rgt.lint._model import Hit
from rgt.lint._nodes import dotted, method
from rgt.lint._tree import walk

# Objects whose ``backward(loss)`` runs the loss's backward pass (Accelerate, Fabric,
# DeepSpeed's engine): the argument is the loss.
RUNNERS = ("accelerator", "fabric", "engine", "model_engine")
# Methods that keep the graph of what they are called on (``loss.mean().backward()``).
REDUCE = {"mean", "sum", "squeeze", "view", "reshape", "float", "double"}


def kept_losses(facts: Facts) -> Iterator[Hit]:
    own: dict[str, list[int]] | None = None  # worked out once, when a call is handed a loss
    for loop, inside, backed in _backed_loops(facts):
        for node in [*facts.augmented_in(loop), *inside]:
            target = accumulator(node, backed)
            kept = target and target not in backed and not _is_backed_later(facts, target)
            if target and kept and accumulator(node, backed - _detached(loop, backed)):
                yield Hit("RGT204", node, target)
        for call, index, name in _handed(inside, backed):
            own = accumulators(facts) if own is None else own
            held = call.args[index].id  # type: ignore[attr-defined]  # ``_handed``: a Name
            if index in own.get(name, ()) and held not in _detached(loop, backed):
                yield Hit("RGT204", call, f"`{name}` adds its argument to a running total")


def _backed_loops(facts: Facts) -> Iterator[tuple[ast.AST, list[ast.Call], set[str]]]:
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
        for index, arg in enumerate(call.args):
            if isinstance(arg, ast.Name) and arg.id in backed:
                yield call, index, name


def kept_calls(facts: Facts) -> list[list[Any]]:
    """The summary's: ``[line, col, method, argument index]`` of each method call a loss is
    handed to in a loop that back-propagates it (``_join`` asks the files around whether that
    method keeps it)."""
    return [
        [call.lineno, call.col_offset, name, index]
        for _loop, inside, backed in _backed_loops(facts)
        for call, index, name in _handed(inside, backed)
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
        if kept is not None and names[1:].index(kept) not in out.get(func.name, []):
            out.setdefault(func.name, []).append(names[1:].index(kept))
    return out


def _kept_argument(node: ast.AST, names: list[str]) -> str | None:
    """The argument ``node`` adds to ``self``'s state, if it does."""
    if isinstance(node, ast.AugAssign) and isinstance(node.op, ast.Add):
        target = node.target.value if isinstance(node.target, ast.Subscript) else node.target
        if not (dotted(target) or "").startswith("self."):
            return None
        value = node.value.left if isinstance(node.value, ast.BinOp) else node.value
        value = value.value if isinstance(value, ast.Subscript) else value
        return value.id if isinstance(value, ast.Name) and value.id in names else None
    if isinstance(node, ast.Call) and method(node) == "append" and len(node.args) == 1:
        owner = dotted(node.func.value) or ""  # type: ignore[attr-defined]
        arg = node.args[0]
        if owner.startswith("self.") and isinstance(arg, ast.Name) and arg.id in names:
            return arg.id
    return None


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


def _detached(loop: ast.AST, backed: set[str]) -> set[str]:
    """Dicts whose loss entry is replaced by a detached copy in the loop (packnet-sfm's fix:
    ``output["loss"] = output["loss"].detach()``): they no longer hold the graph."""
    found = set()
    for node in walk(loop):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
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


def accumulator(node: ast.AST, backed: set[str]) -> str | None:
    """``total += loss`` (or ``+= loss[key]``) or ``losses.append(loss)`` with a tensor a
    backward pass went through."""
    if isinstance(node, ast.AugAssign) and isinstance(node.op, ast.Add):
        held = node.value.value if isinstance(node.value, ast.Subscript) else node.value
        if isinstance(held, ast.Name) and held.id in backed:
            target = node.target  # ``totals[key] += loss[key]``: ``totals`` keeps them
            return dotted(target.value if isinstance(target, ast.Subscript) else target)
        return None
    if isinstance(node, ast.Call) and method(node) == "append" and len(node.args) == 1:
        arg = node.args[0]
        if isinstance(arg, ast.Name) and arg.id in backed:
            assert isinstance(node.func, ast.Attribute)
            return dotted(node.func.value)
    return None


def _is_backed_later(facts: Facts, target: str) -> bool:
    """Is the total itself back-propagated (``sum(losses).backward()``): then it is meant."""
    for call in facts.methods_called("backward"):
        assert isinstance(call.func, ast.Attribute)
        if any(dotted(n) == target for n in walk(call.func.value)):
            return True
    return False
