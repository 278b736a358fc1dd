"""Data-pipeline rules: worker seeding, DistributedSampler epochs, IterableDataset sharding.

Since PyTorch 1.9 every DataLoader worker reseeds Python's ``random``, torch *and* NumPy's
global RNG from a per-worker, per-epoch base seed (torch/utils/data/_utils/worker.py), so
``np.random`` in ``__getitem__`` is no longer the catalog's DP1 bug by itself. What still
duplicates augmentations is a ``worker_init_fn`` that reseeds every worker with the same
constant; that is what RGT301 flags.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from rgt.lint._epoch_once import set_once
from rgt.lint._facts import Facts
from rgt.lint._model import Hit, Rule, Severity
from rgt.lint._nodes import NOT_CONSTANT, constant, dotted, keyword, method
from rgt.lint._suite import in_suite_test
from rgt.lint._tree import walk

B, A = Severity.BUG, Severity.INFO
RULES = (
    Rule(
        "RGT301",
        B,
        "worker-seed-constant",
        "worker_init_fn seeds every DataLoader worker "
        "with the same value: all workers draw the same random augmentations",
        "seed from torch.initial_seed() % 2**32 (or drop the reseeding: torch >= 1.9 seeds "
        "random, numpy and torch per worker)",
        "DP1",
    ),
    Rule(
        "RGT302",
        B,
        "distributed-sampler-without-set-epoch",
        "a shuffling DistributedSampler without set_epoch() gives the same order every epoch",
        "call sampler.set_epoch(epoch) at the start of each epoch",
        "D22b",
    ),
    Rule(
        "RGT303",
        B,
        "iterable-dataset-not-sharded",
        "each DataLoader worker runs this "
        "IterableDataset's __iter__ in full: every sample is seen num_workers times",
        "shard in __iter__ by torch.utils.data.get_worker_info() (id, num_workers)",
        "DP2",
    ),
    Rule(
        "RGT305",
        B,
        "dataset-rng-shared-by-workers",
        "every DataLoader worker starts from the same copy of this Dataset's random state: "
        "workers draw the same augmentations",
        "reseed in worker_init_fn from torch.initial_seed() (the Dataset's own RNG object "
        "too, through get_worker_info().dataset), or draw with torch's RNG",
        "DP1",
    ),
    Rule(
        "RGT304",
        A,
        "shuffled-eval-loader",
        "an evaluation loader is shuffled: harmless for "
        "averages, but order-dependent metrics and saved predictions no longer line up",
        "shuffle=False for validation and test loaders",
        "DP14",
    ),
)
SEEDS = (
    "numpy.random.seed",
    "random.seed",
    "torch.manual_seed",
    "torch.cuda.manual_seed",
    "torch.cuda.manual_seed_all",
)
VARYING = {"initial_seed", "get_worker_info", "worker_id", "id"}
# Libraries whose *DataLoader classes are torch DataLoaders (same arguments).
LOADER_LIBRARIES = ("torch.", "torch_geometric.", "torchdata.", "dgl.", "monai.", "torchvision.")
EVAL_WORDS = re.compile(r"(?i)(^|_)(val|valid|validation|test|eval|dev)(_|$|loader|set|data)")
SHARD_WORDS = {"get_worker_info", "worker_info", "worker_id", "split_dataset_by_node", "shard"}


def may_find(text: str) -> bool:
    """False only when no rule here can fire in ``text`` (``_run.worth_parsing``): every one
    needs a ``*DataLoader(...)`` or a ``DistributedSampler(...)``."""
    return "DataLoader" in text or "DistributedSampler" in text


def loaders(facts: Facts) -> list[ast.Call]:
    """The module's torch ``DataLoader(...)`` calls (found once, asked by several rules)."""
    found = facts.memo.get("loaders")
    if found is None:
        ending = facts.calls_ending(lambda last: last.endswith("DataLoader"))
        found = [c for c in ending if is_loader(facts.call_name(c) or "")]
        facts.memo["loaders"] = found
    return found  # type: ignore[return-value]  # memo holds what this function stored


