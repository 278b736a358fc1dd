"""The parts of a module's summary (``_cross``) about train/eval mode: evaluation functions that
never call ``.eval()`` (``runners``), and the calls that reach one with a model still in training
mode (``runner_calls``): a model passed as an argument, or one kept on ``self`` by a method
called right after a method that trains it."""

from __future__ import annotations

import ast
from typing import Any

from rgt.lint import modes
from rgt.lint._facts import LOOPS, Facts
from rgt.lint._flow import Function, _callee, built_from, models, params
from rgt.lint._flow_data import qualname, ref
from rgt.lint._mode_helpers import train_false
from rgt.lint._nodes import dotted, method


def runners(facts: Facts) -> dict[str, list[Any]]:
    """Evaluation functions (named like one, or running under ``no_grad``) that run a model
    passed to them in a loop and never put it in eval mode, never back-propagate:
    ``qualname -> [line, [[position, name], ...], looped, [name, ...]]`` (each parameter it
    runs like a model; whether it loops itself; those it runs only through their methods)."""
    found = facts.memo.get("runners")
    if isinstance(found, dict):
        return found
    out: dict[str, list[Any]] = {}
    facts.memo["runners"] = out
    guarded = {
        id(f) for w in facts.withs if modes.mentions_head(w) for f in facts.functions_around(w)
    }
    kept = trained_attributes(facts)
    for func in facts.functions:
        names = params(func)
        if not (names or kept or id(func) in guarded) or not (
            id(func) in guarded or _evaluates(func)
        ):
            continue
        # Without a loop of its own, a function under ``no_grad`` still evaluates when it is
        # called batch by batch from an evaluation loop (FuseFormer's ``get_i3d_activations``):
        # its calls then say so (``runner_calls``' last field).
        looped = bool(facts.loops_in(func))
        if not looped and not (id(func) in guarded or _no_grad_decorated(func)):
            continue
        inside = facts.calls_in(func)
        if any(method(c) in ("backward", "step") for c in inside):
            continue
        run = {
            target.id
            for target in map(_callee, inside)
            if isinstance(target, ast.Name)
            and target.id in names
            and not modes.FUNCTION_NAME.search(target.id)
            and not target.id.startswith(FUNCTION_HEADS)
        }
        # A model run through another of its methods (``i3d.extract_features(x)``): any
        # object's method looks the same, so the join asks that the object passed be a module.
        by_method = {
            c.func.value.id  # type: ignore[attr-defined]
            for c in inside
            if isinstance(c.func, ast.Attribute)
            and isinstance(c.func.value, ast.Name)
            and c.func.value.id in names
            and c.func.attr not in NOT_RUNS
            and not c.func.attr.startswith(("named_", "register_", "load_", "save_", "set_"))
        } - run
        run |= by_method
        # A model handed to a function the caller passed in (UDA's ``evaluate(model, batch)``
        # with ``evaluate`` a parameter): that function runs it.
        run |= {
            a.id
            for c in inside
            if isinstance(c.func, ast.Name) and c.func.id in names
            for a in c.args[:1]
            if isinstance(a, ast.Name) and a.id in names and a.id != c.func.id
        }
        run = {name for name in run if not _sets_mode(inside, name)}
        # A model kept on ``self``: trained here, or, in a method a subclass elsewhere may
        # inherit, any ``self.x(...)`` run under ``no_grad`` (robustdg's ``BaseAlgo``).
        attributes = {dotted(t) for t in map(_callee, inside) if isinstance(t, ast.Attribute)}
        held = attributes & kept
        if id(func) in guarded:
            own = {f.name for f in facts.functions}  # ``self.load(...)``: a method, no model
            held |= {
                a
                for a in attributes
                if a and a.startswith("self.") and a.count(".") == 1 and a[5:] not in own
            }
        held = {name for name in held if name and not _sets_mode(inside, name)}
        if run or held:
            pairs = [[names.index(n), n] for n in sorted(run)]
            pairs += [[HELD, n] for n in sorted(n for n in held if n)]
            out[qualname(facts, func)] = [func.lineno, pairs, looped, sorted(by_method & run)]
    return out


# Methods of a module that do not run it.
NOT_RUNS = frozenset({"parameters", "buffers", "state_dict", "modules", "children", "apply",
                      "to", "cuda", "cpu", "float", "half", "double", "bfloat16", "eval",
                      "train", "zero_grad", "requires_grad_", "get", "items", "keys", "values",
                      "append", "extend", "update", "format", "join", "split", "size", "item",
                      "numpy", "tolist", "dim"})  # fmt: skip


def _no_grad_decorated(func: Function) -> bool:
    return any(modes.mentions(d, modes.NO_GRAD) for d in func.decorator_list)


