"""Train/eval modes along a training loop: an evaluation run inside it (a later inner loop, a
branch every few steps) while the model is still training, and an ``.eval()`` inside it that
nothing undoes (``RGT201``/``RGT202``, ``modes``)."""

from __future__ import annotations

import ast
import builtins
import re
from collections.abc import Iterator

from rgt.lint._facts import LOOPS, Facts
from rgt.lint._mode_helpers import HELPED, freezes, mode_helpers, mode_of, train_false
from rgt.lint._model import Hit
from rgt.lint._nodes import dotted, method
from rgt.lint._tree import walk

Function = ast.FunctionDef | ast.AsyncFunctionDef
Helpers = dict[str, ast.FunctionDef]  # ``_mode_helpers.mode_helpers``
BUILTINS = frozenset(dir(builtins))  # `isinstance(...)`, `len(...)`: never the model called


EVAL_DATA = re.compile(r"(?i)(test|val|valid|eval)")


def evaluation_branches(facts: Facts) -> Iterator[Hit]:
    """A training loop that, every few steps, runs the model it trains on a test batch in an
    ``if`` branch (``if i % 10 == 0: ... classifier(points)`` over ``testdataloader``) with no
    ``.eval()`` first: the test numbers come from a model in training mode (pointnet.pytorch
    before its fix)."""
    stepping = facts.loops_calling("backward")
    for loop in (n for n in facts.loops if id(n) in stepping):
        inside = facts.calls_in(loop)
        backward = next((c for c in inside if method(c) == "backward"), None)
        trained = {
            c.func.id
            for c in inside
            if isinstance(c.func, ast.Name) and holds_model(facts, c.func.id)
        }
        if backward is None or not trained:
            continue
        for branch in facts.ifs:
            if branch.lineno <= backward.lineno or _parent_loop(facts, branch) is not loop:
                continue
            hit = _branch_run(facts, loop, branch, trained)
            if hit is not None:
                yield hit
                break


def _branch_run(facts: Facts, loop: ast.AST, branch: ast.If, trained: set[str]) -> Hit | None:
    calls = [c for c in facts.calls_in(loop) if within(c, branch)]
    if any(method(c) in ("backward", "step") for c in calls):
        return None
    names = {dotted(n) or "" for n in walk(branch) if isinstance(n, ast.Name | ast.Attribute)}
    if not any(EVAL_DATA.search(n) for n in names):
        return None
    runs = [c for c in calls if isinstance(c.func, ast.Name) and c.func.id in trained]
    runs = [c for c in runs if not _mode_set(facts, loop, c)]
    if not runs:
        return None
    name = runs[0].func.id  # type: ignore[attr-defined]
    return Hit(
        "RGT201", runs[0], f"`{name}` runs on test data inside the training loop, in training mode"
    )


def within(node: ast.AST, outer: ast.AST) -> bool:
    start, end = getattr(outer, "lineno", 0), getattr(outer, "end_lineno", 0) or 0
    return start <= getattr(node, "lineno", -1) <= end


def inline_evaluation(facts: Facts) -> Iterator[Hit]:
    """An epoch loop that trains a model in one inner loop, then runs it over other data in
    a later inner loop with no ``.eval()`` in between: the validation of every epoch runs
    with dropout on and batch-norm updating (deepspeech.pytorch before its fix)."""
    stepping = facts.loops_calling("backward")
    for loop in [*facts.loops, *_scopes(facts)]:
        if isinstance(loop, LOOPS):
            inner = [n for n in facts.loops_in(loop) if _parent_loop(facts, n) is loop]
        else:  # a function's or the script's own loops: the test loop after the training one
            inner = [n for n in facts.loops_in(loop) if _parent_loop(facts, n) is None]
            inner = [n for n in inner if facts.scope_of(n) is loop]
        trains = [n for n in inner if id(n) in stepping]
        if not trains:
            continue
        first = trains[0]
        trained = {
            c.func.id
            for c in facts.calls_in(first)
            if isinstance(c.func, ast.Name) and holds_model(facts, c.func.id)
        }
        for later in (n for n in inner if n.lineno > (first.end_lineno or first.lineno)):
            inside = facts.calls_in(later)
            if any(method(c) in ("backward", "step") for c in inside):
                continue
            runs = [c for c in inside if isinstance(c.func, ast.Name) and c.func.id in trained]
            runs = [c for c in runs if c.func.id not in BUILTINS and not _mode_set(facts, loop, c)]  # type: ignore[attr-defined]
            if runs:
                name = runs[0].func.id  # type: ignore[attr-defined]
                yield Hit(
                    "RGT201",
                    runs[0],
                    f"`{name}` is still in training mode from the training loop at line "
                    f"{first.lineno}",
                )
                break


