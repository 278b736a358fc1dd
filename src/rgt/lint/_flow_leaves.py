"""The parts of a module's summary (``_cross``) about the mode a function leaves a model in: a
function that puts a model it is passed in eval mode and never back (``modes_left``), and the
training loops that hand their model to functions elsewhere with no ``.train()`` on the way
back (``handed_models``). Joined (``_join``), the two find an evaluation in another file that
leaves the trained model in eval mode for the rest of training (lerobot's ``eval_policy``,
reached from the training loop through ``eval_policy_all -> run_one -> eval_one``)."""

from __future__ import annotations

import ast
from typing import Any

from rgt.lint._facts import Facts
from rgt.lint._flow import params
from rgt.lint._flow_data import qualname, ref
from rgt.lint._mode_helpers import freezes, train_false
from rgt.lint._mode_loops import Function
from rgt.lint._nodes import dotted, method

DEPTH = 4  # calls followed within a module, from the loop's callee to the ``.eval()``


def modes_left(facts: Facts) -> dict[str, list[list[Any]]]:
    """``qualname -> [[position, name, mode, line], ...]``: each parameter whose mode the
    function sets last (``"eval"``/``"train"``; ``line``: the ``.eval()``/``.train()`` that
    does it), itself or through functions of this module it passes the parameter to."""
    switches = [*facts.methods_called("eval"), *facts.methods_called("train")]
    setting = {id(f) for c in switches for f in facts.functions_around(c)}
    functions = [f for f in facts.functions if id(f) in setting and params(f)]
    if not functions:
        return {}
    left: dict[int, dict[str, tuple[str, int]]] = {id(f): _own_modes(facts, f) for f in functions}
    for _ in range(DEPTH):
        grown = False
        known = [f for f in functions if left[id(f)]]
        for callee in known:
            for call in facts.callers(callee.name):
                around = facts.functions_around(call)
                func = around[0] if around else None
                if not isinstance(call.func, ast.Name) or func is None or func is callee:
                    continue
                if id(func) not in left:
                    left[id(func)] = {}
                    functions.append(func)
                for name, mode in _passed_modes(call, callee, left[id(callee)]).items():
                    if name in params(func) and _last_after(facts, func, call, name, mode, left):
                        grown = True
        if not grown:
            break
    return {
        qualname(facts, f): [[params(f).index(n), n, m, line] for n, (m, line) in found.items()]
        for f in functions
        if (found := left[id(f)])
    }


def _own_modes(facts: Facts, func: Function) -> dict[str, tuple[str, int]]:
    """The mode each parameter is last put in by ``func``'s own ``.eval()``/``.train()``."""
    names = set(params(func))
    out: dict[str, tuple[str, int]] = {}
    for call in facts.calls_in(func):
        owner = dotted(call.func.value) if isinstance(call.func, ast.Attribute) else None
        if owner in names and method(call) in ("eval", "train") and not call.keywords:
            evaluating = method(call) == "eval" or train_false(call)
            out[owner] = ("eval" if evaluating else "train", call.lineno)  # type: ignore[index]
    return out


def _passed_modes(
    call: ast.Call, callee: Function, modes: dict[str, tuple[str, int]]
) -> dict[str, tuple[str, int]]:
    """The caller's names for the callee's parameters whose mode it sets."""
    names = params(callee)
    out = {}
    for index, arg in enumerate(call.args):
        if isinstance(arg, ast.Name) and index < len(names) and names[index] in modes:
            out[arg.id] = modes[names[index]]
    for kw in call.keywords:
        if isinstance(kw.value, ast.Name) and kw.arg in modes:
            out[kw.value.id] = modes[kw.arg]
    return out


def _last_after(
    facts: Facts,
    func: Function,
    call: ast.Call,
    name: str,
    mode: tuple[str, int],
    left: dict[int, dict[str, tuple[str, int]]],
) -> bool:
    """Record that ``call`` leaves ``name`` in ``mode`` in ``func``, unless ``func`` sets its
    mode itself later, or already knows it: did anything change?"""
    later = [
        c
        for c in facts.calls_in(func)
        if c.lineno > call.lineno
        and method(c) in ("eval", "train")
        and isinstance(c.func, ast.Attribute)
        and dotted(c.func.value) == name
    ]
    known = left[id(func)]
    if later or known.get(name) == mode:
        return False
    known[name] = mode
    return True


def handed_models(facts: Facts) -> list[list[Any]]:
    """Training loops that never put their model back in training mode, with each call in
    them that hands it to a function: ``[[model, [[line, col, callee, position, keyword],
    ...]], ...]`` (the model: a name put in training mode in the module)."""
    trained = {
        c.func.value.id  # type: ignore[attr-defined]
        for c in facts.methods_called("train")
        if isinstance(c.func.value, ast.Name) and not train_false(c)  # type: ignore[attr-defined]
    }
    if not trained:
        return []
    local = {f.name: f for f in facts.functions}
    stepping = facts.loops_calling("backward")
    out = []
    for loop in facts.loops:
        inside = facts.calls_in(loop)
        reach = inside + [
            c
            for n in (dotted(x.func) for x in inside)
            if n in local
            for c in facts.calls_in(local[n])
        ]
        if id(loop) not in stepping and not any(method(c) == "backward" for c in reach):
            continue
        if any(method(c) == "train" and not train_false(c) for c in reach):
            continue
        for model in sorted(trained):
            handed = _handed(facts, inside, model)
            if handed:
                out.append([model, handed])
    # A probe on a frozen model keeps it in eval mode on purpose (walked only here: rare).
    return [] if out and freezes(facts) else out


def _handed(facts: Facts, calls: list[ast.Call], model: str) -> list[list[Any]]:
    out = []
    for call in calls:
        if method(call) in ("train", "eval", "to", "cuda"):
            continue
        spots: list[tuple[int, str | None]] = [
            (i, None) for i, a in enumerate(call.args) if dotted(a) == model
        ]
        spots += [(-1, k.arg) for k in call.keywords if k.arg and dotted(k.value) == model]
        callee = ref(facts, call) if spots else None
        if callee:
            out += [[call.lineno, call.col_offset, callee, i, kw] for i, kw in spots]
    return out
