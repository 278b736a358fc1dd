"""What kind of loss a call applies (``"ce"``, ``"nll"``, ``"bce"``: the losses that take
logits and apply softmax/log-softmax/sigmoid themselves), however the loss is reached: a
functional call, a loss object, a function kept by reference, a parameter's default, or what a
function of the module that builds the loss returns (``self._build_criterion(name)``)."""

from __future__ import annotations

import ast

from rgt.lint._facts import Facts
from rgt.lint._nodes import defaults, dotted

CE = ("CrossEntropyLoss", "cross_entropy")
NLL = ("NLLLoss", "nll_loss")
BCE_LOGITS = ("BCEWithLogitsLoss", "binary_cross_entropy_with_logits")
KINDS = (("ce", CE), ("nll", NLL), ("bce", BCE_LOGITS))


def _loss_kind(facts: Facts, call: ast.Call) -> str | None:
    kind = _named_kind(facts, call)
    if kind is None:
        kind = _local_kind(facts, call)
    if kind is None:
        kind = _referenced_kind(facts, call)
    if kind is None:
        kind = _built_kind(facts, call)
    return kind if kind is not None else _default_kind(facts, call)


def _local_kind(facts: Facts, call: ast.Call) -> str | None:
    """A loss object bound to a local name in the function that calls it (``loss =
    nn.CrossEntropyLoss()`` then ``loss(pred, y)``), where the module binds the same name to
    other things in other functions: the bindings of this function before the call, all one
    loss kind."""
    if not isinstance(call.func, ast.Name) or not facts.functions_around(call):
        return None
    scope = facts.scope_of(call)
    kinds = set()
    for value in facts.bindings.get(call.func.id, ()):
        line = getattr(value, "lineno", call.lineno)
        if line < call.lineno and facts.scope_of(value) is scope:
            made = (facts.construction(value) or "").rpartition(".")[2]
            kinds.add(next((k for k, (cls, _f) in KINDS if made == cls), None))
    return kinds.pop() if len(kinds) == 1 else None


def _built_kind(facts: Facts, call: ast.Call) -> str | None:
    """A loss object made by a function or method of this module that returns one
    (``self.criterion = self._build_criterion(name)``, every loss it can return of one kind:
    ``return nn.BCEWithLogitsLoss()`` in one branch, ``nn.MSELoss()`` in another is "bce")."""
    values = facts.bindings.get(dotted(call.func) or "", [])
    if len(values) != 1 or not isinstance(values[0], ast.Call):
        return None
    last = (dotted(values[0].func) or "").rpartition(".")[2]
    kinds = set()
    for func in (f for f in facts.functions if f.name == last):
        for returned in facts.returns_in(func):
            made = facts.call_name(returned.value) if isinstance(returned.value, ast.Call) else None
            kinds |= {k for k, (cls, _f) in KINDS if (made or "").rpartition(".")[2] == cls}
    return kinds.pop() if len(kinds) == 1 else None


def _referenced_kind(facts: Facts, call: ast.Call) -> str | None:
    """A loss function kept by reference: ``self.loss_func = F.binary_cross_entropy_with_logits``
    then ``self.loss_func(input=logits, target=y)`` (every binding the same kind)."""
    values = facts.bindings.get(dotted(call.func) or "", [])
    kinds = set()
    for value in values:
        name = (facts.qualname(value) or "") if isinstance(value, ast.Attribute | ast.Name) else ""
        head, _, last = name.rpartition(".")
        found = [k for k, (_c, f) in (("ce", CE), ("nll", NLL), ("bce", BCE_LOGITS)) if f == last]
        kinds.add(found[0] if found and head.startswith("torch") else None)
    return kinds.pop() if len(kinds) == 1 else None


def _default_kind(facts: Facts, call: ast.Call) -> str | None:
    """A loss object kept from a parameter's default: ``def __init__(self,
    loss_func=CrossEntropyLoss())`` then ``self.loss_func = loss_func``."""
    values = facts.bindings.get(dotted(call.func) or "", [])
    if len(values) != 1 or not isinstance(values[0], ast.Name):
        return None
    for func in facts.functions_around(values[0])[:1]:
        default = defaults(func).get(values[0].id)
        made = (facts.call_name(default) if default is not None else None) or ""
        for kind, (cls, _function) in (("ce", CE), ("nll", NLL), ("bce", BCE_LOGITS)):
            if made.rsplit(".", 1)[-1] == cls:
                return kind
    return None


def _named_kind(facts: Facts, call: ast.Call) -> str | None:
    name = facts.call_name(call) or ""
    head, _, last = name.rpartition(".")
    some_loss = facts.is_instance_of(call.func, (CE[0], NLL[0], BCE_LOGITS[0]))  # asked once
    for kind, (cls, function) in (("ce", CE), ("nll", NLL), ("bce", BCE_LOGITS)):
        if last == function and head.endswith(("functional", "F")):
            return kind
        if some_loss and facts.is_instance_of(call.func, (cls,)):
            return kind
    return "bce" if some_loss and _class_switch(facts, call) else None


def _class_switch(facts: Facts, call: ast.Call) -> bool:
    """``criterion = nn.CrossEntropyLoss()`` for many classes, ``nn.BCEWithLogitsLoss()`` for
    one (UNet 3+'s ``train_net``, ``if net.n_classes > 1``): logits either way, and a model
    that ends in a sigmoid is the one-class case, so the sigmoid is applied twice."""
    values = facts.bindings.get(dotted(call.func) or "", [])
    made = sorted((facts.construction(v) or "").rpartition(".")[2] for v in values)
    return made == sorted([CE[0], BCE_LOGITS[0]])