def _scopes(facts: Facts) -> list[ast.AST]:
    """The script and its functions that train in a loop of their own (yunjey's tutorials:
    the test loop follows the epoch loop at the top level, with no ``.eval()`` between)."""
    stepping = facts.loops_calling("backward")
    found = {id(facts.scope_of(n)): facts.scope_of(n) for n in facts.loops if id(n) in stepping}
    return list(found.values())


def holds_model(facts: Facts, name: str) -> bool:
    """A variable (not a class, function or import) that holds a module: bound here, with
    ``.train()``/``.eval()``/``.parameters()`` called on it."""
    if name in facts.aliases or name in BUILTINS or not facts.bindings.get(name):
        return False
    return any(
        isinstance(c.func, ast.Attribute) and dotted(c.func.value) == name
        for m in ("train", "eval", "parameters")
        for c in facts.methods_called(m)
    )


def _parent_loop(facts: Facts, node: ast.AST) -> ast.AST | None:
    return next((o for o in facts.around(node) if o is not node and isinstance(o, LOOPS)), None)


def _mode_set(facts: Facts, loop: ast.AST, run: ast.Call) -> bool:
    """Is the model ``run`` calls in eval mode there: the last ``.eval()``/``.train()`` of it
    in ``loop`` before ``run`` puts it in eval mode (``model.eval()`` then ``model.train()``
    before the validation batches leaves it training: MultiBench before its fix)?"""
    name = run.func.id  # type: ignore[attr-defined]
    evaluating = False
    for call in facts.calls_in(loop):
        if call.lineno >= run.lineno:
            break
        owner = dotted(call.func.value) if isinstance(call.func, ast.Attribute) else None
        if owner == name and method(call) in ("eval", "train"):
            evaluating = method(call) == "eval" or train_false(call)
    return evaluating


def train_after_eval(facts: Facts) -> Iterator[Hit]:
    if facts.methods_called("train") or not facts.methods_called("eval"):
        return
    if not facts.methods_called("backward"):
        return
    bodies = {f.name: f for f in facts.functions}
    for loop in facts.loops:
        inside = facts.calls_in(loop)
        called = [bodies[n] for n in (_callee(c) for c in inside) if n in bodies]
        reach = inside + [c for f in called for c in facts.calls_in(f)]
        trains = any(method(c) == "backward" for c in reach)
        evals = [c for c in reach if method(c) == "eval" and not c.args]
        evals = [c for c in evals if not made_there(facts, c, loop)]
        if trains and evals:
            if not freezes(facts):
                yield Hit("RGT202", evals[0])
            return


def left_in_eval(facts: Facts) -> Iterator[Hit]:
    """A training loop that evaluates every few steps (``self.validate()`` puts ``self.model``
    in eval mode) and never puts the model back: training mode was set once, before the loop
    (at the start of the epoch), so the rest of the epoch trains with dropout off and frozen
    batch-norm statistics (pytorch-fcn and ncsn before their fixes). Only a model trained
    here counts (a teacher kept in eval mode is not one), and an evaluation followed by
    ``break``/``return`` ends the loop."""
    trained = {dotted(c.func.value) for c in facts.methods_called("train") if not train_false(c)}  # type: ignore[attr-defined]
    trained.discard(None)
    if not trained or not facts.methods_called("eval"):
        return
    helpers = mode_helpers(facts)
    if any(mode_of(c, helpers) == "train" for c in facts.calls_ending(helpers.__contains__)):
        trained.add(HELPED)
    bodies = {f.name: f for f in facts.functions}
    stepping = facts.loops_calling("backward")
    for loop in facts.loops:
        inside = facts.calls_in(loop)
        called = _called(facts, bodies, inside)
        reach = inside + [c for f in called for c in facts.calls_in(f)]
        reach = [c for c in reach if not any(within(c, h) for h in helpers.values())]
        if id(loop) not in stepping and not any(method(c) == "backward" for c in reach):
            continue
        bare = _untrained(facts, loop, reach, helpers)
        if bare is None:
            continue
        evals = [c for c in reach if _evaluates(c, trained, helpers)]
        # In a function the loop calls, only an unconditional ``.eval()`` surely runs
        # (UDA's ``eval(..., model_file)`` switches only when it loads a file).
        evals = [c for c in evals if within(c, loop) or not _conditional(facts, c, called)]
        evals = [c for c in evals if not _ends_loop(facts, c, loop)]
        evals = [c for c in evals if mode_of(c, helpers) or not made_there(facts, c, loop)]
        evals.sort(key=lambda c: not any(_apart(bare, c, t) for t in reach if method(t) == "train"))
        if evals and not freezes(facts):
            yield Hit("RGT202", evals[0], f"after `{dotted(evals[0].func)}()` at line "
                      f"{evals[0].lineno} this loop keeps training in eval mode")  # fmt: skip
            return


