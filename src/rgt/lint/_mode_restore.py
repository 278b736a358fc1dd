"""A switch back that repeats the switch (``RGT202``, ``modes``): a function puts a model in
eval mode, runs it over batches, then calls ``.eval()`` on it again where it means to restore
training mode (torchtuples' ``predict_dataloader`` before its fix): the second call changes
nothing, and every later training step runs with dropout off and frozen batch-norm. And a
switch with no way back: a class that trains its network offers only a method putting it in
eval mode (``one_way_switch``)."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from rgt.lint._facts import Facts
from rgt.lint._mode_helpers import freezes, train_false
from rgt.lint._mode_loops import within
from rgt.lint._model import Hit
from rgt.lint._nodes import dotted, method, methods_of


def repeated_switch(facts: Facts) -> Iterator[Hit]:
    """The second ``x.eval()`` of one function, after a loop that follows the first, with no
    ``x.train()`` in the function, in a module that trains (a backward pass) and puts ``x``
    back in training mode elsewhere (its author switches back after an evaluation)."""
    switches = [c for c in facts.methods_called("eval") if not c.args]
    if len(switches) < 2 or not facts.methods_called("backward"):
        return
    restores = [c for c in facts.methods_called("train") if not train_false(c)]
    if not restores:
        return
    for func in facts.functions:
        own = [c for c in switches if facts.scope_of(c) is func]
        hit = _second_switch(facts, func, own, restores) if len(own) > 1 else None
        if hit is not None:
            yield hit


def _second_switch(
    facts: Facts, func: ast.AST, own: list[ast.Call], restores: list[ast.Call]
) -> Hit | None:
    loops = facts.loops_in(func)
    for first in own:
        model = dotted(first.func.value)  # type: ignore[attr-defined]
        same = [t for t in restores if dotted(t.func.value) == model]  # type: ignore[attr-defined]
        if model is None or not same or any(within(t, func) for t in same):
            continue
        after = [
            loop
            for loop in loops
            if loop.lineno > first.lineno and not any(within(first, o) for o in loops)
        ]
        for again in own:
            if dotted(again.func.value) != model or again.lineno <= first.lineno:  # type: ignore[attr-defined]
                continue
            ended = any((loop.end_lineno or loop.lineno) < again.lineno for loop in after)
            if ended and not any(within(again, loop) for loop in loops):
                return Hit("RGT202", again, f"`{model}.eval()` again after the loop, where "
                           f"the mode it had before line {first.lineno} should come back "
                           "(`.train()`): later training runs in eval mode")  # fmt: skip
    return None


def one_way_switch(facts: Facts) -> Iterator[Hit]:
    """A class that trains the network it keeps (a backward pass in its methods) and offers a
    method that only puts it in eval mode, in a module that never calls ``.train()``: once a
    caller evaluates, every later step trains in eval mode, and the class gives no way back
    (ptutils' ``Model.eval`` calls ``self.net.eval()``; its ``step`` back-propagates)."""
    if facts.methods_called("train") or not facts.methods_called("backward") or freezes(facts):
        return
    switches = [c for c in facts.methods_called("eval") if not c.args]
    for cls in facts.classes if switches else ():
        methods = methods_of(cls)
        if not any(method(c) == "backward" for f in methods for c in facts.calls_in(f)):
            continue
        for func in methods:
            calls = facts.calls_in(func)
            if facts.loops_in(func) or len(calls) != 1 or calls[0] not in switches:
                continue
            model = dotted(calls[0].func.value) or ""  # type: ignore[attr-defined]
            if model.startswith("self.") and model.count(".") == 1:
                yield Hit("RGT202", calls[0], f"`{cls.name}.{func.name}` puts `{model}` in eval "
                          f"mode and nothing here puts it back, while `{cls.name}` trains it: "
                          "steps after an evaluation train in eval mode")  # fmt: skip
                break
