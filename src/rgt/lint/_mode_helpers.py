"""Functions of a module that set the mode they are told (clevr-iep's ``set_mode(mode,
models)``: ``m.train()`` if ``mode == 'train'``, ``m.eval()`` if ``mode == 'eval'``): a call
``set_mode('eval', [...])`` is an ``.eval()`` of its models, ``set_mode('train', [...])`` a
``.train()``. ``_mode_loops.left_in_eval`` reads them so, and not the calls inside them."""

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
