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


def _writes_state(node: ast.AST) -> bool:
    """``store.update_job(...)``, or ``store.add_job(spec, STATE)`` (a record born with a
    state other than the default: what adopt once wrote itself)."""
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
        return False
    given = len(node.args) > 1 or any(k.arg == "state" for k in node.keywords)
    return node.func.attr == "update_job" or (node.func.attr == "add_job" and given)


def test_one_module_writes_job_state_to_the_local_cache() -> None:
    """``Store.update_job`` (and ``add_job`` with a state) is called from
    ``rgt.status.cache`` only: every read (status, watch, the gate, adopt, sweeps) caches
    what it proves through the same writer."""
    callers = {
        str(path.relative_to(SRC))
        for path in SRC.rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text(), str(path)))
        if _writes_state(node)
    }
    assert callers == {"status/cache.py"}


def test_the_writer_check_sees_a_second_writer() -> None:
    assert _writes_state(ast.parse("store.add_job(spec, JobState.QUEUED)").body[0].value)  # type: ignore[attr-defined]
    assert not _writes_state(ast.parse("store.add_job(spec)").body[0].value)  # type: ignore[attr-defined]


# rgt's own timestamps (``2026-12-01T10:00:00.123456Z``: the agent's files, the state DB) are
# read by one parser, ``rgt.agent.jobfiles.parse_time``. Times written by someone else are read
# where they arrive: a user's ``--at`` (autostop's policy) and a tracker's own files.
TIME_PARSERS = ("strptime", "fromisoformat")
FOREIGN_TIMES = {"autostop/policy.py", "verify/tracker/_trackio.py"}


def time_parses(tree: ast.AST) -> list[int]:
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in TIME_PARSERS
    ]


def test_rgts_timestamps_have_one_parser() -> None:
    parsing = {
        f"{path.relative_to(SRC)}:{line}"
        for path in SRC.rglob("*.py")
        if path.relative_to(SRC).as_posix() not in FOREIGN_TIMES
        for line in time_parses(ast.parse(path.read_text(), str(path)))
    }
    assert {entry.split(":")[0] for entry in parsing} == {"agent/jobfiles.py"}, parsing


def test_the_time_check_sees_a_second_parser() -> None:
    source = "import time\nt = time.strptime(s, '%Y')\nd = datetime.fromisoformat(s)\n"
    assert time_parses(ast.parse(source)) == [2, 3]
