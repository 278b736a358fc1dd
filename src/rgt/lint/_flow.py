"""The parts of a module's summary (``_cross``) about models: where a model's output goes.

A model class's ``forward`` may return probabilities; a function may feed the output of the
model passed to it into a loss (``loss_params``), or run it in an evaluation loop without
``.eval()`` (``_flow_modes``); a call may pass a model built from a class (``passes``).
Positions count a method's arguments without ``self``, as its callers pass them. The data and
update parts are ``_flow_data``'s, the ``sys.path`` part ``_flow_paths``'.
"""

from __future__ import annotations

import ast
import re
from typing import Any

from rgt.lint import data, losses
from rgt.lint._facts import Facts
from rgt.lint._flow_data import made_by, qualname, rng_fields
from rgt.lint._flow_kept import kept_param, returns_held, unwrapped
from rgt.lint._flow_make import held_parts
from rgt.lint._loss_kinds import _loss_kind
from rgt.lint._mode_loops import BUILTINS
from rgt.lint._nodes import dotted, method, unshaped
from rgt.lint._suite import in_suite_test

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
            positions = models[kind].get(cls.name, set())
            if losses.WHOLE in positions:
                entry["probs"] = kind
            elif positions:  # ``return probs, classes``: which parts of the tuple
                entry.setdefault("probs_at", {})[kind] = sorted(positions)
        through = _returns_param(facts, cls)
        if through is not None:
            entry["returns_param"] = through
        held = returns_held(facts, cls) if "probs" not in entry else None
        if held is not None:
            entry["returns_held"] = held
        if bases and not any(getattr(f, "name", "") == "forward" for f in cls.body):
            entry["inherits_forward"] = True  # its output is a base class's (``_join_losses``)
        entry.update(rng_fields(facts, cls))
        init = next((f for f in cls.body if getattr(f, "name", "") == "__init__"), None)
        parts = held_parts(facts, init, entry["holds"]) if "holds" in entry and init else None
        if parts:
            entry["parts"] = parts  # what a held object runs (``_join_data._held_draw``)
        if _own_step(cls):
            entry["own_step"] = True  # a scheduler of its own (``_join.withheld``: RGT106)
        if _unsharded(facts, cls):
            entry["unsharded"] = True  # ``_join_data``: RGT303 at a loader with workers over it
        out[cls.name] = entry
    return out


def _own_step(cls: ast.ClassDef) -> bool:
    """A class with a ``step`` of its own and no base class: a learning-rate schedule whose
    order is its own (tllib's ``StepwiseLR`` sets the rate for its count, then counts: stepped
    first, it sets the initial rate), not one of torch's."""
    bases = {dotted(b) for b in cls.bases}
    plain = bases <= {"object", "ABC", "abc.ABC"}
    return plain and any(isinstance(f, ast.FunctionDef) and f.name == "step" for f in cls.body)


def _unsharded(facts: Facts, cls: ast.ClassDef) -> bool:
    """An IterableDataset whose ``__iter__`` never asks which worker runs it: each worker
    of a DataLoader yields every item (``data._unsharded``, across files)."""
    bases = {(facts.qualname(b) or dotted(b) or "").rsplit(".", 1)[-1] for b in cls.bases}
    return "IterableDataset" in bases and not data._mentions_any(cls, data.SHARD_WORDS)


def _returns_param(facts: Facts, cls: ast.ClassDef) -> int | None:
    """The constructor argument whose module's output ``forward`` returns whole:
    ``self.head = head`` in ``__init__``, ``return self.head(features, mask)`` (a model that
    wraps a backbone and a head passed in: its output is the head's)."""
    body = {f.name: f for f in cls.body if isinstance(f, ast.FunctionDef)}
    init, forward = body.get("__init__"), body.get("forward")
    if init is None or forward is None:
        return None
    names = params(init)
    returns = [r.value for r in facts.returns_in(forward)]
    calls = [r for r in returns if isinstance(r, ast.Call)]
    if len(calls) != 1 or len(returns) != 1:
        return None
    attr = dotted(calls[0].func) or ""
    if not attr.startswith("self.") or attr.count(".") != 1:
        return None
    held = [v for v in facts.bindings.get(attr, []) if isinstance(v, ast.Name)]
    return names.index(held[0].id) if len(held) == 1 and held[0].id in names else None


