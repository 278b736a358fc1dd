"""Resilience rules: checkpoints that survive a kill, a resume path, collectives every rank runs,
and the ``__main__`` guard that spawned DataLoader workers need.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from rgt.lint._facts import Facts
from rgt.lint._model import Hit, Rule, Severity
from rgt.lint._nodes import constant, dotted, method
from rgt.lint._saves import overwrites_in_place
from rgt.lint.data import loaders, workers

B, A = Severity.BUG, Severity.INFO
RULES = (
    Rule(
        "RGT401",
        A,
        "checkpoint-not-atomic",
        "torch.save writes straight to the final path: a "
        "kill or a full disk mid-write leaves a truncated checkpoint where the good one was",
        "save to a temporary name in the same folder, then os.replace() it (rgt.ckpt does this)",
        "C2",
    ),
    Rule(
        "RGT402",
        A,
        "no-resume-path",
        "this training loop has no way to resume: nothing "
        "loads a checkpoint, so a preempted run starts over",
        "load the latest checkpoint (model, optimizer, scheduler, step) at start-up when one "
        "exists",
        "C3",
    ),
    Rule(
        "RGT403",
        B,
        "collective-under-rank-branch",
        "a collective runs on one rank only: the "
        "other ranks never join it and the job hangs until the NCCL timeout",
        "call the collective on every rank (outside the `if rank == 0:`)",
        "D21",
    ),
    Rule(
        "RGT404",
        B,
        "spawn-without-main-guard",
        "with the spawn start method each DataLoader "
        "worker re-imports this script and re-runs its top level",
        'put the script\'s top level under `if __name__ == "__main__":`',
        "DP6",
    ),
)
COLLECTIVES = {
    "all_reduce",
    "barrier",
    "all_gather",
    "broadcast",
    "reduce",
    "gather",
    "scatter",
    "reduce_scatter",
    "all_to_all",
    "all_gather_object",
    "broadcast_object_list",
    "all_gather_into_tensor",
    "reduce_scatter_tensor",
}
# Words that show a way back from a checkpoint (anywhere in the linted files).
LOADS = {
    "load_state_dict",
    "load_checkpoint",
    "resume",
    "from_pretrained",
    "auto_resume",
    "resume_from_checkpoint",
    "load_from_checkpoint",
    "restore",
    "restart_from_checkpoint",
}

MAIN_PROCESS = ("is_main_process", "is_master", "is_rank_0", "is_global_zero")
# Parts of every collective's name ("reduce": all_reduce, reduce_scatter_tensor...).
COLLECTIVE_PARTS = ("reduce", "gather", "scatter", "barrier", "broadcast", "all_to_all")


def may_find(text: str) -> bool:
    """False only when no rule here can fire in ``text`` (``_run.worth_parsing``): a save, a
    start method, or a ``dist`` collective beside a test of the rank."""
    if "save" in text or "set_start_method" in text:
        return True
    if "dist" not in text or not any(part in text for part in COLLECTIVE_PARTS):
        return False
    return "rank" in text.lower() or any(name in text for name in MAIN_PROCESS)


def check(facts: Facts, words: set[str]) -> Iterator[Hit]:
    saves = [c for c in facts.calls_ending("save".__eq__) if facts.call_name(c) == "torch.save"]
    for call in saves:
        if overwrites_in_place(facts, call):
            yield Hit("RGT401", call)
    if saves and training_loops(facts) and not words & LOADS:
        yield Hit("RGT402", saves[0])
    yield from _collectives(facts)
    yield from _spawn(facts)


def _collectives(facts: Facts) -> Iterator[Hit]:
    for node in facts.ifs:
        if not _rank_zero(node.test):
            continue
        for call in (c for stmt in node.body for c in facts.calls_in(stmt)):
            name = facts.call_name(call) or ""
            collective = method(call) or ""
            distributed = name.startswith(("torch.distributed.", "dist."))
            if collective in COLLECTIVES and distributed and not _paired(facts, node, collective):
                yield Hit("RGT403", call)


def _rank_zero(test: ast.AST) -> bool:
    """``rank == 0``, ``args.local_rank == 0``, ``dist.get_rank() == 0``, ``is_main_process()``."""
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq):
        sides = [test.left, *test.comparators]
        zero = any(constant(s) == 0 and not isinstance(constant(s), bool) for s in sides)
        return zero and any("rank" in ast.unparse(s).lower() for s in sides)
    if isinstance(test, ast.Call):
        name = (dotted(test.func) or "").rsplit(".", 1)[-1]
        return name in MAIN_PROCESS
    return False


def _paired(facts: Facts, branch: ast.If, collective: str) -> bool:
    """The same collective for the other ranks: in the ``else``, or under another rank test
    (``if rank != 0: dist.barrier()`` ... ``if rank == 0: dist.barrier()`` is the usual
    "rank 0 downloads first" idiom, and every rank runs one barrier)."""
    other = [c for s in branch.orelse for c in facts.calls_in(s)]
    scope = facts.scope_of(branch)
    for test in facts.ifs:
        same_scope = facts.scope_of(test) is scope
        if test is not branch and same_scope and "rank" in ast.unparse(test.test).lower():
            other += [c for s in test.body + test.orelse for c in facts.calls_in(s)]
    return any(method(c) == collective for c in other)


def _spawn(facts: Facts) -> Iterator[Hit]:
    spawn = any(
        c.args and constant(c.args[0]) in ("spawn", "forkserver")
        for c in facts.calls_ending(lambda last: last.endswith("set_start_method"))
    )
    if not spawn or _has_main_guard(facts.tree):
        return
    for call in loaders(facts):
        count = workers(call)
        if facts.scope_of(call) is facts.tree and count != 0:
            yield Hit("RGT404", call)


def _has_main_guard(tree: ast.Module) -> bool:
    for stmt in tree.body:
        if isinstance(stmt, ast.If) and "__name__" in ast.unparse(stmt.test):
            return True
    return False


def training_loops(facts: Facts) -> list[ast.AST]:
    return [lp for lp in facts.loops if any(method(c) == "backward" for c in facts.calls_in(lp))]
