"""The parts of a module's summary (``_cross``) about data and updates: Dataset classes holding
or drawing random numbers, DataLoaders over a Dataset class, shuffling DistributedSamplers and
loops that read a loader again and again, and functions that step an optimizer."""

from __future__ import annotations

import ast
import re
from typing import Any

from rgt.lint import _clearing, data
from rgt.lint._facts import LOOPS, MOVES, Facts
from rgt.lint._nodes import defaults, dotted, keyword, method
from rgt.lint._suite import in_suite_test
from rgt.lint._update_order import is_optimizer

Function = ast.FunctionDef | ast.AsyncFunctionDef
# An RNG object: made once, in the parent, it is copied into every worker with the same state.
RNG_MAKERS = (
    "numpy.random.RandomState", "numpy.random.default_rng", "numpy.random.Generator",
    "random.Random", "torch.Generator",
)  # fmt: skip
NOT_DRAWS = {
    "seed", "RandomState", "default_rng", "Generator", "get_state", "set_state",
    "SeedSequence", "PCG64", "MT19937", "BitGenerator", "Philox", "SFC64",
}  # fmt: skip
# torch's views of a Dataset: each item is an item of the Dataset given first.
DATASET_VIEWS = frozenset({"ConcatDataset", "Subset", "random_split", "ChainDataset"})
# What a DataLoader worker runs: a Dataset's item or iterator, a transform's call.
DRAWS_IN = ("__getitem__", "__iter__", "__call__")
# Methods a training loop calls once per batch (``trainer.train_step(batch)``).
STEP_NAME = re.compile(r"(?i)step|train|update|batch|optimi|iteration")


def qualname(facts: Facts, func: Function) -> str:
    """``Class.method`` for a method defined right in a class, else the function's name."""
    for cls in facts.classes:
        if func in cls.body:
            return f"{cls.name}.{func.name}"
    return func.name


def made_by(node: ast.Call) -> ast.AST:
    """What a value was made by: ``Net(...).to(device)`` is ``Net``."""
    while (
        isinstance(node.func, ast.Attribute)
        and node.func.attr in MOVES
        and isinstance(node.func.value, ast.Call)
    ):
        node = node.func.value
    return node.func


def class_of(facts: Facts, node: ast.AST | None, depth: int = 0) -> str | None:
    """The class (dotted, as spelled) a value is an instance of: ``Net()``, a name bound to
    one, ``ConcatDataset([Part(p) for p in paths])`` (its parts' class)."""
    if node is None or depth > 3:
        return None
    if isinstance(node, ast.ListComp):
        return class_of(facts, node.elt, depth + 1)
    if isinstance(node, ast.List) and node.elts:
        return class_of(facts, node.elts[0], depth + 1)
    if isinstance(node, ast.Name):
        value = facts.last_value(facts.scope_of(node), node.id, node.lineno)
        if value is None and node.id in facts.bindings and len(facts.bindings[node.id]) == 1:
            value = facts.bindings[node.id][0]
        return class_of(facts, value, depth + 1)
    if isinstance(node, ast.Attribute):
        values = facts.bindings.get(dotted(node) or "", [])
        return class_of(facts, values[0], depth + 1) if len(values) == 1 else None
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Call):
        node = node.value  # ``train, val = random_split(ds, ...)``: a part of ``ds``
    if not isinstance(node, ast.Call):
        return None
    name = dotted(made_by(node)) or ""
    if name.rpartition(".")[2] in DATASET_VIEWS and node.args:  # a view of its first argument
        return class_of(facts, node.args[0], depth + 1)
    return name if name.rpartition(".")[2].lstrip("_")[:1].isupper() else None


def ref(facts: Facts, call: ast.Call) -> str | None:
    """What a call calls, for ``_join._callee``: ``local:Trainer.train_step`` (``self.`` in a
    method of ``Trainer``), ``class:Trainer:train_step`` (a method of an instance built from a
    class), else ``name:`` and the dotted name as spelled."""
    name = dotted(call.func)
    if name is None:
        return None
    owner, _, last = name.rpartition(".")
    if owner == "self":
        around = facts.functions_around(call)
        qual = qualname(facts, around[0]) if around else ""
        return f"local:{qual.rpartition('.')[0]}.{last}" if "." in qual else f"name:{last}"
    if owner and owner.split(".")[0] not in facts.aliases:
        cls = class_of(facts, call.func.value)  # type: ignore[attr-defined]  # ``x.m``: an Attribute
        if cls:
            return f"class:{cls}:{last}"
    return f"name:{name}"


