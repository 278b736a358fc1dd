"""One vocabulary: the terminal states of a job are spelled once, in the module the agent
ships (``rgt.agent.jobfiles.TERMINAL``; ``rgt.models.TERMINAL`` is its enum). A second
spelling drifts (a new state added in one place only) and lets two readers disagree."""

from __future__ import annotations

import ast
from pathlib import Path

import rgt

SRC = Path(rgt.__file__).parent
HOME = SRC / "agent" / "jobfiles.py"
ENDED = {"succeeded", "failed", "cancelled"}
STATES = {"queued", "running", "retrying", *ENDED}


def literal_sets(tree: ast.AST) -> list[int]:
    """Lines of a tuple, list or set display whose job states are exactly the end states."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            items = {e.value for e in node.elts if isinstance(e, ast.Constant)}
            if items & STATES == ENDED:
                found.append(node.lineno)
    return found


def test_terminal_states_are_spelled_in_one_module() -> None:
    spelled = {
        f"{path.relative_to(SRC)}:{line}"
        for path in SRC.rglob("*.py")
        for line in literal_sets(ast.parse(path.read_text(), str(path)))
    }
    assert spelled == {f"{HOME.relative_to(SRC)}:{literal_sets(ast.parse(HOME.read_text()))[0]}"}


def test_the_check_sees_a_second_spelling() -> None:
    assert literal_sets(ast.parse('ENDED = ("cancelled", "failed", "succeeded", "lost")')) == [1]
    assert literal_sets(ast.parse('x in {"succeeded", "failed"}')) == []


def test_one_module_writes_job_state_to_the_local_cache() -> None:
    """``Store.update_job`` is called from ``rgt.jobs.status_cache`` only: every read
    (status, watch, the gate, adopt, sweeps) caches what it proves through the same writer."""
    callers = {
        str(path.relative_to(SRC))
        for path in SRC.rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text(), str(path)))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "update_job"
    }
    assert callers == {"jobs/status_cache.py"}
