"""RGT401's question: does this ``torch.save`` overwrite a checkpoint in place, again and again?

Yes when the save repeats (in a loop, in a function a loop calls, in a save helper whose loop is
in another module) and writes the same final name each time. No when each save names a new
file (``f"ckpt_{epoch}.pt"``, a folder per step), writes a temporary name and moves it into
place (here or in the caller), writes once (an export called outside any loop), or leaves the
name to a caller this module cannot see.
"""

from __future__ import annotations

import ast
import re

from rgt.lint._facts import Facts
from rgt.lint._nodes import constant, dotted, keyword, method
from rgt.lint._tree import walk

MOVES = ("os.replace", "os.rename", "shutil.move")
COUNTER = re.compile(r"(?i)(epoch|step|iter)[a-z_]*$")  # the last part of a name


def overwrites_in_place(facts: Facts, call: ast.Call) -> bool:
    if not _periodic(facts, call) or _new_name_each_time(facts, call):
        return False
    return not (_moved_after(facts, call) or _temporary(call) or _caller_names_it(facts, call))


def _periodic(facts: Facts, call: ast.Call) -> bool:
    """A save that overwrites a checkpoint over and over: in a loop, in a function that a loop
    calls (``def test(epoch): ... torch.save(state, "ckpt.pth")``), or in a save helper that
    this module never calls (its loop is elsewhere). A helper called here, never from a loop,
    writes once (``save_for_hf`` exporting weights)."""
    if any(isinstance(a, ast.For | ast.While) for a in facts.around(call)):
        return True
    scope = facts.scope_of(call)
    name = getattr(scope, "name", "")
    callers = facts.callers(name)
    if any(isinstance(a, ast.For | ast.While) for c in callers for a in facts.around(c)):
        return True
    helper = not callers and any(w in name.lower() for w in ("save", "checkpoint", "ckpt"))
    return helper and not _path_from_caller(facts, scope, call)


def _path_from_caller(facts: Facts, scope: ast.AST, call: ast.Call) -> bool:
    """The file's name is built from a parameter the caller must give, one with no default or
    a ``None`` default (open_clip's ``save_sharded_checkpoint(..., checkpoint_dir)``, litgpt's
    ``LLM.save(out_dir=None)``): where it goes, a fresh ``epoch_{n}`` folder or a temporary one
    renamed after, is the unseen caller's choice."""
    if not isinstance(scope, ast.FunctionDef) or len(call.args) < 2:
        return False
    args = scope.args
    positional = args.posonlyargs + args.args
    defaults: list[ast.expr | None] = [None] * (len(positional) - len(args.defaults))
    pairs = [*zip(positional, [*defaults, *args.defaults], strict=True)]
    pairs += zip(args.kwonlyargs, args.kw_defaults, strict=True)
    given = {a.arg for a, d in pairs if d is None or constant(d) is None} - {"self", "cls"}
    return _mentions(facts, call.args[1], given, 0)


def _mentions(facts: Facts, node: ast.AST, names: set[str], depth: int) -> bool:
    """Does ``node`` use one of ``names``, itself or through the values of the names it uses
    (three steps: ``with open(save_file) as f``, ``save_file = join(d, base)``, ``base =
    f"{name}.pth"``)?"""
    for child in walk(node):
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
    callers = facts.callers(scope.name)
    return bool(callers) and all(
        _moved_after(facts, c, renames=True) or _names_apart(facts, c, index, path.id)
        for c in callers
    )


def _names_apart(facts: Facts, caller: ast.Call, index: int, param: str) -> bool:
    """The caller's path for the helper is temporary, or new each time (gpt-neox's merge20b:
    ``modify_model_states(output_model_state_path=...f"mp_rank_{i:02d}...")`` in a loop)."""
    given = keyword(caller, param)
    if given is None and 0 <= index < len(caller.args):
        given = caller.args[index]
    if given is None:
        return False
    targets = {dotted(a.target) for a in facts.around(caller) if isinstance(a, ast.For)}
    # only the loop's own variable or a counter: fairseq's f"{os.getcwd()}/{cfg.substring}.ckpt"
    # is formatted but the same file every time
    return _says_temporary(given) or _varies(facts, given, targets, 0, formats=False)


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
    targets = {dotted(a.target) for a in facts.around(call) if isinstance(a, ast.For)}
    return _varies(facts, call.args[1], targets, 0)


def _varies(
    facts: Facts, path: ast.AST, targets: set[str | None], depth: int, formats: bool = True
) -> bool:
    """Does the name change from one save to the next: a loop's target or a step counter in
    it, or (``formats``) any value formatted into it that is not a folder?"""
    for node in walk(path):
        if dotted(node) in targets:
            return True
        if isinstance(node, ast.Name) and depth < 2:  # follow a name one or two steps
            value = facts.last_value(facts.scope_of(node), node.id, node.lineno)
            if value is not None and _varies(facts, value, targets, depth + 1, formats):
                return True
        if formats and any(not _folder(v) for v in _formatted(node)):
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
