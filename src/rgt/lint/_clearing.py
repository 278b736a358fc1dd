"""When are gradients cleared? The questions RGT105 asks of a loop that steps an optimizer:
is any ``zero_grad`` in this loop, of this optimizer, able to run at all, and is the missing
clear a gradient accumulation on purpose (a counting ``if`` around the step)?"""

from __future__ import annotations

import ast

from rgt.lint._facts import LOOPS, Facts
from rgt.lint._model import Hit
from rgt.lint._nodes import dotted, method
from rgt.lint._tree import walk

OPTIMIZERS = ("torch.optim.", "optim.")


def uncleared(facts: Facts, steps: list[ast.Call]) -> Hit | None:
    """A stepped optimizer never cleared in a module that clears only other optimizers
    (``optimizer_E.zero_grad()``, never ``optimizer_D``'s, nor a model's ``zero_grad``)."""
    if any(
        not isinstance(c.func, ast.Attribute)
        for c in facts.calls_ending(lambda n: "zero_grad" in n)
    ):
        return None  # a helper clears them (``zero_grad(params)``): which, not seen here
    cleared = {dotted(c.func.value) for c in facts.methods_called("zero_grad")}  # type: ignore[attr-defined]
    if not cleared or None in cleared or not all(_named_optimizer(facts, k) for k in cleared if k):
        return None
    for step in steps:
        key = dotted(step.func.value)  # type: ignore[attr-defined]
        if key and key not in cleared and not module_sets_grad_none(facts):
            shown = ", ".join(f"`{k}.zero_grad()`" for k in sorted(k for k in cleared if k))
            return Hit("RGT105", step, f"`{key}` is stepped but only {shown} is called")
    return None


def cleared_elsewhere(facts: Facts, loop: ast.AST, step: ast.Call) -> Hit | None:
    """Gradients cleared, but never in the loop that steps (``optimizer.zero_grad()`` once
    before it): the innermost loop around the step neither clears them nor calls a function of
    this module that does, nor hands the optimizer or the model to anything that might."""
    innermost = next((o for o in facts.around(step) if isinstance(o, LOOPS)), loop)
    inside = facts.calls_in(innermost)
    clears = facts.calls_ending(lambda last: "zero_grad" in last)
    if any(_inside(c, innermost) for c in clears) or sets_grad_none(innermost):
        return None
    clearing = {f.name for f in facts.functions if any(_inside(c, f) for c in clears)}
    if any((dotted(c.func) or "").rpartition(".")[2] in clearing for c in inside):
        return None
    key = dotted(step.func.value)  # type: ignore[attr-defined]
    handed = any(
        isinstance(a, ast.Name | ast.Attribute) and dotted(a) == key
        for c in inside
        if not _clips(c)
        for a in c.args
    )
    outside = [c for c in clears if not _inside(c, innermost)]
    if handed or not outside:
        return None
    return Hit(
        "RGT105", step, f"zero_grad at line {outside[0].lineno} runs outside the loop that steps"
    )


def _clips(call: ast.Call) -> bool:
    """``utils.clip_gradient(optimizer, 0.5)``: a helper that clips what the optimizer holds
    reads and rescales gradients, it does not clear them (TextClassificationBenchmark)."""
    return "clip" in (dotted(call.func) or "").rpartition(".")[2].lower()


def _named_optimizer(facts: Facts, key: str) -> bool:
    made = facts.bound_calls(key)
    if made:
        return all(n.startswith(OPTIMIZERS) for n in made)
    return key.split(".")[-1].lower().endswith(("optimizer", "optim", "opt"))


def attached_privacy_engine(facts: Facts) -> bool:
    """Opacus before 1.0: ``PrivacyEngine(...).attach(optimizer)`` makes the optimizer's
    step clear the gradients it clipped (its maintainers: "zero_grad is not needed for
    opacus", opacus#194). Opacus 1.x (``make_private``) wants zero_grad as torch does."""
    if not any(full.split(".")[0] == "opacus" for full in facts.aliases.values()):
        return False
    return bool(facts.methods_called("attach"))


