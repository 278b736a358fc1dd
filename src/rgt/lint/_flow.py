"""The parts of a module's summary (``_cross``) about models: where a model's output goes.

A model class's ``forward`` may return probabilities; a function may feed the output of the
model passed to it into a loss (``loss_params``), or run it in an evaluation loop without
``.eval()`` (``runners``); a call may pass a model built from a class, or one still in
training mode (``passes``, ``runner_calls``). Positions count a method's arguments without
``self``, as its callers pass them.
"""

from __future__ import annotations

import ast
import os
import re
from typing import Any

from rgt.lint import losses, modes
from rgt.lint._facts import Facts
from rgt.lint._flow_data import (
    loaders_over_classes,
    made_by,
    qualname,
    ref,
    repeats,
    rng_fields,
    samplers,
    step_calls,
    steppers,
)
from rgt.lint._nodes import dotted, method
from rgt.lint._suite import in_suite_test

__all__ = [
    "classes", "loaders_over_classes", "loss_params", "model_losses", "passes", "repeats",
    "runner_calls", "runners", "samplers", "step_calls", "steppers", "sys_paths",
]  # fmt: skip
Function = ast.FunctionDef | ast.AsyncFunctionDef


def params(func: Function) -> list[str]:
    """The arguments a caller passes, in order (``self``/``cls`` of a method left out)."""
    names = [a.arg for a in func.args.posonlyargs + func.args.args]
    return names[1:] if names[:1] in (["self"], ["cls"]) else names


def classes(facts: Facts) -> dict[str, dict[str, Any]]:
    """Each class: its line, bases, what its ``forward`` returns (``probs``), and the RNG facts
    of a Dataset (``_flow_data.rng_fields``)."""
    models = facts.memo.get("probs")
    if not isinstance(models, dict):
        models = losses._Probabilities(facts).models
    out: dict[str, dict[str, Any]] = {}
    for cls in facts.classes:
        entry: dict[str, Any] = {"line": cls.lineno}
        bases = [n for n in (dotted(b) for b in cls.bases) if n]
        if bases:
            entry["bases"] = bases
        for kind in ("softmax", "sigmoid"):
            if losses.WHOLE in models[kind].get(cls.name, ()):
                entry["probs"] = kind
        entry.update(rng_fields(facts, cls))
        out[cls.name] = entry
    return out


def origin(facts: Facts, node: ast.AST, depth: int = 0) -> ast.Call | None:
    """The call a value comes from, through names bound once and shape methods:
    ``loss(y_pred.resize(1, J), y)`` with ``y_pred = model(x)`` is ``model(x)``."""
    while isinstance(node, ast.Call) and method(node) in losses.SHAPES:
        node = node.func.value  # type: ignore[attr-defined]  # a method: an Attribute
    if isinstance(node, ast.Name) and depth < 3:
        value = facts.last_value(facts.scope_of(node), node.id, node.lineno)
        return None if value is None else origin(facts, value, depth + 1)
    return node if isinstance(node, ast.Call) else None


def _callee(call: ast.Call) -> ast.AST:
    return call.func.value if method(call) == "forward" else call.func  # type: ignore[attr-defined]


def _loss_calls(facts: Facts) -> list[tuple[ast.Call, str]]:
    found = facts.memo.get("loss_calls")
    if isinstance(found, list):
        return found
    bound = {key.rpartition(".")[2] for key in facts.bindings}
    out = []
    for call in facts.calls_ending(lambda last: last in losses.LOSS_NAMES or last in bound):
        if call.args and (
            losses._is_loss(facts, facts.call_name(call) or "")
            or facts.bindings.get(dotted(call.func) or "")
        ):
            kind = losses._loss_kind(facts, call)
            if kind is not None:
                out.append((call, kind))
    facts.memo["loss_calls"] = out
    return out


def loss_params(facts: Facts) -> dict[str, list[list[Any]]]:
    """Functions whose parameter is called and its output fed to a CE/NLL/BCE loss:
    ``qualname -> [[position, name, loss line, loss col, kind]]``, also when the function
    passes the parameter on to a function here that does."""
    out: dict[str, list[list[Any]]] = {}
    for call, kind in _loss_calls(facts):
        source = origin(facts, call.args[0])
        target = None if source is None else _callee(source)
        if not isinstance(target, ast.Name):
            continue
        for func in facts.functions_around(call)[:1]:
            names = params(func)
            if target.id in names:
                entry = [names.index(target.id), target.id, call.lineno, call.col_offset, kind]
                out.setdefault(qualname(facts, func), []).append(entry)
    if out:
        _forwarded(facts, out)
    return out


def _forwarded(facts: Facts, out: dict[str, list[list[Any]]]) -> None:
    """One step of a parameter passed on: ``train(self, model)`` calling
    ``self._train_batch(x, model)``, whose ``model`` feeds the loss."""
    for short, qual in [(q.rpartition(".")[2], q) for q in out]:
        for call in facts.callers(short):
            around = facts.functions_around(call)
            if not around:
                continue
            func = around[0]
            names = params(func)
            for index, arg in enumerate(call.args):
                if isinstance(arg, ast.Name) and arg.id in names:
                    for entry in out[qual]:
                        if entry[0] == index:
                            hit = [names.index(arg.id), arg.id, *entry[2:]]
                            out.setdefault(qualname(facts, func), []).append(hit)