def is_loader(name: str) -> bool:
    """``DataLoader`` itself, or a library's subclass of it (torch_geometric's
    ``DenseDataLoader``); not a repository's own ``*DataLoader`` class with its own arguments
    (llm.c's ``DistributedDataLoader``, detectron2's ``CombinedDataLoader``)."""
    last = name.rsplit(".", 1)[-1]
    if last == "DataLoader":
        return True
    return last.endswith("DataLoader") and name.startswith(LOADER_LIBRARIES)


def in_memory(facts: Facts, call: ast.Call) -> bool:
    """A loader over indices (``DataLoader(range(n))``: pytorch_geometric's lightgcn, the data
    already on the GPU), over tensors already in memory (``TensorDataset``: dinov2's features) or a
    dataset whose ``__getitem__`` puts each sample on the GPU itself (x-transformers'
    ``return full_seq.to(device)``): workers and pinned copies add nothing there, a CUDA
    tensor cannot be pinned, and CUDA in forked workers fails."""
    dataset = call.args[0] if call.args else keyword(call, "dataset")
    if dataset is None:
        return False
    if constructs(facts, dataset, "TensorDataset"):
        return True
    if isinstance(dataset, ast.Call) and facts.call_name(dataset) in ("range", "torch.arange"):
        return True
    return any(
        constructs(facts, dataset, cls.name) and _samples_on_device(facts, cls)
        for cls in facts.classes
    )


def _samples_on_device(facts: Facts, cls: ast.ClassDef) -> bool:
    getitem = next((f for f in cls.body if getattr(f, "name", "") == "__getitem__"), None)
    if not isinstance(getitem, ast.FunctionDef):
        return False
    for call in facts.calls_in(getitem):
        if method(call) == "cuda":
            return True
        target = call.args[0] if call.args else keyword(call, "device")
        if method(call) == "to" and target is not None:
            text = ast.unparse(target).lower()
            if "cuda" in text or "device" in text:
                return True
    return False


def workers(call: ast.Call) -> object:
    """The DataLoader's ``num_workers``: a number, ``NOT_CONSTANT``, or 0 when absent."""
    value = keyword(call, "num_workers")
    if value is None:
        positional = call.args[6] if len(call.args) > 6 else None
        return 0 if positional is None else constant(positional)
    return constant(value)


def check(facts: Facts, words: set[str]) -> Iterator[Hit]:
    yield from _worker_seed(facts)
    if "set_epoch" not in words:
        found = repeats(facts) if sampler_sites(facts) else None
        if found is not None:
            loop, what = found
            for call in sampler_sites(facts):
                yield Hit("RGT302", call, f"{what} at line {loop.lineno}")
    yield from set_once(facts)
    yield from _unsharded(facts)
    for call in loaders(facts):
        if constant(keyword(call, "shuffle")) is True and _names_eval(facts, call):
            yield Hit("RGT304", call)


def _worker_seed(facts: Facts) -> Iterator[Hit]:
    inits = {dotted(v) for c in loaders(facts) if (v := keyword(c, "worker_init_fn")) is not None}
    for func in facts.functions:
        if func.name not in inits:
            continue
        varying = {a.arg for a in func.args.args} | VARYING
        for node in walk(func):
            if isinstance(node, ast.Assign) and _mentions_any(node.value, varying):
                varying |= {n.id for t in node.targets for n in walk(t) if isinstance(n, ast.Name)}
        for call in (n for n in walk(func) if isinstance(n, ast.Call)):
            seeds = facts.call_name(call) in SEEDS and call.args
            if seeds and not _mentions_any(call.args[0], varying):
                yield Hit("RGT301", call)


def _mentions_any(node: ast.AST, names: set[str]) -> bool:
    for child in walk(node):
        if isinstance(child, ast.Name) and child.id in names:
            return True
        if isinstance(child, ast.Attribute) and child.attr in names:
            return True
    return False