def accumulates(facts: Facts, loop: ast.AST, step: ast.Call) -> bool:
    """Gradient accumulation on purpose: the step runs under an ``if`` that counts
    (``if (i + 1) % accum == 0``, a name with "accum"); a ``%`` elsewhere in the loop is not
    one (``if batch_idx % log_interval == 0: print(...)``). A loop with an "accum" name, or
    whose counting ``if`` is not seen around the step, is still taken as one."""
    guards = [i for i in facts.ifs if _inside(step, i) and _inside(i, loop)]
    if any(_counts(i.test) for i in guards):
        return True
    return _mentions_accum(loop) or (not guards and _counts_anywhere(loop))


def _inside(node: ast.AST, outer: ast.AST) -> bool:
    start = (getattr(outer, "lineno", 0), getattr(outer, "col_offset", 0))
    end = (getattr(outer, "end_lineno", 0), getattr(outer, "end_col_offset", 0))
    return start <= (getattr(node, "lineno", 0), getattr(node, "col_offset", 0)) <= end


def _counts(test: ast.AST) -> bool:
    return any(
        (isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mod))
        or (isinstance(n, ast.Name) and "accum" in n.id.lower())
        or (isinstance(n, ast.Attribute) and "accum" in n.attr.lower())
        for n in walk(test)
    )


def _mentions_accum(loop: ast.AST) -> bool:
    """An "accum" name in the loop, outside a nested loop of backward passes: BigGAN's
    ``for accumulation_index in ...: D_loss.backward()`` accumulates micro-batches into one
    step, and says nothing about whether the steps of the loop around it are cleared."""
    todo = list(ast.iter_child_nodes(loop))
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Name) and "accum" in node.id.lower():
            return True
        if isinstance(node, LOOPS) and _backward_in(node):
            continue
        todo.extend(ast.iter_child_nodes(node))
    return False


def _backward_in(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Call) and method(n) == "backward" for n in walk(node))


def _counts_anywhere(loop: ast.AST) -> bool:
    """A ``%`` used for anything but a ``print``/log line's condition."""
    for node in walk(loop):
        if isinstance(node, ast.If) and _counts(node.test) and not _only_reports(node):
            return True
    return False


def _only_reports(branch: ast.If) -> bool:
    """An ``if`` whose body only prints, logs, saves or evaluates (no step)."""
    for node in walk(branch):
        if isinstance(node, ast.Call) and method(node) in ("step", "backward", "zero_grad"):
            return False
    return True


def sets_grad_none(tree: ast.AST) -> bool:
    """``p.grad = None`` (or any ``….grad = …``) somewhere under ``tree``."""
    return any(isinstance(node, ast.Assign) and _sets_grad(node) for node in walk(tree))


def module_sets_grad_none(facts: Facts) -> bool:
    """:func:`sets_grad_none` of the whole module, from its noted assignments (no walk)."""
    said = facts.memo.get("sets_grad_none")
    if said is None:
        said = facts.memo["sets_grad_none"] = any(map(_sets_grad, facts.assignment_statements()))
    return bool(said)


def _sets_grad(node: ast.Assign) -> bool:
    return any(isinstance(t, ast.Attribute) and t.attr == "grad" for t in node.targets)