def rng_fields(facts: Facts, cls: ast.ClassDef) -> dict[str, Any]:
    """A class's RNG facts: ``made`` (attributes its ``__init__`` sets to an RNG object, or to
    something an RNG made there was passed to), ``used`` (attributes ``__getitem__``/``__iter__``
    and the methods they call touch), ``global`` (their first draw from NumPy's global RNG)."""
    methods = {f.name: f for f in cls.body if isinstance(f, ast.FunctionDef)}
    out: dict[str, Any] = {}
    made = _class_rngs(facts, cls)
    if "__init__" in methods:
        made.update(_rng_made(facts, methods["__init__"]))
    if made:
        out["made"] = made
    if "__init__" in methods:
        holds = _holds(facts, methods["__init__"])
        if holds:
            out["holds"] = holds
    runs = [methods[m] for m in DRAWS_IN if m in methods]
    if not runs:
        return out
    for func in list(runs):
        for call in facts.calls_in(func):
            name = (dotted(call.func) or "").removeprefix("self.")
            if name in methods and methods[name] not in runs:
                runs.append(methods[name])
    calls = [c for f in runs for c in facts.calls_in(f)]
    used = {
        key.split(".")[1]
        for c in calls
        for key in [dotted(n) for n in [c.func, *c.args]]
        if key and key.startswith("self.") and key.count(".") >= 1
    }
    out["used"] = sorted(used)
    for call in calls:
        name = facts.call_name(call) or ""
        if name.startswith("numpy.random.") and name.rpartition(".")[2] not in NOT_DRAWS:
            out["global"] = [call.lineno, name.replace("numpy.", "np.", 1)]
            break
    return out


def _class_rngs(facts: Facts, cls: ast.ClassDef) -> dict[str, list[Any]]:
    """RNG objects a class body makes (MONAI's ``Randomizable.R = np.random.RandomState()``):
    one object every instance and subclass shares, copied alike into every worker."""
    made: dict[str, list[Any]] = {}
    for statement in cls.body:
        value = statement.value if isinstance(statement, ast.Assign) else None
        name = (facts.call_name(value) or "") if isinstance(value, ast.Call) else ""
        if name.endswith(RNG_MAKERS):
            for target in statement.targets:  # type: ignore[attr-defined]  # an Assign
                if isinstance(target, ast.Name):
                    made[target.id] = [statement.lineno, name.replace("numpy.", "np.", 1)]
    return made


def _holds(facts: Facts, init: Function) -> dict[str, list[Any]]:
    """Attributes ``__init__`` sets to an object built from a class (``self.transform =
    RandomGain(seed=seed)``): ``attr -> [line, class as spelled]``; the object may keep an RNG."""
    out: dict[str, list[Any]] = {}
    for call in facts.calls_in(init):
        statement = facts.assignment_of(call)
        cls = class_of(facts, call) if statement else None
        for target in statement.targets if statement and cls else []:
            key = dotted(target) or ""
            if key.startswith("self.") and key.count(".") == 1:
                out[key[5:]] = [call.lineno, cls]
    return out


def _rng_made(facts: Facts, init: Function) -> dict[str, list[Any]]:
    made: dict[str, list[Any]] = {}
    local: dict[str, str] = {}
    for call in facts.calls_in(init):
        name = facts.call_name(call) or ""
        if not name.endswith(RNG_MAKERS):
            continue
        short = name.replace("numpy.", "np.", 1)
        statement = facts.assignment_of(call)
        for target in statement.targets if statement else []:
            key = dotted(target) or ""
            if key.startswith("self."):
                made[key[5:]] = [call.lineno, short]
            elif isinstance(target, ast.Name):
                local[target.id] = short
    if local:
        for key, values in facts.bindings.items():
            if not key.startswith("self.") or key[5:] in made:
                continue
            for value in values:
                inside = init.lineno <= value.lineno <= (init.end_lineno or init.lineno)
                names = {n.id for n in ast.walk(value) if isinstance(n, ast.Name)}
                if inside and names & set(local):
                    rng = sorted(names & set(local))[0]
                    made[key[5:]] = [value.lineno, f"{local[rng]} `{rng}` handed to it"]
    return made