def built_from(facts: Facts, node: ast.AST) -> str | None:
    """The class (dotted, as spelled here) a value was built from: ``Net()``,
    ``model.Net().cuda()``,
    or a name or ``self.attr`` bound only to such calls."""
    if isinstance(node, ast.Call):
        name = dotted(made_by(node))
        return name if name and name.rpartition(".")[2][:1].isupper() else None
    key = dotted(node)
    if key is None:
        return None
    values = facts.bindings.get(key, [])
    if isinstance(node, ast.Name):
        last = facts.last_value(facts.scope_of(node), node.id, node.lineno)
        values = [last] if isinstance(last, ast.expr) else values
    names = {built_from(facts, v) for v in values if isinstance(v, ast.Call)}
    return names.pop() if len(names) == 1 and None not in names else None


def model_losses(facts: Facts) -> list[list[Any]]:
    """Losses applied to the output of a model built from a class not defined here:
    ``[loss line, col, kind, class as spelled]``."""
    local = {c.name for c in facts.classes}
    out = []
    for call, kind in _loss_calls(facts):
        source = origin(facts, call.args[0])
        if source is None or in_suite_test(facts, call):
            continue
        cls = built_from(facts, _callee(source))
        if cls and cls not in local:
            out.append([call.lineno, call.col_offset, kind, cls])
    return out


def passes(facts: Facts) -> list[list[Any]]:
    """Calls passing a model built from a class: ``[line, col, callee, position, keyword,
    class]`` (``train.source_only(encoder, classifier)`` with
    ``classifier = model.Classifier()``)."""
    built = models(facts)
    out = []
    for call in facts.calls:
        if not any(isinstance(a, ast.Name) and a.id in built for a in call.args) and not any(
            isinstance(k.value, ast.Name) and k.value.id in built for k in call.keywords
        ):
            continue
        callee = ref(facts, call)
        if callee is None:
            continue
        pairs: list[tuple[int, str | None, ast.expr]] = list(
            (i, None, a) for i, a in enumerate(call.args)
        )
        pairs += [(-1, k.arg, k.value) for k in call.keywords if k.arg]
        for index, keyword, arg in pairs:
            if isinstance(arg, ast.Name) and arg.id in built:
                cls = built_from(facts, arg)
                if cls:
                    out.append([call.lineno, call.col_offset, callee, index, keyword, cls])
    return out


def runners(facts: Facts) -> dict[str, list[Any]]:
    """Evaluation functions (named like one, or running under ``no_grad``) that run a model
    passed to them in a loop and never put it in eval mode, never back-propagate:
    ``qualname -> [line, [[position, name], ...]]`` (each parameter it runs like a model)."""
    found = facts.memo.get("runners")
    if isinstance(found, dict):
        return found
    out: dict[str, list[Any]] = {}
    facts.memo["runners"] = out
    guarded = {
        id(f) for w in facts.withs if modes._mentions_head(w) for f in facts.functions_around(w)
    }
    kept = trained_attributes(facts)
    for func in facts.functions:
        names = params(func)
        if not (names or kept) or not (id(func) in guarded or _evaluates(func)):
            continue
        if not facts.loops_in(func):
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
        run = {name for name in run if not _sets_mode(inside, name)}
        held = {dotted(t) for t in map(_callee, inside) if isinstance(t, ast.Attribute)} & kept
        held = {name for name in held if name and not _sets_mode(inside, name)}
        if run or held:
            pairs = [[names.index(n), n] for n in sorted(run)]
            pairs += [[HELD, n] for n in sorted(n for n in held if n)]
            out[qualname(facts, func)] = [func.lineno, pairs]
    return out


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
        modes._mentions(d, modes.NO_GRAD) for d in func.decorator_list
    )


def _sets_mode(calls: list[ast.Call], model: str) -> bool:
    """Does any of ``calls`` put ``model`` in eval mode (``.eval()``, ``.train(False)``)?"""
    for call in calls:
        owner = dotted(call.func.value) if isinstance(call.func, ast.Attribute) else None
        if owner == model and (method(call) == "eval" or modes._train_false(call)):
            return True
    return False


def runner_calls(facts: Facts) -> list[list[Any]]:
    """Calls passing a model that is in training mode there: ``[line, col, callee, position,
    keyword, model, why]`` - after ``model.train()`` with no ``.eval()`` since, or built in the
    same function with no ``.eval()`` since (modules start in training mode)."""
    named = models(facts)
    out = _held_calls(facts)
    for call in facts.calls if named else ():
        if not any(isinstance(a, ast.Name) and a.id in named for a in call.args):
            continue
        if method(call) in ("train", "eval", "to", "cuda"):
            continue
        for index, arg in enumerate(call.args):
            if isinstance(arg, ast.Name) and arg.id in named:
                why = _training_mode(facts, call, arg.id)
                callee = ref(facts, call) if why else None
                if callee:
                    out.append([call.lineno, call.col_offset, callee, index, None, arg.id, why])
    return out


