"""Is a finding in a test suite rather than in training code? A suite's tiny CPU loaders and
throwaway checkpoints are not the bugs the rules are about."""

from __future__ import annotations

import ast
import os

from rgt.lint._facts import Facts

SUITE_FOLDERS = frozenset({"test", "tests"})
PYTEST_FIXTURES = {"tmp_path", "tmpdir", "monkeypatch", "capsys", "capfd", "caplog", "request"}


def in_suite_test(facts: Facts, node: ast.AST) -> bool:
    """Is ``node`` part of a test suite rather than training code: anywhere in a
    ``test_*.py``/``*_test.py`` module that imports pytest or unittest or sits in a
    ``test``/``tests`` folder, or in a ``test_*`` function there that takes no arguments or
    one of pytest's own fixtures, or in any module right in such a folder (``suite_helper``)?
    (A ``test_net.py`` evaluation script's ``def test_net(cfg, model)`` is checked.)"""
    name = os.path.basename(facts.path)
    if not _suite_file(name):
        return suite_helper(facts.path)
    if any(full.split(".")[0] in ("pytest", "unittest") for full in facts.aliases.values()):
        return True
    folders = set(os.path.normpath(os.path.dirname(facts.path)).split(os.sep))
    if folders & SUITE_FOLDERS:  # pytorch_geometric's test/transforms/test_to_device.py
        return True
    for outer in [node, *facts.functions_around(node)]:
        if isinstance(outer, ast.FunctionDef | ast.AsyncFunctionDef) and outer.name.startswith(
            "test_"
        ):
            params = {a.arg for a in outer.args.posonlyargs + outer.args.args}
            if not params or params & PYTEST_FIXTURES:
                return True
    return False


def _suite_file(name: str) -> bool:
    return name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py"))


def suite_helper(path: str) -> bool:
    """A module right in a ``test``/``tests`` folder: a suite's helper (fairseq's
    ``tests/utils.py`` builds tiny CPU loaders for its tests, which no throughput advice
    concerns). Decided by the path alone, which the cache's key holds."""
    return bool(path) and os.path.basename(os.path.dirname(os.path.abspath(path))) in SUITE_FOLDERS
