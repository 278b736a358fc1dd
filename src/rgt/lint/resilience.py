"""Resilience rules: checkpoints that survive a kill, a resume path, collectives every rank runs,
and the ``__main__`` guard that spawned DataLoader workers need.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from rgt.lint._facts import Facts
from rgt.lint._model import Hit, Rule, Severity
from rgt.lint._nodes import constant, dotted, method
from rgt.lint.data import loaders, workers

B, A = Severity.BUG, Severity.ADVICE
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
MOVES = ("os.replace", "os.rename", "shutil.move")
COUNTER = re.compile(r"(?i)(epoch|step|iter)[a-z_]*$")  # the last part of a name
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


def check(facts: Facts, words: set[str]) -> Iterator[Hit]:
    saves = [c for c in facts.calls if facts.call_name(c) == "torch.save"]
    for call in saves:
        if _periodic(facts, call) and not _new_name_each_time(facts, call):
            if _moved_after(facts, call) or _temporary(call) or _caller_names_it(facts, call):
                continue
            yield Hit("RGT401", call)
    if saves and training_loops(facts) and not words & LOADS:
        yield Hit("RGT402", saves[0])
    yield from _collectives(facts)
    yield from _spawn(facts)


def _periodic(facts: Facts, call: ast.Call) -> bool:
    """A save that overwrites a checkpoint over and over: in a loop, in a function that a loop
    calls (``def test(epoch): ... torch.save(state, "ckpt.pth")``), or in a save helper that
    this module never calls (its loop is elsewhere). A helper called here, never from a loop,
    writes once (``save_for_hf`` exporting weights)."""
    if any(isinstance(a, ast.For | ast.While) for a in facts.ancestors(call)):
        return True
    scope = facts.scope_of(call)
    name = getattr(scope, "name", "")
    callers = [c for c in facts.calls if dotted(c.func) in (name, f"self.{name}")]
    if any(isinstance(a, ast.For | ast.While) for c in callers for a in facts.ancestors(c)):
        return True
    helper = not callers and any(w in name.lower() for w in ("save", "checkpoint", "ckpt"))
    return helper and not _path_from_caller(facts, scope, call)


def _path_from_caller(facts: Facts, scope: ast.AST, call: ast.Call) -> bool:
    """The file's name is built from a parameter with no default (open_clip's
    ``save_sharded_checkpoint(..., checkpoint_dir)``): where it goes, a fresh ``epoch_{n}``
    folder or a temporary one renamed after, is the unseen caller's choice."""
    if not isinstance(scope, ast.FunctionDef) or len(call.args) < 2:
        return False
    args = scope.args
    positional = args.posonlyargs + args.args
    required = {a.arg for a in positional[: len(positional) - len(args.defaults)]}
    required |= {a.arg for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True) if d is None}
    required -= {"self", "cls"}
    return _mentions(facts, call.args[1], required, 0)


def _mentions(facts: Facts, node: ast.AST, names: set[str], depth: int) -> bool:
    """Does ``node`` use one of ``names``, itself or through the values of the names it uses
    (three steps: ``with open(save_file) as f``, ``save_file = join(d, base)``, ``base =
    f"{name}.pth"``)?"""
    for child in ast.walk(node):
        if not isinstance(child, ast.Name):
            continue
        if child.id in names:
            return True
        if depth < 3:
            value = facts.last_value(facts.scope_of(child), child.id, child.lineno)
            if value is not None and _mentions(facts, value, names, depth + 1):
                return True
    return False


def _caller_names_it(facts: Facts, call: ast.Call) -> bool:
    """The path is the helper's parameter, and every caller here passes a temporary name or
    moves the file after (timm's ``_save(tmp_save_path)`` then ``_replace(tmp, last)``)."""
    scope = facts.scope_of(call)
    path = call.args[1] if len(call.args) > 1 else None
    if not isinstance(scope, ast.FunctionDef) or not isinstance(path, ast.Name):
        return False
    params = [a.arg for a in scope.args.posonlyargs + scope.args.args]
    if path.id not in params:
        return False
    index = params.index(path.id) - (1 if params[0] in ("self", "cls") else 0)
    callers = [c for c in facts.calls if dotted(c.func) in (scope.name, f"self.{scope.name}")]
    return bool(callers) and all(
        _moved_after(facts, c, renames=True)
        or (0 <= index < len(c.args) and _says_temporary(c.args[index]))
        for c in callers
    )


def _moved_after(facts: Facts, call: ast.Call, renames: bool = False) -> bool:
    """The file is moved into place in the same function (``os.replace(tmp, path)``);
    ``renames``: a helper whose name says it (``self._replace(tmp, last)``) counts too."""
    scope = facts.scope_of(call)
    for inner in facts.calls_in(scope):
        name = facts.call_name(inner) or ""
        if name in MOVES or (method(inner) in ("replace", "rename") and len(inner.args) == 1):
            return True
        helper = name.rsplit(".", 1)[-1].lower().strip("_")
        if renames and helper in ("replace", "rename", "move", "atomic_replace"):
            return True
    return False


def _temporary(call: ast.Call) -> bool:
    """Saving into a buffer or a name that says it is temporary is not a final write."""
    return len(call.args) < 2 or _says_temporary(call.args[1])


def _says_temporary(node: ast.AST) -> bool:
    text = ast.unparse(node).lower()
    return any(w in text for w in ("tmp", "temp", "buffer", "bytesio", "io."))


def _new_name_each_time(facts: Facts, call: ast.Call) -> bool:
    """``f"ckpt_{epoch}.pt"``, ``"acc_%.2f.pt" % acc``, ``folder / name`` in ``for name in``:
    each save names a new file, so the previous one stays intact."""
    if len(call.args) < 2:
        return False
    targets = {dotted(a.target) for a in facts.ancestors(call) if isinstance(a, ast.For)}
    return _varies(facts, call.args[1], targets, 0)


def _varies(facts: Facts, path: ast.AST, targets: set[str | None], depth: int) -> bool:
    for node in ast.walk(path):
        if dotted(node) in targets:
            return True
        if isinstance(node, ast.Name) and depth < 2:  # follow a name one or two steps
            value = facts.last_value(facts.scope_of(node), node.id, node.lineno)
            if value is not None and _varies(facts, value, targets, depth + 1):
                return True
        if any(not _folder(v) for v in _formatted(node)):
            return True
        if isinstance(node, ast.Name | ast.Attribute) and COUNTER.search(dotted(node) or ""):
            return True  # os.path.join(out, "eval", str(iteration)): a folder per step
    return False


def _formatted(node: ast.AST) -> list[ast.AST]:
    """The values formatted into a string: f-string fields, ``%`` and ``.format`` arguments."""
    if isinstance(node, ast.JoinedStr):
        return [v.value for v in node.values if isinstance(v, ast.FormattedValue)]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
        return [node.right]
    if isinstance(node, ast.Call) and method(node) == "format":
        return [*node.args, *(k.value for k in node.keywords)]
    return []


def _folder(node: ast.AST) -> bool:
    words = ("dir", "path", "root", "folder", "output", "save", "name", "prefix")
    text = ast.unparse(node).lower()
    return any(w in text for w in words) and "epoch" not in text and "step" not in text


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
        return name in ("is_main_process", "is_master", "is_rank_0", "is_global_zero")
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
        (facts.call_name(c) or "").endswith("set_start_method")
        and c.args
        and constant(c.args[0]) in ("spawn", "forkserver")
        for c in facts.calls
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
