"""The parts of a module's summary (``_cross``) that let an object be followed through calls:
the functions that build and return an object (factories), the functions whose parameter
becomes a DataLoader's dataset, the calls that hand a built object to another function, and
the functions that draw from NumPy's global RNG.

A project seldom builds its Dataset beside its DataLoader: ``build_dataset(cfg)`` returns
``DepthContrastDataset(cfg)`` in ``datasets/__init__.py``, ``get_loader(dataset, ...)`` builds
the DataLoader over its parameter, and ``utils/main_utils.py`` joins the two
(``get_loader(dataset=build_dataset(config))``); the Dataset's ``__getitem__`` calls
``get_transform3d`` of a fourth module, which draws from ``np.random``. Each module says its
part here; ``_join_data`` joins them through the project's imports.
"""

from __future__ import annotations

import ast
from typing import Any

from rgt.lint import data
from rgt.lint._facts import Facts
from rgt.lint._flow_data import _in_evaluation, class_of, made_by, qualname
from rgt.lint._flow_kept import kept_param
from rgt.lint._mode_loops import BUILTINS
from rgt.lint._nodes import constant, dotted, keyword
from rgt.lint._suite import in_suite_test

Function = ast.FunctionDef | ast.AsyncFunctionDef
MAX_MAKERS = 4  # classes one factory may return (a choice by a config's name)
MAX_PASSES = 64  # calls handing an object on, kept per module
# What a factory never returns a project's object from: a library's constructor or a builtin.
LIBRARIES = ("torch.", "numpy.", "np.", "nn.", "F.", "torchvision.", "math.", "os.", "re.")
NOT_DRAWS = {"seed", "RandomState", "default_rng", "Generator", "get_state", "set_state"}


def maker(facts: Facts, node: ast.AST | None, depth: int = 0) -> str | None:
    """The dotted name (as spelled here) of the call a value was made by, through a name bound
    once in its scope: ``Net(...)``, ``build_dataset(cfg)``, ``models.get(cfg).cuda()``;
    None for a builtin's or a library's call."""
    if isinstance(node, ast.Name) and depth < 3:
        value = facts.last_value(facts.scope_of(node), node.id, node.lineno)
        return maker(facts, value, depth + 1)
    if not isinstance(node, ast.Call):
        return None
    name = dotted(made_by(node))
    if name is None or name.split(".")[0] in BUILTINS or name.startswith("self."):
        return None
    full = facts.qualname(made_by(node)) or name
    return None if full.startswith(LIBRARIES) or name.startswith(LIBRARIES) else name


def factories(facts: Facts) -> dict[str, list[Any]]:
    """Module-level functions, and methods of module-level classes (``Net.build(cfg)``:
    ``return cls(...)``), that return an object a call built (``return Net(cfg)``, a name
    bound to one, or a class picked from a registry: ``MODELS[name](cfg)`` with ``MODELS =
    {"net": Net, ...}``): ``qualname -> [line, [maker as spelled, ...]]``; the join decides
    whether a maker is a class of the project or another factory."""
    out: dict[str, list[Any]] = {}
    owners: list[tuple[str | None, Function]] = [
        (None, f) for f in facts.tree.body if isinstance(f, Function)
    ]
    for cls in (c for c in facts.tree.body if isinstance(c, ast.ClassDef)):
        owners += [(cls.name, f) for f in cls.body if isinstance(f, Function)]
    for owner, func in owners:
        made: list[str] = []
        for node in facts.returns_in(func):
            if facts.functions_around(node)[:1] != [func]:
                continue  # a nested function's return
            for name in _made(facts, node.value, owner):
                if name not in made and name != func.name:
                    made.append(name)
        if made:
            out[f"{owner}.{func.name}" if owner else func.name] = [func.lineno, made[:MAX_MAKERS]]
    return out


def _made(facts: Facts, value: ast.expr | None, owner: str | None) -> list[str]:
    """The makers a returned value may come from (``_flow_make.factories``)."""
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Subscript):
        return _registry(facts, value.func.value)
    name = maker(facts, value)
    if name == "cls" and owner:  # ``return cls(...)`` in a classmethod
        return [owner]
    return [name] if name is not None else []


def _registry(facts: Facts, node: ast.expr) -> list[str]:
    """The classes a module-level dictionary maps names to (``MODELS = {"net": Net}``)."""
    values = facts.bindings.get(dotted(node) or "", []) if isinstance(node, ast.Name) else []
    if len(values) != 1 or not isinstance(values[0], ast.Dict):
        return []
    names = [dotted(v) for v in values[0].values if v is not None]
    return [n for n in names if n and n.rpartition(".")[2][:1].isupper()][:MAX_MAKERS]


def draws(facts: Facts) -> dict[str, list[Any]]:
    """Module-level functions that draw from NumPy's global RNG themselves: ``name -> [line
    of the first draw, the call as written]`` (an augmentation helper a Dataset calls)."""
    out: dict[str, list[Any]] = {}
    for func in facts.tree.body:
        if not isinstance(func, Function):
            continue
        for call in facts.calls_in(func):
            name = facts.call_name(call) or ""
            if name.startswith("numpy.random.") and name.rpartition(".")[2] not in NOT_DRAWS:
                out[func.name] = [call.lineno, name.replace("numpy.", "np.", 1)]
                break
    return out