HELD = -2  # the "position" of a model an evaluation method keeps on ``self``


def trained_attributes(facts: Facts) -> set[str]:
    """``self.model``-like attributes put in training mode somewhere in the module."""
    return {
        name
        for c in facts.methods_called("train")
        if (name := dotted(c.func.value)) and name.startswith("self.") and name.count(".") == 1  # type: ignore[attr-defined]
    }


FUNCTION_HEADS = ("get_", "make_", "load_", "build_", "create_", "compute_", "calc_")


def _evaluates(func: Function) -> bool:
    """Named like an evaluation, or decorated with ``no_grad``/``inference_mode`` (a ``with``
    of those inside it counts too: ``runners``)."""
    return bool(modes.EVAL_NAME.search(func.name)) or any(
        modes.mentions(d, modes.NO_GRAD) for d in func.decorator_list
    )


def _sets_mode(calls: list[ast.Call], model: str) -> bool:
    """Does any of ``calls`` put ``model`` in eval mode (``.eval()``, ``.train(False)``)?"""
    for call in calls:
        owner = dotted(call.func.value) if isinstance(call.func, ast.Attribute) else None
        if owner == model and (method(call) == "eval" or train_false(call)):
            return True
    return False


def runner_calls(facts: Facts) -> list[list[Any]]:
    """Calls passing a model that is in training mode there: ``[line, col, callee, position,
    keyword, model, why]`` - after ``model.train()`` with no ``.eval()`` since, or built in the
    same function with no ``.eval()`` since (modules start in training mode), or a name bound
    to a model kept on ``self`` that was put in training mode (``model = self.model.to(d)``
    after ``self.model.train()``)."""
    named = models(facts) | set(_aliases(facts))
    out = _held_calls(facts)
    for call in facts.calls if named else ():
        if not any(isinstance(a, ast.Name) and a.id in named for a in call.args):
            continue
        owner = dotted(call.func.value) if isinstance(call.func, ast.Attribute) else None
        if method(call) in ("train", "eval", "to", "cuda") and owner != "self":
            continue  # ``model.to(device)``; not UDA's ``self.eval(get_acc, None, model)``
        for index, arg in enumerate(call.args):
            if isinstance(arg, ast.Name) and arg.id in named:
                why = _training_mode(facts, call, arg.id)
                callee = ref(facts, call) if why else None
                if callee:
                    looping = _evaluation_loop(facts, call)
                    made = facts.last_value(facts.scope_of(call), arg.id, call.lineno)
                    fresh = isinstance(made, ast.Call) and why.startswith(f"`{arg.id}` built")
                    cls = built_from(facts, made) if fresh else None  # type: ignore[arg-type]
                    entry = [call.lineno, call.col_offset, callee, index, None, arg.id, why]
                    out.append([*entry, looping, cls])
    return out


def _evaluation_loop(facts: Facts, call: ast.Call) -> bool:
    """Is ``call`` made batch by batch in a loop that trains nothing (no backward, no step)?"""
    loop = next((o for o in facts.around(call) if isinstance(o, LOOPS)), None)
    return loop is not None and not any(
        method(c) in ("backward", "step") for c in facts.calls_in(loop)
    )


def _training_mode(facts: Facts, call: ast.Call, model: str) -> str:
    """Why ``model`` is in training mode at ``call`` (empty: it may not be)."""
    scope = facts.scope_of(call)
    before = [
        c
        for c in _mode_calls(facts, scope)
        if dotted(c.func.value) == model  # type: ignore[attr-defined]
        and (c.lineno, c.col_offset) < (call.lineno, call.col_offset)
    ]
    if before:
        last = before[-1]
        return (
            ""
            if method(last) == "eval" or train_false(last)
            else f"`{model}.train()` at line {last.lineno}"
        )
    value = facts.last_value(scope, model, call.lineno)
    if isinstance(value, ast.Call) and built_from(facts, value):
        return f"`{model}` built at line {value.lineno} (a module starts in training mode)"
    kept = _aliases(facts).get(model)
    if kept is not None and value is not None:
        modes_before = [
            c
            for c in _mode_calls(facts, scope)
            if dotted(c.func.value) == kept  # type: ignore[attr-defined]
            and (c.lineno, c.col_offset) < (call.lineno, call.col_offset)
        ]
        latest = modes_before[-1] if modes_before else None
        if latest is not None and method(latest) == "train" and not train_false(latest):
            return f"`{model}` is `{kept}`, put in training mode at line {latest.lineno}"
    return ""


MOVES = ("to", "cuda", "cpu", "float", "half", "double")


