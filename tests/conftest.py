"""Hermetic tests: every test gets its own RGT_HOME and a clean RGT_* environment."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.sshd import sshd_factory, sshd_server  # noqa: F401  (real-sshd fixtures)

# Names that break naive shell quoting or path handling; every path-taking feature is tested
# with them.
HOSTILE_NAMES = (
    "with space",
    "it's quoted",
    'double"quote',
    "ünïcødé-数据",
    "$(touch PWNED)",
    "semi;colon&amp",
)


@pytest.fixture(autouse=True)
def rgt_home(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Path]:
    home = tmp_path_factory.mktemp("rgt-home")
    for key in list(os.environ):
        if key.startswith("RGT_"):
            monkeypatch.delenv(key)
    monkeypatch.setenv("RGT_HOME", str(home))
    yield home


@pytest.fixture(params=HOSTILE_NAMES)
def hostile_name(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def hostile_dir(tmp_path: Path, hostile_name: str) -> Path:
    path = tmp_path / hostile_name
    path.mkdir()
    return path