def sampler_sites(facts: Facts) -> list[ast.Call]:
    """Shuffling ``DistributedSampler(...)`` calls, also through a name bound to the class
    (``train_sampler = RandomSampler if rank == -1 else DistributedSampler``), outside test
    suites and evaluation loaders."""
    found = facts.memo.get("samplers")
    if isinstance(found, list):
        return found
    aliases = {
        key
        for key, values in facts.bindings.items()
        if "." not in key and any(not isinstance(v, ast.Call) and _names_sampler(v) for v in values)
    }
    calls = facts.calls_ending(lambda last: last.endswith("DistributedSampler") or last in aliases)
    found = [
        c
        for c in calls
        if constant(keyword(c, "shuffle")) not in (False, 0)
        and not _names_eval(facts, c)
        and not in_suite_test(facts, c)
    ]
    facts.memo["samplers"] = found
    return found


def _names_sampler(node: ast.AST) -> bool:
    return any(
        isinstance(n, ast.Name | ast.Attribute) and (dotted(n) or "").endswith("DistributedSampler")
        for n in walk(node)
    )


def repeats(facts: Facts) -> tuple[ast.stmt, str] | None:
    """The first loop that reads a loader again and again: an epoch loop (a loop whose target,
    range or counter says "epoch", or that calls a function named for one), or an endless
    ``while True`` around a ``for`` (a generator cycling over a loader)."""
    for loop in facts.loops:
        if _epoch_words(facts, loop):
            return loop, "the epoch loop"
        endless = isinstance(loop, ast.While) and constant(loop.test) is True
        if endless and any(isinstance(n, ast.For) for n in loop.body):
            return loop, "the endless `while True` loop"
    return None


def _epoch_words(facts: Facts, loop: ast.AST) -> bool:
    heads: list[ast.AST] = []
    if isinstance(loop, ast.For | ast.AsyncFor):
        heads = [loop.target, loop.iter]
    elif isinstance(loop, ast.While):
        heads = [loop.test, *(a.target for a in facts.augmented_in(loop))]
    for node in heads:
        for child in walk(node):
            word = child.id if isinstance(child, ast.Name) else getattr(child, "attr", "")
            if isinstance(child, ast.Constant) and isinstance(child.value, str):
                word = child.value
            if "epoch" in str(word).lower():
                return True
    return any("epoch" in (method(c) or dotted(c.func) or "").lower() for c in _direct(facts, loop))


def _direct(facts: Facts, loop: ast.AST) -> list[ast.Call]:
    """Calls in ``loop`` not inside a loop nested in it."""
    inner = facts.loops_in(loop)
    return [c for c in facts.calls_in(loop) if not any(_within(c, n) for n in inner)]


def _within(node: ast.AST, outer: ast.AST) -> bool:
    first, line = getattr(outer, "lineno", 0), getattr(node, "lineno", 0)
    return bool(first <= line <= (getattr(outer, "end_lineno", None) or first))


def _unsharded(facts: Facts) -> Iterator[Hit]:
    for cls in facts.classes:
        bases = {(facts.qualname(b) or "").rsplit(".", 1)[-1] for b in cls.bases}
        if "IterableDataset" not in bases or _mentions_any(cls, SHARD_WORDS):
            continue
        for call in loaders(facts):
            count = workers(call)
            uses = call.args and constructs(facts, call.args[0], cls.name)
            if uses and (count is NOT_CONSTANT or (isinstance(count, int) and count > 0)):
                yield Hit("RGT303", cls, cls.name)
                break


def constructs(facts: Facts, node: ast.AST, cls: str) -> bool:
    """Is ``node`` a ``cls(...)`` call, or a name bound only to such calls?"""
    if isinstance(node, ast.Call):
        return (facts.call_name(node) or "").rsplit(".", 1)[-1] == cls
    return facts.is_instance_of(node, (cls,))


def _names_eval(facts: Facts, call: ast.Call) -> bool:
    """Is this loader for evaluation: its dataset's name, or the name it is assigned to?"""
    names = [dotted(call.args[0]) if call.args else None, keyword(call, "dataset")]
    assignment = facts.assignment_of(call)
    if assignment is not None:
        names += [dotted(t) for t in assignment.targets]
    for name in names:
        text = name if isinstance(name, str) else (dotted(name) if name is not None else None)
        if text and EVAL_WORDS.search(text.rsplit(".", 1)[-1]):
            return True
    return False
