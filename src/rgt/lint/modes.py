"""Mode and graph rules: train/eval mode, gradients in evaluation, loss tensors kept alive.

An "evaluation function" is one named like ``evaluate``/``validate``/``test`` that loops over
data. Lightning and Hugging Face ``Trainer`` code is skipped: the framework sets the modes.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from rgt.lint._facts import Facts
from rgt.lint._kept_evals import added_in_place, kept_eval_losses
from rgt.lint._kept_losses import kept_losses
from rgt.lint._kept_steps import kept_steps
from rgt.lint._mode_grads import NO_GRAD as NO_GRAD  # re-exported: ``_flow_modes``
from rgt.lint._mode_grads import eval_loops_with_grad, guarded, phase_loops
from rgt.lint._mode_grads import mentions as mentions
from rgt.lint._mode_grads import mentions_head as mentions_head
from rgt.lint._mode_helpers import train_false
from rgt.lint._mode_loops import (
    BUILTINS,
    Function,
    evaluation_branches,
    inline_evaluation,
    left_in_eval,
    train_after_eval,
    within,
)
from rgt.lint._mode_models import BELOW as BELOW  # re-exported: the words ask for it
from rgt.lint._mode_models import TORCHVISION_NORMED as TORCHVISION_NORMED
from rgt.lint._mode_models import framework_driven, may_change, zoo_model
from rgt.lint._mode_restore import one_way_switch, repeated_switch
from rgt.lint._mode_shared import late_guards, looped_evaluations
from rgt.lint._mode_siblings import forgotten_modes
from rgt.lint._model import Hit, Rule, Severity
from rgt.lint._nodes import dotted, method

B, W = Severity.BUG, Severity.WARNING
RULES = (
    Rule(
        "RGT201",
        W,
        "eval-without-model-eval",
        "this evaluation loop runs with dropout and "
        "batch-norm in training mode: nothing in the module calls .eval()",
        "call model.eval() before evaluating",
        "O5",
    ),
    Rule(
        "RGT202",
        B,
        "no-train-after-eval",
        "the model is put in eval mode inside the "
        "training loop and never back: training continues without dropout and with frozen "
        "batch-norm statistics",
        "call model.train() at the start of each epoch",
        "O5",
    ),
    Rule(
        "RGT203",
        W,
        "eval-without-no-grad",
        "this evaluation loop builds autograd graphs it never uses (memory and time)",
        "wrap it in `with torch.no_grad():` (or torch.inference_mode())",
        "M15",
    ),
    Rule(
        "RGT204",
        W,
        "loss-tensor-accumulated",
        "a running total keeps every step's loss "
        "tensor, and with it the whole autograd graph: memory grows each step",
        "accumulate loss.item() (or loss.detach())",
        "M20",
    ),
)
_EVAL_HEAD = "evaluate|evaluation|eval|validate|validation|valid|val|test"
_EVAL_TAIL = "eval|evaluate|evaluation|validate|validation|val|test"
# A word inside a longer name (dnnbrain's ``dnn_test_model``); not ``val``/``valid``, which
# name data as often as a step (``get_val_loader``).
_EVAL_MID = "eval|evaluate|evaluation|validate|validation|test"
# A private method's leading underscores are not part of its name (FCGF's ``_valid_epoch``).
EVAL_NAME = re.compile(rf"(?i)^_*({_EVAL_HEAD})(_|$)|_({_EVAL_TAIL})$|_({_EVAL_MID})_")
# The definition of a function EVAL_NAME matches, as it reads in the source.
EVAL_DEF = re.compile(
    rf"def[\s\\]+_*(?i:({_EVAL_HEAD})(_|(?!\w))|\w*_({_EVAL_TAIL})(?!\w)|\w*_({_EVAL_MID})_)"
)
# Layers whose behaviour the mode switches (mode-bound).
LAYER_WORDS = frozenset({"Dropout", "dropout", "Dropout1d", "Dropout2d", "Dropout3d",
                         "AlphaDropout", "BatchNorm1d", "BatchNorm2d", "BatchNorm3d",
                         "SyncBatchNorm"})  # fmt: skip
# A parameter named for a function, not a model (an optimizer's ``closure``: line searches
# call it).
FUNCTION_NAME = re.compile(r"(?i)(^|_)(fn|func|function|callback|hook|metric|closure)s?$")


def may_find(text: str) -> bool:
    """False only when no rule here can fire in ``text`` (``_run.worth_parsing``): every one
    needs a ``.backward()``, an evaluation function defined in the file, or an ``.eval()``
    before a function of the file runs the model (``_graphs_after_eval``)."""
    needs = ("backward", ".eval()", "training_step")  # a Lightning step keeping its loss too
    return any(w in text for w in needs) or EVAL_DEF.search(text) is not None


def check(facts: Facts, words: set[str]) -> Iterator[Hit]:
    yield from kept_losses(facts)  # a framework sets the modes, not what a loop keeps
    yield from kept_steps(facts)
    yield from kept_eval_losses(facts)
    yield from added_in_place(facts)
    if framework_driven(facts):
        return
    evals = [f for f in facts.functions if _is_eval(facts, f)]
    any_eval_call = bool([c for c in facts.methods_called("eval") if not c.args])
    any_eval_call |= any(train_false(c) for c in facts.methods_called("train"))
    for func in evals:
        if not any_eval_call and _layers(facts, func, words) and not _chooses_mode(facts, func):
            yield Hit("RGT201", func, func.name)
        if not _under_no_grad(facts, func):
            yield Hit("RGT203", func, func.name)
    yield from _graphs_after_eval(facts, evals)
    for hit in phase_loops(facts):
        if hit.code == "RGT203" or may_change(facts, hit.node, words):
            yield hit
    yield from late_guards(facts)
    yield from looped_evaluations(facts, EVAL_NAME)
    for hit in eval_loops_with_grad(facts, evals):
        around = facts.functions_around(hit.node)
        if not (around and _under_no_grad(facts, around[0])):
            yield hit
    for hit in (
        *train_after_eval(facts),
        *left_in_eval(facts),
        *repeated_switch(facts),
        *one_way_switch(facts),
    ):
        if may_change(facts, hit.node, words):
            yield hit
    yield from forgotten_modes(facts)
    # Layers the modes change, seen here or in the files around; or an ``.eval()`` here: its
    # author knows the model has some (MultiBench's encoders come from its callers).
    if words & LAYER_WORDS or facts.methods_called("eval"):
        yield from inline_evaluation(facts)
        yield from evaluation_branches(facts)


def _chooses_mode(facts: Facts, func: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Does the evaluation put a model in training mode itself before its loop (``net.train()``
    first thing in ``evaluate``)? Then its author chose the mode: DMS evaluates with batch-norm
    in training mode on purpose (batch size 1, statistics too unstable to keep). A ``.train()``
    after the loop only restores the mode: the loop still ran in whatever mode it was."""
    loops = facts.loops_in(func)
    first = loops[0].lineno if loops else func.end_lineno or func.lineno
    calls = facts.calls_in(func)
    return any(method(c) == "train" and not c.args and c.lineno < first for c in calls)


