"""Fixtures of the fault suite, the `faults` marker on every trial, and the tally.

Set ``RGT_FAULTS_REPORT=PATH`` and the run writes, per fault class (the test function), how
many trials passed and failed and the first line of each failure: the figures of
RELIABILITY.md (``python -m tests.faults.report PATH`` renders them).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.faults.world import World

_TALLY: dict[str, dict[str, Any]] = {}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.faults)
            item.add_marker(pytest.mark.slow)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if "tests/faults/" not in report.nodeid.replace(os.sep, "/"):
        return
    if report.when != "call" and not (report.when == "setup" and not report.passed):
        return
    module = report.nodeid.split("::")[0].rsplit("/", 1)[-1].removesuffix(".py")
    name = report.nodeid.split("::")[-1].split("[")[0]
    row = _TALLY.setdefault(f"{module}::{name}", {"passed": 0, "failed": 0, "skipped": 0})
    row[report.outcome] = row.get(report.outcome, 0) + 1
    row["seconds"] = round(row.get("seconds", 0.0) + report.duration, 1)
    if report.failed:
        message = (
            str(report.longrepr.reprcrash.message)
            if hasattr(report.longrepr, "reprcrash")
            else str(report.longrepr)
        )  # type: ignore[union-attr]
        row.setdefault("failures", []).append(
            {"trial": report.nodeid.split("::")[-1], "why": message.splitlines()[0][:300]}
        )


def pytest_sessionfinish(session: pytest.Session) -> None:
    target = os.environ.get("RGT_FAULTS_REPORT")
    if hasattr(session.config, "workerinput"):  # an xdist worker: the controller writes it
        return
    if target and _TALLY:
        Path(target).write_text(json.dumps(_TALLY, indent=2, sort_keys=True) + "\n")


@pytest.fixture(scope="session")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    """One finished local job (5 artifacts, 2 checkpoints) for every trial that needs one."""
    built = World(tmp_path_factory.mktemp("faults-world")).build()
    yield built


@pytest.fixture
def fresh(world: World) -> World:
    """The world as it was right after the job succeeded."""
    world.restore()
    return world
