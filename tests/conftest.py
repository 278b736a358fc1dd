"""Hermetic tests: every test gets its own RGT_HOME and a clean RGT_* environment."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Iterator
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


# Tests that share one resource of the machine run on one pytest-xdist worker, one at a time
# (`--dist loadgroup`): the session's single-node Slurm cluster (munged, slurmd and its node
# name are machine-wide) and the veth/netns "far host" (its 10.213.X.0/30 subnet lives in the
# root namespace). Keyed on the fixture, so a new test that uses one is pinned too.
SHARED_RESOURCES = {"slurm_cluster": "slurm", "far_server": "netns"}


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        names = getattr(item, "fixturenames", ())
        groups = sorted({SHARED_RESOURCES[name] for name in names if name in SHARED_RESOURCES})
        if groups:
            item.add_marker(pytest.mark.xdist_group("+".join(groups)))


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


# A factory: small_tmpfs(size, inodes) mounts a real tmpfs (root only) under a path with
# non-ASCII characters, for disk-full and inode-exhaustion tests; unmounted afterwards.
TmpfsMount = Callable[[str, int], Path]


@pytest.fixture
def small_tmpfs(tmp_path: Path) -> Iterator[TmpfsMount]:
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    point = tmp_path / "small disk ünï"
    point.mkdir()
    mounted = False

    def mount(size: str, inodes: int) -> Path:
        nonlocal mounted
        options = f"size={size},nr_inodes={inodes}"
        proc = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(point)],
            capture_output=True,
            text=True,
        )
        if proc.returncode != 0:
            pytest.skip(f"cannot mount tmpfs here (no CAP_SYS_ADMIN?): {proc.stderr.strip()}")
        mounted = True
        return point

    try:
        yield mount
    finally:
        if mounted:
            subprocess.run(["umount", "-l", str(point)], check=True)