def _aliases(facts: Facts) -> dict[str, str]:
    """Names bound to a model kept on ``self`` that is put in training mode here:
    ``model = self.model.to(self.device)`` → ``{"model": "self.model"}``."""
    found = facts.memo.get("aliases")
    if isinstance(found, dict):
        return found
    kept = trained_attributes(facts)
    out: dict[str, str] = {}
    for name, values in facts.bindings.items() if kept else ():
        if "." in name:
            continue
        held = set()
        for value in values:
            while isinstance(value, ast.Call) and method(value) in MOVES:
                value = value.func.value  # type: ignore[attr-defined]
            held.add(dotted(value))
        if len(held) == 1 and held <= kept:
            out[name] = held.pop()  # type: ignore[assignment]
    facts.memo["aliases"] = out
    return out


def _held_calls(facts: Facts) -> list[list[Any]]:
    """Calls of a method of ``self`` made while a model kept on ``self`` is in training mode:
    after ``self.model.train()`` in the same function, or after a call of a method of this
    module that leaves it so (``self._train_loop()`` then ``self._val_loop()``)."""
    kept = trained_attributes(facts)
    if not kept:
        return []
    leaves = {
        f.name: model
        for f in facts.functions
        for model in kept
        if _last_mode(facts, facts.calls_in(f), model) == "train"
    }
    out: list[list[Any]] = []
    defined = {
        qual.rpartition(".")[2]
        for qual, (_line, pairs, *_) in runners(facts).items()
        if any(position == HELD for position, _name in pairs)
    }
    own = {f.name for f in facts.functions}
    inherits = any(c.bases for c in facts.classes)
    for call in facts.calls if defined or inherits else ():
        name = dotted(call.func) or ""
        if not name.startswith("self.") or name.count(".") != 1:
            continue
        if name[5:] not in defined and (name[5:] in own or not inherits):
            continue  # neither an evaluation method here nor one a base class may define
        before = [
            c
            for c in facts.calls_in(facts.scope_of(call))
            if (c.lineno, c.col_offset) < (call.lineno, call.col_offset)
        ]
        for model in kept:
            mode = _last_mode(facts, before, model)
            why = f"`{model}.train()` before it" if mode == "train" else ""
            if mode is None:
                setter = [
                    c
                    for c in before
                    if leaves.get((dotted(c.func) or "").removeprefix("self.")) == model
                ]
                why = (
                    f"`{dotted(setter[-1].func)}()` at line {setter[-1].lineno} leaves it so"
                    if setter
                    else ""
                )
            callee = ref(facts, call) if why else None
            if callee:
                looping = _evaluation_loop(facts, call)
                entry = [call.lineno, call.col_offset, callee, HELD, None, model, why, looping]
                out.append([*entry, None])
    return out


def _last_mode(facts: Facts, calls: list[ast.Call], model: str) -> str | None:
    """ "train" or "eval": the last mode ``calls`` put ``model`` in (None: none)."""
    found = None
    for call in calls:
        owner = dotted(call.func.value) if isinstance(call.func, ast.Attribute) else None
        if owner == model and method(call) in ("train", "eval"):
            found = "eval" if method(call) == "eval" or train_false(call) else "train"
    return found


def _mode_calls(facts: Facts, scope: ast.AST) -> list[ast.Call]:
    """The ``x.train(...)``/``x.eval()`` calls in a scope, in source order (asked per call)."""
    key = f"mode_calls:{id(scope)}"
    found = facts.memo.get(key)
    if not isinstance(found, list):
        modes_set = {id(c) for m in ("train", "eval") for c in facts.methods_called(m)}
        found = facts.memo[key] = [c for c in facts.calls_in(scope) if id(c) in modes_set]
    return found


def eval_uses(facts: Facts) -> list[list[Any]]:
    """Calls of a function named like an evaluation, each with whether a model it is passed
    was put in eval mode just before (``[line, callee, evaluating]``): when every caller in the
    project does so, an evaluation function that never calls ``.eval()`` itself is fine
    (``_join.withheld``)."""
    out: list[list[Any]] = []
    for call in facts.calls:
        name = dotted(call.func)
        if not name or not modes.EVAL_NAME.search(name.rpartition(".")[2]):
            continue
        callee = ref(facts, call)
        if callee is None or name.rpartition(".")[2] in ("eval", "train"):
            continue
        scope = facts.scope_of(call)
        passed = {dotted(a) for a in [*call.args, *(k.value for k in call.keywords)]}
        before = [
            c
            for c in _mode_calls(facts, scope)
            if (c.lineno, c.col_offset) < (call.lineno, call.col_offset)
        ]
        evaluating = any(_last_mode(facts, before, m) == "eval" for m in passed if m)
        out.append([call.lineno, callee, evaluating])
    return out