def loaders_over_classes(facts: Facts) -> list[list[Any]]:
    """DataLoaders with workers (or a number not known here) and no ``worker_init_fn``, over a
    Dataset built from a class: ``[line, col, class as spelled, workers as written]``."""
    out = []
    for call in data.loaders(facts):
        if keyword(call, "worker_init_fn") is not None or in_suite_test(facts, call):
            continue
        if data._names_eval(facts, call) or _in_evaluation(facts, call):
            continue  # an evaluation loader: nothing is augmented (detectron2's test loader)
        count = data.workers(call)
        if isinstance(count, int) and count <= 0:
            continue
        dataset = call.args[0] if call.args else keyword(call, "dataset")
        cls = class_of(facts, dataset)
        given = keyword(call, "num_workers")
        text = ast.unparse(given) if given is not None else "num_workers"
        if cls:
            out.append([call.lineno, call.col_offset, cls, text])
        for applied in transforms_of(facts, dataset):
            out.append([call.lineno, call.col_offset, applied, text, "transform"])
    return out


TRANSFORM_KEYWORDS = ("transform", "transforms", "target_transform", "joint_transform")


def transforms_of(facts: Facts, dataset: ast.AST | None) -> list[str]:
    """The classes (as spelled) of the transforms a Dataset is built with, each worker running
    them: ``CIFAR10(transform=t)`` with ``t = Compose([RandomCrop(32), Cutout(8)])``, or
    ``t.transforms.append(Cutout(...))`` (Cutout's ``train.py``)."""
    if isinstance(dataset, ast.Name):
        dataset = facts.last_value(facts.scope_of(dataset), dataset.id, dataset.lineno)
    if not isinstance(dataset, ast.Call):
        return []
    found: list[str] = []
    for kw in dataset.keywords:
        if kw.arg in TRANSFORM_KEYWORDS:
            found += _composed(facts, kw.value, 0)
    return sorted(set(found))


def _composed(facts: Facts, node: ast.AST, depth: int) -> list[str]:
    if depth > 3:
        return []
    if isinstance(node, ast.Name):
        value = facts.last_value(facts.scope_of(node), node.id, node.lineno)
        appended = [
            a
            for c in facts.methods_called("append")
            if dotted(c.func.value) == f"{node.id}.transforms"  # type: ignore[attr-defined]
            for a in c.args
        ]
        parts = [value] if value is not None else []
        return [n for part in [*parts, *appended] for n in _composed(facts, part, depth + 1)]
    if isinstance(node, ast.List | ast.Tuple):
        return [n for e in node.elts for n in _composed(facts, e, depth + 1)]
    if isinstance(node, ast.Call):
        name = dotted(node.func) or ""
        if name.rpartition(".")[2] == "Compose" and node.args:
            return _composed(facts, node.args[0], depth + 1)
        last = name.rpartition(".")[2]
        if last[:1].isupper() and name.split(".")[0] not in ("transforms", "T", "torchvision"):
            return [name]
    return []


EVALUATION = re.compile(r"(?i)(^|_)(test|val|valid|validation|eval|evaluation|inference)(_|$)")


def _in_evaluation(facts: Facts, call: ast.Call) -> bool:
    """Is the loader built in a function named for evaluation (``build_detection_test_loader``)?"""
    return any(EVALUATION.search(f.name) for f in facts.functions_around(call))


def samplers(facts: Facts) -> list[list[int]]:
    """Shuffling DistributedSamplers built here: ``[line, col]``."""
    return [[c.lineno, c.col_offset] for c in data.sampler_sites(facts)]


def repeats(facts: Facts) -> list[Any]:
    """Where a loader is read again and again: ``[line, what]`` (``data.repeats``)."""
    found = data.repeats(facts)
    return [found[0].lineno, found[1]] if found else []


def _optimizer_like(facts: Facts, call: ast.Call) -> bool:
    key = dotted(call.func.value) if isinstance(call.func, ast.Attribute) else None
    if key is None:
        return False
    return is_optimizer(facts, call) or key.lower().endswith("optimizers")