def loader_params(facts: Facts) -> dict[str, list[list[Any]]]:
    """Functions that build a training DataLoader with workers and no ``worker_init_fn`` over
    their parameter: ``qualname -> [[position, name, loader line, col, workers as written]]``."""
    out: dict[str, list[list[Any]]] = {}
    for call in data.loaders(facts):
        dataset = call.args[0] if call.args else keyword(call, "dataset")
        if dataset is None or not _augmenting(facts, call):
            continue
        given = keyword(call, "num_workers")
        site = [call.lineno, call.col_offset, ast.unparse(given) if given else "num_workers"]
        kept = kept_param(facts, dataset) if isinstance(dataset, ast.Attribute) else None
        if kept is not None:  # ``DataLoader(self.dataset)``, kept from ``Trainer(dataset)``
            out.setdefault(kept[0], []).append([kept[1], kept[2], *site])
        name = dataset.id if isinstance(dataset, ast.Name) else ""
        for func in facts.functions_around(call)[:1] if name else ():
            names = _params(func)
            if name in names:
                out.setdefault(qualname(facts, func), []).append([names.index(name), name, *site])
    return out


def _augmenting(facts: Facts, call: ast.Call) -> bool:
    """A loader whose workers may draw augmentations: workers (or a number not known here), no
    ``worker_init_fn``, not an evaluation loader, not in a test suite."""
    if keyword(call, "worker_init_fn") is not None or in_suite_test(facts, call):
        return False
    if data._names_eval(facts, call) or _in_evaluation(facts, call):
        return False
    count = data.workers(call)
    return not (isinstance(count, int) and count <= 0)


def _params(func: Function) -> list[str]:
    names = [a.arg for a in func.args.posonlyargs + func.args.args]
    return names[1:] if names[:1] in (["self"], ["cls"]) else names


def item_helpers(facts: Facts) -> dict[str, list[str]]:
    """For each class with the code a DataLoader worker runs (``__getitem__``, ``__iter__``,
    ``__call__`` and the methods of its own they call), the functions of the project it calls
    there, as spelled (``augmentor_utils.random_flip_along_x``, ``get_transform3d``): where a
    draw from NumPy's global RNG may hide (``draws`` of their module)."""
    top = {f.name for f in facts.tree.body if isinstance(f, Function)}
    imported = {a.asname or a.name.split(".")[0] for i in facts.imports for a in i.names}
    out: dict[str, list[str]] = {}
    for cls in facts.classes:
        found: list[str] = []
        for call in _item_calls(facts, cls):
            name = dotted(call.func)
            if name is None or name.startswith("self.") or name in found:
                continue
            head = name.split(".")[0]
            if head in top or (head in imported and not _library(facts, call)):
                found.append(name)
        if found:
            out[cls.name] = found[:8]
    return out


def _item_calls(facts: Facts, cls: ast.ClassDef) -> list[ast.Call]:
    methods = {f.name: f for f in cls.body if isinstance(f, Function)}
    runs = [methods[m] for m in ("__getitem__", "__iter__", "__call__") if m in methods]
    for func in runs:  # grows: the methods the item code calls on ``self``
        for call in facts.calls_in(func):
            name = (dotted(call.func) or "").removeprefix("self.")
            if name in methods and methods[name] not in runs:
                runs.append(methods[name])
    return [c for f in runs for c in facts.calls_in(f)]


def _library(facts: Facts, call: ast.Call) -> bool:
    return (facts.call_name(call) or "").startswith(LIBRARIES)


def loaders_made(facts: Facts) -> list[list[Any]]:
    """Training DataLoaders over an object a function call made (``build_dataset(cfg)``, not
    a class: ``_flow_data.loaders_over_classes`` has those): ``[line, col, maker as spelled,
    workers as written]``, for the join to follow the maker as a factory."""
    out = []
    for call in data.loaders(facts):
        dataset = call.args[0] if call.args else keyword(call, "dataset")
        name = maker(facts, dataset) if _augmenting(facts, call) else None
        if name is None or name.rpartition(".")[2].lstrip("_")[:1].isupper():
            continue
        given = keyword(call, "num_workers")
        text = ast.unparse(given) if given is not None else "num_workers"
        out.append([call.lineno, call.col_offset, name, text])
    return out


def spawns(facts: Facts) -> list[int]:
    """Lines that set the ``spawn`` (or ``forkserver``) start method: a worker started so
    imports NumPy afresh, seeded from the OS, instead of forking the parent's global RNG (the
    fix of DepthContrast#14); an RNG object a Dataset keeps is pickled, state and all, still."""
    calls = facts.calls_ending(lambda last: last == "set_start_method")
    return [c.lineno for c in calls if c.args and constant(c.args[0]) in ("spawn", "forkserver")]


def held_parts(facts: Facts, init: ast.AST, holds: dict[str, list[Any]]) -> dict[str, list[str]]:
    """The classes of the objects listed in a held object's construction (``self.augment =
    Compose([RandomMirror(), RandomCrop()])``): ``attr -> [class as spelled]``; the held object
    runs them, and they may draw from NumPy's global RNG (``_join_data._held_draw``)."""
    out: dict[str, list[str]] = {}
    for call in facts.calls_in(init):
        statement = facts.assignment_of(call)
        if statement is None or call.lineno not in {h[0] for h in holds.values()}:
            continue
        listed = [*call.args, *(k.value for k in call.keywords)]
        items = [e for a in listed if isinstance(a, ast.List | ast.Tuple) for e in a.elts]
        found = [
            c for c in (class_of(facts, e) for e in items[:16] if isinstance(e, ast.Call)) if c
        ]
        for target in statement.targets if found else []:
            key = dotted(target) or ""
            if key.startswith("self.") and key[5:] in holds:
                out[key[5:]] = sorted(set(found))
    return out