def cleared_before_step(facts: Facts, loop: ast.AST, step: ast.Call) -> Hit | None:
    """``optimizer.zero_grad()`` between the backward pass and ``optimizer.step()``, in the
    same block: the step applies gradients just cleared, so the model never learns
    (byol-pytorch's trainer: ``accelerator.backward(loss)``, ``zero_grad()``, ``step()``)."""
    key = dotted(step.func.value)  # type: ignore[attr-defined]
    loop = next((o for o in facts.around(step) if isinstance(o, LOOPS)), loop)
    block = _block_of(loop, step)
    if key is None or block is None:
        return None
    at = next(i for i, s in enumerate(block) if _inside(step, s))
    for statement in reversed(block[:at]):
        calls = [n for n in walk(statement) if isinstance(n, ast.Call)]
        if any(method(c) == "backward" for c in calls):
            return None
        zero = next((c for c in calls if _clears(c, key)), None)
        if zero is not None and _jumps_after(statement, zero):
            continue  # ``if not finite: zero_grad(); continue``: that path never steps
        if zero is not None:
            passes = [c for c in facts.calls_in(loop) if method(c) == "backward"]
            backward = [c for c in passes if c.lineno < zero.lineno]
            if not backward:
                return None
            detail = (
                f"`{key}.zero_grad()` at line {zero.lineno} clears the gradients of the "
                f"backward pass at line {backward[-1].lineno} before this step applies them"
            )
            return Hit("RGT105", step, detail)
    return None


JUMPS = (ast.Continue, ast.Break, ast.Return, ast.Raise)


def _jumps_after(statement: ast.stmt, zero: ast.Call) -> bool:
    """Is ``zero`` in an arm of an ``if`` that ends by leaving the step behind (``continue``,
    ``break``, ``return``, ``raise``)?"""
    for node in walk(statement):
        if isinstance(node, ast.If):
            for arm in (node.body, node.orelse):
                held = arm and any(_inside(zero, s) for s in arm)
                if held and isinstance(arm[-1], JUMPS):
                    return True
    return False


def _clears(call: ast.Call, key: str) -> bool:
    return method(call) == "zero_grad" and dotted(call.func.value) == key  # type: ignore[attr-defined]


def _block_of(loop: ast.AST, node: ast.AST) -> list[ast.stmt] | None:
    """The statement list, inside ``loop``, that holds the statement holding ``node`` (None:
    ``node`` is in a loop nested in ``loop``)."""
    block: list[ast.stmt] = getattr(loop, "body", [])
    while True:
        holder = next((s for s in block if _inside(node, s)), None)
        if holder is None or isinstance(holder, LOOPS):
            return None
        inner = [getattr(holder, f, None) for f in ("body", "orelse", "finalbody")]
        inner += [h.body for h in getattr(holder, "handlers", [])]
        child = next(
            (b for b in inner if isinstance(b, list) and any(_inside(node, s) for s in b)), None
        )
        if child is None:
            return block
        block = child


def cleared_in_other_branch(facts: Facts, loop: ast.AST, step: ast.Call) -> Hit | None:
    """``zero_grad`` only in one branch of an ``if``, the step in the other (DAB-DETR's
    ``train_one_epoch``: only the ``--amp`` branch clears, the default branch's gradients add
    up over the whole run); nothing else in the loop clears them or calls a function here that
    does."""
    innermost = next((o for o in facts.around(step) if isinstance(o, LOOPS)), loop)
    clears = [c for c in facts.calls_ending(lambda n: "zero_grad" in n) if _inside(c, innermost)]
    if not clears:
        return None
    for branch in (i for i in facts.ifs if _inside(i, innermost) and _inside(step, i)):
        here = branch.body if any(_inside(step, s) for s in branch.body) else branch.orelse
        there = branch.orelse if here is branch.body else branch.body
        if not there or not all(any(_inside(c, s) for s in there) for c in clears):
            continue
        if sets_grad_none(innermost):
            return None
        clearing = {f.name for f in facts.functions if _clears_inside(facts, f)}
        called = {(dotted(c.func) or "").rpartition(".")[2] for c in facts.calls_in(innermost)}
        if called & clearing:
            return None
        return Hit(
            "RGT105",
            step,
            f"zero_grad at line {clears[0].lineno} runs only in the other branch of the `if` "
            f"at line {branch.lineno}",
        )
    return None


def _clears_inside(facts: Facts, function: ast.AST) -> bool:
    return any(method(c) == "zero_grad" for c in facts.calls_in(function))