def steppers(facts: Facts) -> dict[str, list[Any]]:
    """In a module that never clears gradients: the functions that step an optimizer after a
    backward pass (their own, or one a method of theirs runs), outside any loop of theirs (a
    loop is the single-file rule's): ``qualname -> [line, col, optimizer]``."""
    steps = [c for c in facts.methods_called("step") if not c.args and not c.keywords]
    steps = [c for c in steps if _optimizer_like(facts, c)]
    if not steps or live_zero_grads(facts) or _clearing.module_sets_grad_none(facts):
        return {}
    bodies = {f.name: f for f in facts.functions}
    out: dict[str, list[Any]] = {}
    for step in steps:
        around = facts.around(step)
        if not around or isinstance(around[0], LOOPS):
            continue
        func = next(
            (f for f in around if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef)), None
        )
        if func is None or qualname(facts, func) in out:
            continue
        owner = dotted(step.func.value)  # type: ignore[attr-defined]
        for runner in [
            func,
            *(f for c in facts.callers(func.name) for f in facts.functions_around(c)[:1]),
        ]:
            inside = facts.calls_in(runner)
            reached = [c for n in _called(inside) if n in bodies for c in facts.calls_in(bodies[n])]
            if any(method(c) == "backward" for c in inside + reached):
                out.setdefault(qualname(facts, runner), [step.lineno, step.col_offset, owner])
    return out


def live_zero_grads(facts: Facts) -> list[ast.Call]:
    """The ``zero_grad`` calls that can run: not those only under ``if flag:`` where ``flag``
    is a parameter defaulting to False that no call here sets (tt-blacksmith's
    ``optimizer_step(self, zero_grad=False)``, always called as ``optimizer_step()``)."""
    clears = facts.calls_ending(lambda last: "zero_grad" in last)  # ``zero_grad(params)`` too
    return [c for c in clears if not _switched_off(facts, c)]


def _switched_off(facts: Facts, call: ast.Call) -> bool:
    around = facts.functions_around(call)
    if not around:
        return False
    func = around[0]
    given = defaults(func)
    for branch in facts.ifs:
        test = branch.test
        if not (isinstance(test, ast.Name) and _encloses(branch, call) and _encloses(func, branch)):
            continue
        default = given.get(test.id)
        if isinstance(default, ast.Constant) and default.value in (False, None):
            callers = facts.callers(func.name)
            return bool(callers) and not any(_sets(c, test.id) for c in callers)
    return False


def _encloses(outer: ast.AST, node: ast.AST) -> bool:
    start = (getattr(outer, "lineno", 0), getattr(outer, "col_offset", 0))
    end = (getattr(outer, "end_lineno", 0), getattr(outer, "end_col_offset", 0))
    return start <= (getattr(node, "lineno", 0), getattr(node, "col_offset", 0)) <= end


def _sets(call: ast.Call, name: str) -> bool:
    """Does the call pass something for ``name`` (by keyword, or positionally at all)?"""
    return bool(call.args) or any(k.arg in (name, None) for k in call.keywords)


def _called(calls: list[ast.Call]) -> set[str]:
    return {(dotted(c.func) or "").removeprefix("self.") for c in calls}


def step_calls(facts: Facts) -> list[list[Any]]:
    """Calls a loop makes once per pass to something named like a training step, in loops
    that never clear gradients themselves: ``[line, col, callee]`` (a few per module)."""
    out: list[list[Any]] = []
    seen: set[int] = set()
    for loop in facts.loops:
        inside = facts.calls_in(loop)
        if any(method(c) == "zero_grad" for c in inside):
            continue
        for call in inside:
            last = (dotted(call.func) or "").rpartition(".")[2]
            if id(call) in seen or last in ("backward", "train", "eval"):
                continue
            seen.add(id(call))
            target = ref(facts, call) if STEP_NAME.search(last) else None
            # ``optimizer.step()``, ``scaler.step(opt)`` are not; ``trainer.step(batch)`` is
            if target and (last != "step" or (call.args and target.startswith("class:"))):
                out.append([call.lineno, call.col_offset, target])
        if len(out) > 64:
            break
    return out