NOT_MODELS = re.compile(
    r"Dataset|Loader|Sampler|Writer|Logger|Parser|Optim|Scheduler|Loss|Config|Path|Meter"
)
MODEL_METHODS = ("parameters", "named_parameters", "train", "eval", "state_dict", "zero_grad")


def models(facts: Facts) -> set[str]:
    """Names that hold a model here: ``m.parameters()``, ``m.train()``... is called on them."""
    found = facts.memo.get("models")
    if not isinstance(found, set):
        found = {
            c.func.value.id  # type: ignore[attr-defined]
            for name in MODEL_METHODS
            for c in facts.methods_called(name)
            if isinstance(c.func.value, ast.Name)  # type: ignore[attr-defined]
        }
        for name, values in facts.bindings.items():
            if "." in name or name in found or not all(isinstance(v, ast.Call) for v in values):
                continue
            made = {dotted(made_by(v)) or "" for v in values}  # type: ignore[arg-type]
            last = {m.rpartition(".")[2] for m in made}
            if all(n[:1].isupper() and not NOT_MODELS.search(n) for n in last):
                found.add(name)
        facts.memo["models"] = found
    return found


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
            if method(last) == "eval" or modes._train_false(last)
            else f"`{model}.train()` at line {last.lineno}"
        )
    value = facts.last_value(scope, model, call.lineno)
    if isinstance(value, ast.Call) and built_from(facts, value):
        return f"`{model}` built at line {value.lineno} (a module starts in training mode)"
    return ""


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
        for qual, (_line, pairs) in runners(facts).items()
        if any(position == HELD for position, _name in pairs)
    }
    for call in facts.calls if defined else ():
        name = dotted(call.func) or ""
        if not name.startswith("self.") or name.count(".") != 1 or name[5:] not in defined:
            continue
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
                out.append([call.lineno, call.col_offset, callee, HELD, None, model, why])
    return out


def _last_mode(facts: Facts, calls: list[ast.Call], model: str) -> str | None:
    """ "train" or "eval": the last mode ``calls`` put ``model`` in (None: none)."""
    found = None
    for call in calls:
        owner = dotted(call.func.value) if isinstance(call.func, ast.Attribute) else None
        if owner == model and method(call) in ("train", "eval"):
            found = "eval" if method(call) == "eval" or modes._train_false(call) else "train"
    return found


def _mode_calls(facts: Facts, scope: ast.AST) -> list[ast.Call]:
    """The ``x.train(...)``/``x.eval()`` calls in a scope, in source order (asked per call)."""
    key = f"mode_calls:{id(scope)}"
    found = facts.memo.get(key)
    if not isinstance(found, list):
        modes_set = {id(c) for m in ("train", "eval") for c in facts.methods_called(m)}
        found = facts.memo[key] = [c for c in facts.calls_in(scope) if id(c) in modes_set]
    return found


def sys_paths(facts: Facts) -> list[str]:
    """Folders a script puts on ``sys.path`` (``sys.path.insert(0, osp.join(this_dir, "lib"))``),
    as absolute paths: its own imports then resolve there too."""
    out = []
    for call in facts.calls_ending(lambda last: last in ("insert", "append")):
        if not (facts.call_name(call) or "").startswith("sys.path.") or not call.args:
            continue
        for value in _path_args(facts, call.args[-1]):
            where = _path_value(facts, value, 0)
            if where:
                out.append(os.path.normpath(where))
    return out


def _path_args(facts: Facts, node: ast.expr) -> list[ast.expr]:
    """The value given to ``sys.path.insert``; for a helper's parameter
    (``def add_path(path): sys.path.insert(0, path)``), what its callers here pass."""
    around = facts.functions_around(node)
    if not isinstance(node, ast.Name) or not around or node.id not in params(around[0]):
        return [node]
    index = params(around[0]).index(node.id)
    calls = facts.callers(around[0].name)
    return [c.args[index] for c in calls if len(c.args) > index]


def _path_value(facts: Facts, node: ast.AST, depth: int) -> str | None:
    """A path expression's value, when it is built from ``__file__`` and constants."""
    here = os.path.dirname(os.path.abspath(facts.path))
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return os.path.join(here, node.value)
    if isinstance(node, ast.Name):
        if node.id == "__file__":
            return os.path.abspath(facts.path)
        values = facts.bindings.get(node.id, [])
        return _path_value(facts, values[-1], depth + 1) if values and depth < 4 else None
    if not isinstance(node, ast.Call) or depth > 6:
        return None
    last = (facts.call_name(node) or "").rpartition(".")[2]
    parts = [_path_value(facts, a, depth + 1) for a in node.args]
    if last in ("dirname", "abspath", "realpath", "normpath") and len(parts) == 1 and parts[0]:
        return os.path.dirname(parts[0]) if last == "dirname" else parts[0]
    if last == "join" and parts and all(parts):
        tail = [a.value for a in node.args[1:] if isinstance(a, ast.Constant)]
        return os.path.join(parts[0], *tail) if len(tail) == len(parts) - 1 else None  # type: ignore[arg-type]
    return None