def origin(facts: Facts, node: ast.AST, depth: int = 0) -> ast.Call | None:
    """The call a value comes from, through names bound once and shape methods:
    ``loss(y_pred.resize(1, J), y)`` with ``y_pred = model(x)`` is ``model(x)``."""
    node = unshaped(node)
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
        if losses.first_arg(call) is not None and (
            losses._is_loss(facts, facts.call_name(call) or "")
            or facts.bindings.get(dotted(call.func) or "")
        ):
            kind = _loss_kind(facts, call)
            if kind is not None:
                out.append((call, kind))
    facts.memo["loss_calls"] = out
    return out


def loss_params(facts: Facts) -> dict[str, list[list[Any]]]:
    """Functions whose parameter is called and its output fed to a CE/NLL/BCE loss:
    ``qualname -> [[position, name, loss line, loss col, kind(, part)]]``, also when the
    function passes the parameter on to a function here that does (``part``: the loss takes
    that part of the tuple the model returns, ``_, exist = model(x)``)."""
    out: dict[str, list[list[Any]]] = {}
    for call, kind in _loss_calls(facts):
        source, part = origin_part(facts, losses.first_arg(call))  # type: ignore[arg-type]
        target = None if source is None else _callee(source)
        tail = [kind] if part == losses.WHOLE else [kind, part]
        kept = kept_param(facts, target) if isinstance(target, ast.Attribute) else None
        if kept is not None and part == losses.WHOLE:  # ``self.model(x)``, ``Trainer(model)``
            entry = [kept[1], kept[2], call.lineno, call.col_offset, *tail]
            out.setdefault(kept[0], []).append(entry)
        if not isinstance(target, ast.Name):
            continue
        for func in facts.functions_around(call)[:1]:
            names = params(func)
            if target.id in names:
                entry = [names.index(target.id), target.id, call.lineno, call.col_offset, *tail]
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


def class_like(name: str) -> bool:
    """Is a dotted name's last part spelled like a class: capitalised, after any leading
    underscores of a private class (``_Net``)?"""
    return name.rpartition(".")[2].lstrip("_")[:1].isupper()


def built_from(facts: Facts, node: ast.AST, loose: bool = False, depth: int = 0) -> str | None:
    """The class (dotted, as spelled here) a value was built from: ``Net()``,
    ``model.Net().cuda()``, ``nn.DataParallel(model)``, ``model.to(device)`` (the model),
    or a name or ``self.attr`` bound only to such calls. ``loose``: any name called, however
    spelled (ACGAN's ``_netD_CIFAR10``), for a join that checks it is a class."""
    inner = unwrapped(facts, node) if isinstance(node, ast.Call) else None
    if inner is not None:  # ``model.to(device)``, ``nn.DataParallel(model)``: the model
        return built_from(facts, inner, loose, depth + 1) if depth < 4 else None
    if isinstance(node, ast.Call):
        name = dotted(made_by(node))
        return name if name and (loose or class_like(name)) else None
    key = dotted(node)
    if key is None:
        return None
    values = facts.bindings.get(key, [])
    if isinstance(node, ast.Name):
        last = facts.last_value(facts.scope_of(node), node.id, node.lineno)
        values = [last] if isinstance(last, ast.expr) else values
    named = isinstance(node, ast.Name)  # its value before this line: no loop back to itself
    calls = [
        v for v in values if isinstance(v, ast.Call) and (named or not _rebound(facts, v, key))
    ]
    names = {built_from(facts, v, loose, depth + 1) for v in calls}
    return names.pop() if len(names) == 1 and None not in names else None


def _rebound(facts: Facts, value: ast.Call, key: str) -> bool:
    """``self.model = self.model.to(device)``: the same object again, not another binding."""
    inner = unwrapped(facts, value)
    return inner is not None and dotted(inner) == key


