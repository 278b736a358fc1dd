"""One status path: outside the backends, only ``rgt.status.read`` asks a backend for a job's
status (``Backend.read_jobs``, the one read; ``interpret`` is its hook). Every other reader
(`rgt status`, `watch`, `pull`, `triage`, the demo, sweeps, the gate, adopt, autostop) goes
through it, so they cannot disagree and the cache has one writer (``rgt.status.cache``)."""

from __future__ import annotations

import ast
import importlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from rgt.backends import REGISTRY
from rgt.backends.base import Backend

SRC = Path(__file__).resolve().parents[1] / "src" / "rgt"
# The one read and its hook; the reads the seam had before it, should one come back.
ASKS = ("read_jobs", "interpret", "status", "statuses", "machine_jobs")
# notebooks/kaggle.py is a backend too: it lives beside the Kaggle API client it drives.
ALLOWED = ("backends/", "status/read.py", "notebooks/kaggle.py")
GONE = ("status", "statuses", "machine_jobs", "read_machine")


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
    assert found == [], f"read a job's status through rgt.status.read instead: {found}"


def test_the_check_sees_a_direct_read() -> None:
    source = "def f(backend, j):\n    x = 1\n    return backend.read_jobs([j])\n"
    assert list(calls(source, ASKS)) == [3]
    assert list(calls("store.status_of(j); backend.interpret({j: d})", ASKS)) == [1]


def test_the_seam_has_one_read() -> None:
    assert [name for name in GONE if hasattr(Backend, name)] == []


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_no_backend_replaces_the_one_read(name: str) -> None:
    """A backend adds its word through ``interpret`` (and, for one round trip, ``_patrol``):
    the read itself, and what it leaves out, stay the base's."""
    module, class_name, _extra = REGISTRY[name]
    cls = getattr(importlib.import_module(module), class_name)
    assert cls.read_jobs is Backend.read_jobs
    assert [n for n in GONE if hasattr(cls, n)] == []
