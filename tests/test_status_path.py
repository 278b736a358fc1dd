"""One status path: outside the backends, only ``rgt.jobs.status_cache`` asks a backend for a
job's status. Every other reader (`rgt status`, `watch`, `pull`, `triage`, the demo, sweeps,
the gate) goes through it, so they cannot disagree and the cache has one writer."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "rgt"
ASKS = ("status", "statuses")  # Backend.status(job_id), Backend.statuses(ids)
# notebooks/kaggle.py is a backend too: it lives beside the Kaggle API client it drives.
ALLOWED = ("backends/", "jobs/status_cache.py", "notebooks/kaggle.py")


def calls(source: str, names: tuple[str, ...]) -> Iterator[int]:
    """Line numbers of ``something.NAME(...)`` calls (``super().status`` included)."""
    for node in ast.walk(ast.parse(source)):
        func = node.func if isinstance(node, ast.Call) else None
        if isinstance(func, ast.Attribute) and func.attr in names:
            yield node.lineno


def test_only_the_status_path_asks_a_backend_for_a_status() -> None:
    found = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        if rel.startswith(ALLOWED):
            continue
        found += [f"{rel}:{line}" for line in calls(path.read_text("utf-8"), ASKS)]
    assert found == [], f"read a job's status through rgt.jobs.status_cache instead: {found}"


def test_the_check_sees_a_direct_read() -> None:
    source = "def f(backend, j):\n    x = 1\n    return backend.status(j)\n"
    assert list(calls(source, ASKS)) == [3]
    assert list(calls("store.status_of(j); backend.statuses([j])", ASKS)) == [1]
