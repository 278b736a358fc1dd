"""Functions of a module that set the mode they are told (clevr-iep's ``set_mode(mode,
models)``: ``m.train()`` if ``mode == 'train'``, ``m.eval()`` if ``mode == 'eval'``): a call
``set_mode('eval', [...])`` is an ``.eval()`` of its models, ``set_mode('train', [...])`` a
``.train()``. ``_mode_loops.left_in_eval`` reads them so, and not the calls inside them.
Also what every mode rule asks of a module: ``.train(False)`` is an ``.eval()``, and whether
the module freezes parameters (answered once per module)."""

from __future__ import annotations

import ast

from rgt.lint._facts import Facts
from rgt.lint._nodes import dotted, method
from rgt.lint._tree import walk

MODES = ("train", "eval")
HELPED = "<models a mode helper switches>"  # the owner of a helper's calls in ``trained``


def mode_helpers(facts: Facts) -> dict[str, ast.FunctionDef]:
    """Module-level functions with a parameter compared to ``'train'``/``'eval'`` in an
    ``if`` whose body calls that method: ``name -> function`` (from the module's ``if``
    statements, no walk of every function)."""
    found = {}
    top = {id(f) for f in facts.tree.body if isinstance(f, ast.FunctionDef)}
    for branch in facts.ifs:
        around = facts.functions_around(branch)
        func = around[0] if around else None
        if not isinstance(func, ast.FunctionDef) or id(func) not in top or func.name in found:
            continue
        if _switches(branch, {a.arg for a in func.args.args}):
            found[func.name] = func
    return found


def _switches(branch: ast.If, params: set[str]) -> bool:
    test = branch.test
    if not isinstance(test, ast.Compare) or not isinstance(test.left, ast.Name):
        return False
    if test.left.id not in params or len(test.comparators) != 1:
        return False
    word = test.comparators[0]
    if not isinstance(word, ast.Constant) or word.value not in MODES:
        return False
    return any(method(n) == word.value for n in walk(ast.Module(branch.body, [])))


def mode_of(call: ast.Call, helpers: dict[str, ast.FunctionDef]) -> str | None:
    """``'train'``/``'eval'`` for a helper call given that word first, else None."""
    name = dotted(call.func)
    if name not in helpers or not call.args:
        return None
    word = call.args[0]
    return word.value if isinstance(word, ast.Constant) and word.value in MODES else None


def freezes(facts: Facts) -> bool:
    """Parameters frozen (``p.requires_grad = False``, ``requires_grad_(False)``): a linear
    probe on a frozen backbone keeps it in eval mode on purpose (moco's main_lincls). Asked by
    several rules of one module: answered once, from the module's assignments."""
    said = facts.memo.get("freezes")
    if said is None:
        said = facts.memo["freezes"] = _freezes(facts)
    return bool(said)


def _freezes(facts: Facts) -> bool:
    if any(train_false(c) for c in facts.methods_called("requires_grad_")):
        return True
    return any(
        isinstance(node.value, ast.Constant) and node.value.value is False and _requires_grad(node)
        for node in facts.assignment_statements()
    )


def _requires_grad(node: ast.Assign) -> bool:
    return any(isinstance(t, ast.Attribute) and t.attr == "requires_grad" for t in node.targets)


def train_false(call: ast.Call) -> bool:
    return bool(call.args) and isinstance(call.args[0], ast.Constant) and not call.args[0].value
