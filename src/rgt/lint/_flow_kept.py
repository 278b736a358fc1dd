"""An object a class keeps on ``self`` from its constructor's arguments (``self.model = model``
in ``__init__``): what a method does with ``self.model`` it does with the object the caller
built and handed to the constructor (``Trainer(Net(), ...)`` in another module). The
summaries key such a use by the class's name and the constructor argument's position, as a
call of the class passes them (``_flow.loss_params``; the join then matches ``passes``)."""

from __future__ import annotations

import ast

from rgt.lint._facts import MOVES, Facts
from rgt.lint._nodes import dotted

Function = ast.FunctionDef | ast.AsyncFunctionDef


def kept_param(facts: Facts, node: ast.AST) -> tuple[str, int, str] | None:
    """``(class, position, parameter)`` when ``node`` is ``self.attr`` in a method of a class
    whose ``__init__`` binds ``self.attr`` to one of its parameters (or to ``param.to(...)``,
    ``param.cuda()``), and to nothing else anywhere in the module."""
    key = dotted(node)
    if key is None or not key.startswith("self.") or key.count(".") != 1:
        return None
    around = facts.functions_around(node)
    owner = _class_of(facts, around[-1]) if around else None
    init = _init(owner) if owner is not None else None
    values = facts.bindings.get(key, [])
    if owner is None or init is None or len(values) != 1:
        return None
    value = _unmoved(values[0])
    names = _params(init)
    inside = init.lineno <= value.lineno <= (init.end_lineno or init.lineno)
    if inside and isinstance(value, ast.Name) and value.id in names:
        return owner.name, names.index(value.id), value.id
    return None


def _class_of(facts: Facts, func: Function) -> ast.ClassDef | None:
    return next((c for c in facts.classes if func in c.body), None)


def _init(cls: ast.ClassDef) -> Function | None:
    return next((f for f in cls.body if isinstance(f, Function) and f.name == "__init__"), None)


def _unmoved(value: ast.expr) -> ast.expr:
    """``model.to(device)``, ``model.cuda()`` are ``model``."""
    while (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Attribute)
        and value.func.attr in MOVES
    ):
        value = value.func.value
    return value


def _params(func: Function) -> list[str]:
    names = [a.arg for a in func.args.posonlyargs + func.args.args]
    return names[1:] if names[:1] in (["self"], ["cls"]) else names


# Calls that hand back the model they are given, wrapped: it trains and runs as that model.
WRAPPERS = ("DataParallel", "DistributedDataParallel", "FullyShardedDataParallel", "compile",
            "DDP", "FSDP", "convert_sync_batchnorm")  # fmt: skip


def unwrapped(facts: Facts, call: ast.Call) -> ast.expr | None:
    """The model a call hands back: ``model.to(device)``/``model.cuda()`` is ``model``,
    ``nn.DataParallel(model)``, ``torch.compile(model)`` are the model wrapped (None: the
    call makes something else); ``nn.DataParallel(model).cuda()`` is the wrapped model moved."""
    func = call.func
    if isinstance(func, ast.Attribute) and func.attr in MOVES:
        inner = func.value
        if not isinstance(inner, ast.Call) or unwrapped(facts, inner) is not None:
            return inner
    name = (facts.call_name(call) or "").rpartition(".")[2]
    builtin = isinstance(func, ast.Name) and name == "compile"  # Python's own compile()
    return call.args[0] if name in WRAPPERS and call.args and not builtin else None


def returns_held(facts: Facts, cls: ast.ClassDef) -> str | None:
    """The class (as spelled) of the module a class builds in ``__init__`` and whose output its
    ``forward`` returns whole (``self.head = Head(16, 3)``, ``return self.head(x)``): the
    model's output is that module's, wherever it is defined (``_join_losses``)."""
    forward = next((f for f in cls.body if isinstance(f, Function) and f.name == "forward"), None)
    returns = [r.value for r in facts.returns_in(forward)] if forward is not None else []
    if len(returns) != 1 or returns[0] is None:
        return None
    value: ast.AST | None = returns[0]
    if isinstance(value, ast.Name):
        value = facts.last_value(facts.scope_of(value), value.id, value.lineno)
    attr = dotted(value.func) if isinstance(value, ast.Call) else None
    if attr is None or not attr.startswith("self.") or attr.count(".") != 1:
        return None
    made = [v for v in facts.bindings.get(attr, []) if isinstance(v, ast.Call)]
    name = dotted(_unmoved(made[0]).func) if len(made) == 1 else None  # type: ignore[attr-defined]
    return name if name and name.rpartition(".")[2][:1].isupper() and "." not in name else None