def _evaluates(call: ast.Call, trained: set[str | None], helpers: Helpers) -> bool:
    """``model.eval()`` of a model trained here, or a mode helper told ``'eval'``."""
    if mode_of(call, helpers) == "eval":
        return HELPED in trained
    owner = dotted(call.func.value) if isinstance(call.func, ast.Attribute) else None
    return method(call) == "eval" and not call.args and owner in trained


def _untrained(
    facts: Facts, loop: ast.AST, reach: list[ast.Call], helpers: Helpers
) -> list[ast.If] | None:
    """None when a ``.train()`` the loop reaches can run before each of its backward passes;
    else the loop's ``if`` statements that keep a backward pass apart from every
    ``.train()`` (DLFS's ``fit`` calls ``model.train()`` on its tensor path only, and its
    DataLoader path trains on in eval mode)."""
    trains = [c for c in reach if method(c) == "train" and not train_false(c)]
    trains += [c for c in reach if mode_of(c, helpers) == "train"]
    backs = [c for c in reach if method(c) == "backward" and within(c, loop)]
    if trains and not backs:
        return None
    forks = [b for b in facts.ifs if within(b, loop)]
    if any(not within(t, loop) or not any(within(t, b) for b in forks) for t in trains):
        return None  # a ``.train()`` on every path: in a function called, or unconditional
    bare = [b for b in backs if all(_apart(forks, t, b) for t in trains)]
    if trains and not bare:
        return None
    return [f for f in forks if trains and any(_apart([f], t, b) for t in trains for b in bare)]


def _apart(forks: list[ast.If], one: ast.AST, other: ast.AST) -> bool:
    """Are the two calls in different arms of one ``if`` (then one runs without the other)?"""
    for fork in forks:
        arms = [any(within(n, s) for s in fork.body) for n in (one, other)]
        elses = [any(within(n, s) for s in fork.orelse) for n in (one, other)]
        if (arms[0] and elses[1]) or (arms[1] and elses[0]):
            return True
    return False


def _called(facts: Facts, bodies: dict[str, Function], calls: list[ast.Call]) -> list[Function]:
    """The functions of this module that ``calls`` call, and the ones those call (two levels:
    simpletransformers' ``train`` calls ``self.eval_model``, which calls ``self.evaluate``,
    which puts the model in eval mode)."""
    found = [bodies[n] for n in (_callee(c) for c in calls) if n in bodies]
    for function in list(found):
        for name in (_callee(c) for c in facts.calls_in(function)):
            deeper = bodies.get(name)
            if deeper is not None and all(deeper is not f for f in found):
                found.append(deeper)
    return found


def made_there(facts: Facts, mode_call: ast.Call, loop: ast.AST) -> bool:
    """Does ``x.eval()``, in a function the training loop calls, act on an object that
    function makes itself (``net = Net()``, ``copy.deepcopy(model)``), not the one trained?
    mcan-vqa's ``Execution.eval`` builds a fresh ``net`` from the saved weights and puts it
    in eval mode; ``Execution.train``'s ``net`` is another object with the same name."""
    owner = mode_call.func.value  # type: ignore[attr-defined]
    scope = facts.scope_of(mode_call)
    if not isinstance(owner, ast.Name) or scope is facts.tree or within(loop, scope):
        return False
    value = facts.last_value(scope, owner.id, mode_call.lineno)
    while isinstance(value, ast.Call) and method(value) in MOVES:
        value = value.func.value  # type: ignore[attr-defined]  # ``Net().cuda()``
    if isinstance(value, ast.Call) and (dotted(value.func) or "").endswith(WRAPPERS):
        return False  # ``model = DataParallel(model)``: the same modules, wrapped
    return isinstance(value, ast.Call)


WRAPPERS = ("DataParallel", "DistributedDataParallel", "DDP")


MOVES = frozenset({"to", "cuda", "cpu", "float", "half", "double", "bfloat16"})


def _conditional(facts: Facts, call: ast.Call, functions: list[Function]) -> bool:
    """Is ``call`` under an ``if`` of the function (one of ``functions``) it is in?"""
    return any(
        within(call, f) and any(within(call, b) and within(b, f) for b in facts.ifs)
        for f in functions
    )


def _ends_loop(facts: Facts, call: ast.Call, loop: ast.AST) -> bool:
    """Is ``call`` in an ``if`` of ``loop`` that breaks out of it or returns?"""
    return any(
        within(call, branch)
        and within(branch, loop)
        and any(isinstance(n, ast.Break | ast.Return) for n in walk(branch))
        for branch in facts.ifs
    )


def _callee(call: ast.Call) -> str:
    name = dotted(call.func) or ""
    return name.removeprefix("self.")