def model_losses(facts: Facts) -> list[list[Any]]:
    """Losses applied to the output of a model built from a class not defined here, or to one
    part of the tuple it returns (``probs, classes = model(x)``): ``[loss line, col, kind,
    class as spelled, position]`` (position ``losses.WHOLE``: the whole output)."""
    local = {c.name for c in facts.classes}
    out = []
    applied = [(c, k, losses.first_arg(c)) for c, k in _loss_calls(facts)]
    for call, kind, given in applied + _wrapped(facts):
        source, position = origin_part(facts, given)  # type: ignore[arg-type]
        if source is None or in_suite_test(facts, call):
            continue
        cls = built_from(facts, _callee(source), loose=True)
        if cls and cls not in local and cls.split(".")[0] not in BUILTINS:
            entry = [call.lineno, call.col_offset, kind, cls, position]
            held = _constructor_classes(facts, _callee(source))
            out.append([*entry, held] if held else entry)
    return out + _criterion_pairs(facts)


def _wrapped(facts: Facts) -> list[tuple[ast.Call, str, ast.expr | None]]:
    """Calls of a loss wrapper defined here (``_wrappers``): (call, kind, the argument the
    wrapper hands to the loss)."""
    from rgt.lint import _wrappers

    wraps = facts.memo.get("loss_wrappers")
    if not isinstance(wraps, dict):
        wraps = _wrappers.wrappers(facts, _loss_calls(facts))
    return [
        (call, kind, _wrappers.argument(call, position, name))
        for key, entries in wraps.items()
        for call in _wrappers.calls_of(facts, key)
        for position, name, kind, _line in entries
    ]


def _constructor_classes(facts: Facts, node: ast.AST) -> list[str | None]:
    """The classes of the models handed to the constructor a name was built by
    (``CombinedModel(gnn, transformer)``: ``[CensNet, TransformerBinaryClassifier]``)."""
    values = [node] if isinstance(node, ast.Call) else facts.bindings.get(dotted(node) or "", [])
    calls = [v for v in values if isinstance(v, ast.Call)]
    if len(calls) != 1:
        return []
    call = calls[0]
    while isinstance(call.func, ast.Attribute) and isinstance(call.func.value, ast.Call):
        call = call.func.value  # ``CombinedModel(...).to(device)``
    found = [built_from(facts, a) if isinstance(a, ast.Name) else None for a in call.args]
    return found if any(found) else []


CRITERIA = {"CrossEntropyLoss": "ce", "NLLLoss": "nll", "BCEWithLogitsLoss": "bce"}


def _criterion_pairs(facts: Facts) -> list[list[Any]]:
    """A module class handed to a wrapper with the loss it will be trained with, skorch's way:
    ``NeuralNet(MyModule, criterion=nn.CrossEntropyLoss)`` (ray-skorch#18):
    ``[line, col, kind, module class as spelled, losses.WHOLE]``."""
    out = []
    for call in facts.calls:
        given = {k.arg: k.value for k in call.keywords if k.arg in ("criterion", "module")}
        criterion = given.get("criterion")
        name = (dotted(criterion) or "").rpartition(".")[2] if criterion is not None else ""
        module = given.get("module", call.args[0] if call.args else None)
        spelled = dotted(module) if module is not None else None
        if name in CRITERIA and spelled and class_like(spelled):
            out.append([call.lineno, call.col_offset, CRITERIA[name], spelled, losses.WHOLE])
    return out


def origin_part(facts: Facts, node: ast.AST, depth: int = 0) -> tuple[ast.Call | None, int]:
    """``origin``, and which part of a returned tuple the value is: ``probs`` after
    ``probs, classes = model(x)`` is part 0 of ``model(x)`` (``losses.WHOLE``: all of it)."""
    node = unshaped(node)
    if isinstance(node, ast.Name) and depth < 3:
        value = facts.last_value(facts.scope_of(node), node.id, node.lineno)
        if isinstance(value, ast.Subscript) and isinstance(value.value, ast.Call):
            index = value.slice
            if isinstance(index, ast.Constant) and isinstance(index.value, int):
                return value.value, index.value
        if value is not None:
            return origin_part(facts, value, depth + 1)
    return origin(facts, node, depth), losses.WHOLE


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
            if all(class_like(n) and not NOT_MODELS.search(n) for n in last):
                found.add(name)
        facts.memo["models"] = found
    return found
