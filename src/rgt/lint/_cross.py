"""What one module tells the others: a small summary, built from its ``Facts`` (no second walk).

A training bug often spans files: the softmax ends a model's ``forward`` in ``models/``, the
``CrossEntropyLoss`` is applied in ``train.py``; a Dataset draws random numbers in
``utils/datasets.py``, the DataLoader that forks its workers is built in ``train.py``. Each
module is analysed alone (in parallel, cached), so each leaves a summary of what it *offers*
(classes whose ``forward`` returns probabilities, Dataset classes holding an RNG, functions that
feed a parameter's output to a loss, evaluation functions that never call ``.eval()``...) and
what it *uses* (a loss applied to an imported model's output, a DataLoader over an imported
Dataset, a call passing a model...). ``_join`` matches the two across the project's imports.
A summary is plain lists and dicts: it is pickled back from a forked child and kept in the cache.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from typing import Any

from rgt.lint import (
    _flow,
    _flow_data,
    _flow_evals,
    _flow_hands,
    _flow_held,
    _flow_leaves,
    _flow_losses,
    _flow_make,
    _flow_modes,
    _flow_order,
    _flow_passes,
    _flow_paths,
    _update_order,
    _wrappers,
)
from rgt.lint._facts import Facts
from rgt.lint._kept_losses import accumulators, kept_calls
from rgt.lint._kept_steps import loss_steps, step_sites
from rgt.lint._nodes import dotted

Summary = dict[str, Any]
# A factory: a function that returns an object built from a class (``return Net(cfg)``,
# ``return cls(...)``, ``return MODELS[name](cfg)``), torch or not: a module another file
# imports it from is summarised (``_run.summarised``) so the joins can follow it.
FACTORY = re.compile(r"^[ \t]*return[ \t]+(?:[\w.]*\.)?(?:[A-Z]\w*|cls|\w+\[[^\]\n]+\])\(", re.M)


def followed(text: str) -> bool:
    """Does an imported module hold what the cross-file joins follow even without torch's
    words: a factory (``FACTORY``)?"""
    return "return" in text and FACTORY.search(text) is not None


def summarize(facts: Facts, noqa: dict[int, frozenset[str]], linked: bool) -> Summary:
    """The module's summary; keys with nothing to say are left out (most modules say little).
    ``linked``: the module imports another linted file or is imported by one. If not, what
    it uses can only match what it offers itself, so a use is looked for only where the
    module offers its match (in a tree of unrelated scripts, most look for nothing)."""
    out: Summary = {"imports": _imports(facts.tree)}
    lazy = _lazy_imports(facts) if facts.functions else []
    if lazy:
        out["lazy_imports"] = lazy
    offers: tuple[tuple[str, Callable[[Facts], Any]], ...] = (
        ("classes", _flow.classes),
        ("loss_params", _flow.loss_params),
        ("loss_wrappers", _offered_wrappers),
        ("accumulators", accumulators),
        ("loss_steps", loss_steps),
        ("eval_returns", _flow_evals.eval_returns),
        ("sched_methods", _flow_order.sched_methods),
        ("opt_methods", _flow_order.opt_methods),
        ("opt_params", _flow_order.opt_params),
        ("sched_params", _flow_order.sched_params),
        ("runners", _flow_modes.runners),
        ("modes_left", _flow_leaves.modes_left),
        ("steppers", _flow_data.steppers),
        ("factories", _flow_make.factories),
        ("draws", _flow_make.draws),
        ("item_helpers", _flow_make.item_helpers),
        ("loader_params", _flow_make.loader_params),
        ("spawns", _flow_make.spawns),
        ("loss_factories", _flow_losses.loss_factories),
        ("kept_params", _flow_held.kept_params),
    )
    for key, work in offers:
        value = work(facts)
        if value:
            out[key] = value
    uses: tuple[tuple[str, Callable[[Facts], Any], str | None], ...] = (
        ("passes", _flow_passes.passes, "loss_params"),
        ("runner_calls", _flow_modes.runner_calls, "runners"),
        ("ctor_calls", _flow_held.ctor_calls, None),
        ("eval_uses", _flow_modes.eval_uses, None),
        ("handed_models", _flow_leaves.handed_models, "modes_left"),
        ("step_calls", _flow_data.step_calls, "steppers"),
        ("loaders", _flow_data.loaders_over_classes, "classes"),
        ("loaders_made", _flow_make.loaders_made, None),
        ("handed", _flow_hands.handed, None),
        ("forwards", _flow_hands.forwards, None),
        ("model_losses", _flow.model_losses, None),
        ("built_losses", _flow_losses.built_losses, None),
        ("wrapper_calls", _wrappers.wrapper_calls, None),
        ("kept_calls", kept_calls, None),
        ("step_sites", step_sites, "loss_steps"),
        ("eval_made", _flow_evals.eval_made, "eval_returns"),
        ("sched_ctors", _update_order.sched_ctors, None),
        ("method_orders", _flow_order.method_orders, "sched_methods"),
        ("sched_calls", _flow_order.sched_calls, None),
        ("samplers", _flow_data.samplers, None),
        ("repeats", _flow_data.repeats, None),
        ("paths", _flow_paths.sys_paths, None),
    )
    for key, work, match in uses:
        if linked or (match is not None and match in out):
            value = work(facts)
            if value:
                out[key] = value
    if noqa:
        out["noqa"] = {str(line): sorted(codes) for line, codes in noqa.items()}
    return out


def _offered_wrappers(facts: Facts) -> dict[str, list[Any]]:
    """The loss wrappers (``_wrappers``) other files can import: module-level functions and
    classes (``losses``' memo, or found again when the rules did not run here)."""
    wraps = facts.memo.get("loss_wrappers")
    if not isinstance(wraps, dict):
        wraps = _wrappers.wrappers(facts, _flow._loss_calls(facts))
    top = {n.name for n in facts.tree.body if isinstance(n, ast.FunctionDef)}
    return {k: v for k, v in wraps.items() if k.startswith("class:") or k in top}


def _imports(tree: ast.Module) -> list[list[Any]]:
    """``[local name, module, level, imported name or None]`` for each import at module level
    (and under a module-level ``if``/``try``): ``from .models import Net`` is
    ``["Net", "models", 1, "Net"]``, ``import utils.datasets as ds`` is
    ``["ds", "utils.datasets", 0, None]``, ``from model import *`` is
    ``["*", "model", 0, None]``."""
    found: list[list[Any]] = []
    todo: list[ast.stmt] = list(tree.body)
    while todo:
        node = todo.pop(0)
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                local = "*" if alias.name == "*" else alias.asname or alias.name
                obj = None if alias.name == "*" else alias.name
                found.append([local, node.module or "", node.level, obj])
        elif isinstance(node, ast.Import):
            for alias in node.names:
                local = alias.asname or alias.name.split(".")[0]
                found.append([local, alias.name if alias.asname else local, 0, None])
        elif isinstance(node, ast.If | ast.Try):
            todo.extend(node.body + node.orelse)
            if isinstance(node, ast.Try):
                todo.extend(s for h in node.handlers for s in h.body)
    return found


def _lazy_imports(facts: Facts) -> list[list[Any]]:
    """``[module, level, imported name or None]`` of the imports inside functions
    (``from models.resnet import get_resnet`` in ``get_model``): not names of the module, but
    files it reaches (``Project.neighbours``); gathered by the one walk (``Facts``)."""
    found: list[list[Any]] = []
    around = facts.functions_around
    for node in facts.imports:
        if not around(node):
            continue
        if isinstance(node, ast.ImportFrom):
            found += [[node.module or "", node.level, a.name] for a in node.names]
        else:
            found += [[a.name, 0, None] for a in node.names]
    return found


def head(name: str) -> str:
    return name.split(".", 1)[0]


def local_class_bases(facts: Facts) -> dict[str, list[str]]:
    """Each class defined here, with the dotted names of its bases."""
    return {c.name: [n for n in (dotted(b) for b in c.bases) if n] for c in facts.classes}
