"""Loss and optimizer rules: what goes into the loss, and the order of the update.

A value is "probabilities" when it is a softmax/sigmoid call, a local name bound only to one, a
call of an ``nn.Softmax``/``nn.Sigmoid`` object, or the output of a model whose ``forward``
returns one (followed across ``__init__`` and methods through ``self.attr`` bindings).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from rgt.lint import _wrappers
from rgt.lint._facts import Facts
from rgt.lint._loss_kinds import BCE_LOGITS, CE, NLL, _loss_kind
from rgt.lint._model import Hit, Rule, Severity
from rgt.lint._nodes import constant, dotted, keyword, method, unshaped
from rgt.lint._overrides import holder
from rgt.lint._update_order import update_order

B, W, A = Severity.BUG, Severity.WARNING, Severity.INFO
RULES = (
    Rule(
        "RGT101",
        B,
        "softmax-into-cross-entropy",
        "CrossEntropyLoss applies log_softmax itself: "
        "softmax before it flattens the gradients and training plateaus",
        "feed the raw logits; apply softmax only for predictions",
        "O12",
    ),
    Rule(
        "RGT102",
        B,
        "probabilities-into-nll-loss",
        "NLLLoss expects log-probabilities; softmax output gives a meaningless loss",
        "use log_softmax, or CrossEntropyLoss on logits",
        "O16",
    ),
    Rule(
        "RGT103",
        B,
        "sigmoid-into-bce-with-logits",
        "BCEWithLogitsLoss applies sigmoid itself: a sigmoid before it squashes twice",
        "feed the raw logits",
        "O13",
    ),
    Rule(
        "RGT104",
        A,
        "adam-weight-decay",
        "Adam's weight_decay is L2 through the adaptive preconditioner, not decoupled decay",
        "use AdamW (decoupled weight decay) if decay was meant",
        "O6",
    ),
    Rule(
        "RGT105",
        B,
        "step-without-zero-grad",
        "gradients accumulate across steps: nothing clears them between optimizer steps",
        "call optimizer.zero_grad() once per step (or "
        "make the accumulation explicit with `if (i + 1) % accum == 0`)",
        "O4",
    ),
    Rule(
        "RGT106",
        B,
        "scheduler-before-optimizer",
        "scheduler.step() runs before "
        "optimizer.step() in the same loop: the first learning rate is skipped",
        "call scheduler.step() after optimizer.step()",
        "O8",
    ),
)

SOFTMAX = ("torch.softmax", "torch.nn.functional.softmax", "torch.special.softmax")
SIGMOID = ("torch.sigmoid", "torch.nn.functional.sigmoid", "torch.special.expit")
LOSS_NAMES = {CE[1], NLL[1], BCE_LOGITS[1]}  # functional losses; loss objects are bindings
# A loss is named by one of its classes or functions, Adam by its name, an update by
# ``.step()``; searched for as the parts they share ("ntropy": cross_entropy, CrossEntropyLoss,
# binary_cross_entropy_with_logits): each search reads the whole text.
NEEDS = ("ntropy", "NLLLoss", "nll_loss", "WithLogits", "Adam", "step")


def may_find(text: str) -> bool:
    """False only when no rule here can fire in ``text`` (``_run.worth_parsing``)."""
    return any(name in text for name in NEEDS)


def check(facts: Facts) -> Iterator[Hit]:
    probs = _Probabilities(facts)
    # The summary's too (``_flow``): the models only, never ``probs`` itself (it holds
    # ``facts``: a cycle would keep the syntax tree alive, the collector being off).
    facts.memo["probs"] = probs.models
    bound = {key.rpartition(".")[2] for key in facts.bindings}  # loss objects: ``criterion``
    kinds: list[tuple[ast.Call, str]] = []
    for call in facts.calls_ending(
        lambda last: last in LOSS_NAMES or last == "Adam" or last in bound
    ):
        name = facts.call_name(call) or ""
        if _is_loss(facts, name) and first_arg(call) is not None:
            kind = _loss_kind(facts, call)
            if kind is not None:
                kinds.append((call, kind))
                yield from _loss_input(facts, probs, call, kind)
        if _is_adam(name):
            decay = constant(keyword(call, "weight_decay"))
            if isinstance(decay, int | float) and decay > 0:
                yield Hit("RGT104", call)
    facts.memo["loss_calls"] = kinds  # the summary's (``_flow``)
    wraps = _wrappers.wrappers(facts, kinds) if kinds else {}
    facts.memo["loss_wrappers"] = wraps
    yield from _wrappers.hits(facts, probs, wraps)
    yield from update_order(facts)


def first_arg(call: ast.Call) -> ast.expr | None:
    """What a loss is applied to: its first argument, or ``input=``."""
    return call.args[0] if call.args else keyword(call, "input")


def _log_softmax_of_probabilities(facts: Facts, probs: _Probabilities, node: ast.AST) -> bool:
    """``F.log_softmax(p)`` / ``p.log_softmax(1)`` where ``p`` is already a softmax output
    (lightning-bolts' LogisticRegression before its fix)."""
    if not isinstance(node, ast.Call):
        return False
    name = facts.call_name(node) or ""
    if name.rsplit(".", 1)[-1] != "log_softmax":
        return False
    if name.startswith("torch."):  # ``F.log_softmax(p, 1)``, ``torch.log_softmax(p, 1)``
        inner: ast.AST | None = node.args[0] if node.args else None
    else:  # ``p.log_softmax(1)``
        inner = node.func.value if isinstance(node.func, ast.Attribute) else None
    return inner is not None and probs.of(unshaped(inner), "softmax")


def _is_loss(facts: Facts, name: str) -> bool:
    """A functional loss, or a name bound to something (a loss object: ``criterion(...)``)."""
    return name.rsplit(".", 1)[-1] in LOSS_NAMES or bool(facts.bindings.get(name))


def _is_adam(name: str) -> bool:
    return name.endswith((".Adam", "optim.Adam")) or name == "Adam"


def _loss_input(facts: Facts, probs: _Probabilities, call: ast.Call, kind: str) -> Iterator[Hit]:
    first = unshaped(first_arg(call))  # type: ignore[arg-type]  # a loss call has one
    if kind in ("ce", "nll") and probs.of(first, "softmax"):
        yield Hit("RGT101" if kind == "ce" else "RGT102", call)
    elif kind == "nll" and _log_softmax_of_probabilities(facts, probs, first):
        # ``nll_loss(log_softmax(p))`` is ``cross_entropy(p)``: softmax applied twice
        yield Hit("RGT101", call, "log_softmax of a softmax output, then NLLLoss")
    elif kind == "bce" and probs.of(first, "sigmoid"):
        yield Hit("RGT103", call)


class _Probabilities:
    """Is a value probabilities (softmax/sigmoid output), seen whole in this module?"""

    def __init__(self, facts: Facts) -> None:
        self.facts = facts
        # class name → which outputs of its forward are probabilities (WHOLE, or tuple positions)
        self.models = {k: self._returns(k) for k in ("softmax", "sigmoid")}

    def of(self, node: ast.AST, kind: str, own: str | None = None, depth: int = 0) -> bool:
        """``own``: the class ``self`` is (a subclass of the one whose method holds ``node``)."""
        if isinstance(node, ast.Call):
            return self._direct(node, kind) or self._model_output(node, WHOLE, kind, own)
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Call):
            index = constant(node.slice)
            return isinstance(index, int) and self._model_output(node.value, index, kind, own)
        if isinstance(node, ast.Name) and depth < 3:
            value = self.facts.last_value(self.facts.scope_of(node), node.id, node.lineno)
            value = value if value is not None else self._iterated(node)
            return value is not None and self.of(unshaped(value), kind, own, depth + 1)
        return False

    def _iterated(self, node: ast.Name) -> ast.AST | None:
        """``out`` in ``for out in probs:``: a row of what the loop iterates over (a row of
        softmax output is softmax output)."""
        for loop in self.facts.around(node):
            target = getattr(loop, "target", None)
            if isinstance(loop, ast.For) and isinstance(target, ast.Name) and target.id == node.id:
                return loop.iter
        return None

    def _direct(self, node: ast.Call, kind: str) -> bool:
        name = self.facts.call_name(node) or ""
        if name in (SOFTMAX if kind == "softmax" else SIGMOID):
            return True
        key = dotted(node.func)
        if key and self.facts.bindings.get(key):  # self.softmax = nn.Softmax(dim=1)
            values = self.facts.bindings[key]
            return all(self._layer(v, kind.capitalize()) for v in values)
        tensor_method = method(node) == kind and not (key or "").startswith("self.")
        return tensor_method and not name.startswith(("np.", "numpy.", "scipy.", "torch."))

    def _layer(self, value: ast.AST, cls: str) -> bool:
        """``nn.Softmax(dim=1)``, or an ``nn.Sequential(...)`` whose last layer is one."""
        name = self.facts.construction(value) or ""
        if name.rsplit(".", 1)[-1] == cls:
            return True
        if name.endswith("Sequential") and isinstance(value, ast.Call) and value.args:
            last = self.facts.call_name(value.args[-1]) or ""
            return last.rsplit(".", 1)[-1] == cls
        return False

    def _model_output(self, call: ast.Call, position: int, kind: str, own: str | None) -> bool:
        if _calls_self(call):  # ``self(x)`` in a method: this class's own forward
            own = own or self._own_class(call)
            return own is not None and position in self.models[kind].get(own, ())
        for cls, positions in self.models[kind].items():
            if position in positions and self.facts.is_instance_of(call.func, (cls,)):
                return True
        return False

    def _own_class(self, node: ast.AST) -> str | None:
        """The innermost class defined here whose body holds ``node``."""
        cls = holder(self.facts, getattr(node, "lineno", 0))
        return cls.name if cls else None

    def _returns(self, kind: str) -> dict[str, set[int]]:
        """Classes defined here whose ``forward`` always returns ``kind`` output (or a tuple
        with it at the same positions)."""
        found: dict[str, set[int]] = {}
        for cls in self.facts.classes:
            forward = next((f for f in cls.body if getattr(f, "name", "") == "forward"), None)
            if not isinstance(forward, ast.FunctionDef):
                continue
            returns = [r.value for r in self.facts.returns_in(forward)]
            sets = [self._positions(r, kind) for r in returns if r is not None]
            if sets and len(sets) == len(returns):
                common = set.intersection(*sets)
                if common:
                    found[cls.name] = common
        return found

    def _positions(self, node: ast.AST, kind: str) -> set[int]:
        if isinstance(node, ast.Tuple):
            return {i for i, elt in enumerate(node.elts) if self._plain(elt, kind)}
        return {WHOLE} if self._plain(node, kind) else set()

    def _plain(self, node: ast.AST, kind: str, depth: int = 0) -> bool:
        node = unshaped(node)
        name = node.id if isinstance(node, ast.Name) else None
        if isinstance(node, ast.Name):
            node = self.facts.last_value(self.facts.scope_of(node), node.id, node.lineno) or node
        node = unshaped(node)  # ``self.sigmoid(logits).squeeze()``
        if not isinstance(node, ast.Call):
            return False
        if self._direct(node, kind) or self._joined(node, kind, name, depth):
            return True
        return self._held_output(node, kind, depth)

    def _held_output(self, call: ast.Call, kind: str, depth: int) -> bool:
        """``self.head(x)`` with ``self.head = Head(...)``, a class here whose ``forward``
        always returns ``kind`` output (a model returning its heads' outputs in a tuple)."""
        key = dotted(call.func) or ""
        values = self.facts.bindings.get(key, []) if key.startswith("self.") and depth < 2 else []
        made = {(self.facts.construction(v) or "").rpartition(".")[2] for v in values}
        found = [c for c in self.facts.classes if made == {c.name}]
        body = found[0].body if len(found) == 1 else []
        forward = next((f for f in body if getattr(f, "name", "") == "forward"), None)
        if not isinstance(forward, ast.FunctionDef):
            return False
        returns = [r.value for r in self.facts.returns_in(forward)]
        return bool(returns) and all(
            r is not None and self._plain(r, kind, depth + 1) for r in returns
        )

    def _joined(self, call: ast.Call, kind: str, name: str | None, depth: int) -> bool:
        """``out = torch.cat((out, p), dim=-1)`` in a loop, each ``p`` a softmax output: the
        parts joined are all ``kind`` output (the name being built aside)."""
        joined = self.facts.call_name(call) in JOINS and call.args and depth < 2
        parts = getattr(call.args[0], "elts", None) if joined else None
        others = [p for p in parts or () if not (isinstance(p, ast.Name) and p.id == name)]
        return bool(others) and all(self._plain(p, kind, depth + 1) for p in others)


WHOLE = -1  # the whole output, not a tuple position
JOINS = ("torch.cat", "torch.stack", "torch.concat", "torch.concatenate")


def _calls_self(call: ast.Call) -> bool:
    """``self(x)`` or ``self.forward(x)``: a module running its own forward."""
    func = call.func
    if isinstance(func, ast.Attribute) and func.attr == "forward":
        func = func.value
    return isinstance(func, ast.Name) and func.id == "self"