def _layers(facts: Facts, func: ast.FunctionDef | ast.AsyncFunctionDef, words: set[str]) -> bool:
    """Can the model this evaluation runs have dropout or batch-norm? When every model it runs
    is built here from a class defined here (fairseq's Demucs benchmark), only the layers this
    file and its imports name count; otherwise any in the file's group of files."""
    if _local_models(facts, func):
        return any(w.startswith(BELOW) for w in words)
    return bool(words & LAYER_WORDS) or zoo_model(facts)


def _local_models(facts: Facts, func: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Is every model ``func`` runs a name bound, before the call and in the same function, to
    a class of this module (``demucs = Demucs(...).to(device)``)?"""
    params = _params(func)
    runs = [c for c in facts.calls_in(func) if _runs_a_model(facts, c, params)]
    classes = {c.name for c in facts.classes}
    for call in runs:
        target = call.func.value if method(call) == "forward" else call.func  # type: ignore[attr-defined]
        if not isinstance(target, ast.Name) or target.id in params:
            return False
        value = facts.last_value(facts.scope_of(call), target.id, call.lineno)
        if value is None or facts.construction(value) not in classes:
            return False
    return bool(runs)


def _is_eval(facts: Facts, func: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    if not EVAL_NAME.search(func.name) or func.name.endswith("_step"):
        return False
    body = facts.calls_in(func)
    if any(method(c) in ("backward", "step") for c in body):
        return False
    if not facts.loops_in(func):
        return False
    params = _params(func)
    return any(_runs_a_model(facts, c, params) or _infers(c, params, body) for c in body)


# A model's own prediction method (SAM-Adapter's ``model.infer(inp)``)
INFER = ("infer", "inference", "predict")


def _infers(call: ast.Call, params: set[str], body: list[ast.Call]) -> bool:
    """``model.infer(x)`` on a parameter the function puts in eval mode itself."""
    if method(call) not in INFER or not isinstance(call.func.value, ast.Name):  # type: ignore[attr-defined]
        return False
    owner = call.func.value.id  # type: ignore[attr-defined]
    return owner in params and any(
        method(c) == "eval" and dotted(c.func.value) == owner  # type: ignore[attr-defined]
        for c in body
    )


def _params(func: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    return {a.arg for a in func.args.posonlyargs + func.args.args + func.args.kwonlyargs}


def _runs_a_model(facts: Facts, call: ast.Call, params: set[str]) -> bool:
    """``model(x)`` / ``net.forward(x)``: a call of a parameter or of a name bound to a value,
    not of a builtin, a function defined here or an imported one (detectron2's
    ``do_test(cfg, model)`` calls ``inference_on_dataset``, which sets the modes itself)."""
    if method(call) == "forward":
        return True
    if isinstance(call.func, ast.Attribute):
        key = dotted(call.func) or ""
        return held_module(facts, key) or _forward_helper(facts, key)
    if not isinstance(call.func, ast.Name) or call.func.id in BUILTINS:
        return False
    name = call.func.id
    if FUNCTION_NAME.search(name):  # fairseq's eval_f0_error(samples, distortion_fn)
        return False
    if name in params:
        return True
    defined = name in facts.aliases or any(f.name == name for f in facts.functions)
    return not defined and name in facts.bindings


def _graphs_after_eval(
    facts: Facts, evals: list[ast.FunctionDef | ast.AsyncFunctionDef]
) -> Iterator[Hit]:
    """A function of this module that runs a model over batches, called right after
    ``model.eval()`` with that model and outside ``no_grad`` (MTN's ``run_epoch``, shared by
    training and validation: after ``model.eval()`` it builds the validation's graphs for
    nothing). Not one named like an evaluation (checked as one), nor one that steps."""
    bodies = {f.name: f for f in facts.functions if f not in evals}
    for switch in facts.methods_called("eval") if bodies else ():
        model = dotted(switch.func.value) if not switch.args else None  # type: ignore[attr-defined]
        if model is None or guarded(facts, switch):
            continue
        scope = facts.scope_of(switch)
        for call in facts.calls_in(scope):
            if call.lineno <= switch.lineno:
                continue
            if method(call) == "train" and dotted(call.func.value) == model:  # type: ignore[attr-defined]
                break
            func = bodies.get(dotted(call.func) or "")
            if func is not None and _runs_passed(facts, func, call, model):
                yield Hit("RGT203", call, f"`{func.name}` runs `{model}` after `{model}.eval()` "
                          f"at line {switch.lineno}, with autograd on")  # fmt: skip
                break


def _runs_passed(facts: Facts, func: Function, call: ast.Call, model: str) -> bool:
    """Does ``func``, called as ``call``, run ``model`` (passed to it) in a loop, with no
    ``no_grad`` of its own and no optimizer step or backward pass in its own body?"""
    if guarded(facts, call) or mentions(func, NO_GRAD) or not facts.loops_in(func):
        return False
    names = [a.arg for a in func.args.posonlyargs + func.args.args]
    passed = [i for i, a in enumerate(call.args) if dotted(a) == model]
    params = {names[i] for i in passed if i < len(names)}
    body = facts.calls_in(func)
    if not params or any(method(c) in ("backward", "step") for c in body):
        return False
    return any(
        (isinstance(c.func, ast.Name) and c.func.id in params)
        or (method(c) == "forward" and dotted(c.func.value) in params)  # type: ignore[attr-defined,operator]
        for c in body
    )


def _forward_helper(facts: Facts, key: str) -> bool:
    """Is ``self.name`` a method of this module that runs a model kept on ``self``, with no
    ``no_grad`` of its own (fairchem's ``validate`` calls ``self._forward(batch)``, which runs
    ``self.model``)?"""
    owner, _, name = key.partition(".")
    if owner != "self" or "." in name:
        return False
    for func in (f for f in facts.functions if f.name == name):
        calls = facts.calls_in(func)
        if mentions(func, NO_GRAD) or any(method(c) == "backward" for c in calls):
            continue
        if any(held_module(facts, dotted(c.func) or "") for c in calls):
            return True
    return False


def held_module(facts: Facts, key: str) -> bool:
    """Is ``self.x`` a model kept on ``self``: ``.train()``, ``.eval()`` or ``.parameters()``
    is called on it somewhere in the module (tacto's ``self.model``, whose parameters go to
    the optimizer)?"""
    if not key.startswith("self.") or key.count(".") != 1:
        return False
    return any(
        dotted(c.func.value) == key  # type: ignore[attr-defined]
        for m in ("train", "eval", "parameters")
        for c in facts.methods_called(m)
    )


def _runs_outside_guard(facts: Facts, func: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Does every model call of ``func`` run outside the ``with torch.no_grad()`` blocks it
    has (AlwaysBeDreaming's ``validation`` moves the batch to the GPU under ``no_grad`` and
    runs ``model.forward`` after the block: every batch builds a graph)?"""
    guards = [w for w in facts.withs if within(w, func) and mentions_head(w)]
    if not guards or any(mentions(d, NO_GRAD) for d in func.decorator_list):
        return False
    params = _params(func)
    runs = [c for c in facts.calls_in(func) if _runs_a_model(facts, c, params)]
    if not runs or any(within(c, w) for c in runs for w in guards):
        return False
    # the author switches recording on and off (``set_grad_enabled``): chosen (one walk, asked
    # last, of the rare function found so far)
    return not mentions(func, ("set_grad_enabled", "enable_grad"))


def _under_no_grad(
    facts: Facts, func: ast.FunctionDef | ast.AsyncFunctionDef, depth: int = 0
) -> bool:
    """Does ``func`` run under ``no_grad``: its own, or one around a call of it, or around a
    call of the function that calls it, a few calls up (KAIR's ``test`` wraps ``_test_video``,
    which calls ``_test_clip``)?"""
    if mentions(func, NO_GRAD):
        return not _runs_outside_guard(facts, func)
    for call in facts.callers(func.name):
        for outer in facts.around(call):
            if isinstance(outer, ast.With | ast.FunctionDef) and mentions_head(outer):
                return True
        caller = facts.functions_around(call)
        up = depth < 3 and caller and caller[0] is not func
        if up and _under_no_grad(facts, caller[0], depth + 1):
            return True
    return False
