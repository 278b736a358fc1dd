"""Hermetic tests: every test gets its own RGT_HOME and a clean RGT_* environment."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from rgt.transport.ssh import short_control_dir
from tests.netns_nodes import ssh_two_nodes  # noqa: F401  (two sshd nodes, netns)

# The Slurm cluster is defined here once: a session fixture imported into several test modules
# is a fixture of each, and each started its own cluster beside the others (five at once on one
# worker, one node name between them: a node that never became idle).
from tests.slurm import slurm_cluster  # noqa: F401  (one Slurm cluster per worker)
from tests.slurm_nodes import slurm_two_nodes  # noqa: F401  (two-node Slurm, netns)
from tests.sshd import sshd_factory, sshd_server  # noqa: F401  (real-sshd fixtures)
from tests.ttys import without_a_pin

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
# Also pinned: the users of a session fixture costly to build (a torch import and training runs,
# an MCP server and its SDK), so one worker builds it once instead of every worker its own.
SHARED_RESOURCES = {
    "slurm_cluster": "slurm",
    "slurm_two_nodes": "slurm-nodes",  # tests/slurm_nodes.py: built once, its jobs one at a time
    "ssh_two_nodes": "ssh-nodes",
    "far_server": "netns",
    "demo_runs": "demo-runs",
    "mcp_server": "mcp",
    "corpus": "trackers",  # tests/verify/tracker: MLflow, W&B, TensorBoard, trackio writers
    "ckpt_corpus": "ckpt-corpus",  # tests/verify/corpus: checkpoints of five libraries, built once
}
# The fast tier (`-m "not slow"`) leaves out every test that starts a real sshd or Slurm, and
# those that need the demo's runs or the trackers' corpus (each a minute or more to build).
SLOW_FIXTURES = {
    "sshd_server",
    "sshd_factory",
    "slurm_cluster",
    "slurm_two_nodes",
    "ssh_two_nodes",
    "far_server",
    "demo_runs",
    "corpus",
}


@pytest.hookimpl(wrapper=True)
def pytest_collection_modifyitems(
    config: pytest.Config, items: list[pytest.Item]
) -> Iterator[None]:
    for item in items:
        names = getattr(item, "fixturenames", ())
        groups = sorted({SHARED_RESOURCES[name] for name in names if name in SHARED_RESOURCES})
        if groups:
            item.add_marker(pytest.mark.xdist_group("+".join(groups)))
        if SLOW_FIXTURES.intersection(names):
            item.add_marker(pytest.mark.slow)
    yield
    items[:] = sorted(items, key=_starts_late)  # stable: collection order otherwise
    if getattr(config.option, "loadgroup", False):
        _suffix_groups(items)


def _starts_late(item: pytest.Item) -> bool:
    """The longest tests (``@pytest.mark.early``) and the serial groups of one machine-wide
    resource go to the workers first: started last, one of them would end the run alone."""
    groups = {str(m.args[0]) for m in item.iter_markers("xdist_group") if m.args}
    return item.get_closest_marker("early") is None and not groups & {"slurm", "netns"}


def _suffix_groups(items: list[pytest.Item]) -> None:
    """xdist's loadgroup scheduler reads an item's group from a ``@group`` suffix of its node
    id, which xdist 3.8 writes into ``item._nodeid``; pytest >= 9.2 keeps the id in ``item._id``
    instead, so the suffix is lost and every group is spread over the workers
    (pytest-dev/pytest-xdist#1386). Write it where this pytest reads it."""
    for item in items:
        groups = sorted({str(m.args[0] if m.args else m.kwargs.get("name", "default"))
                         for m in item.iter_markers("xdist_group")})  # fmt: skip
        suffix = "@" + "_".join(groups)
        if groups and not item.nodeid.endswith(suffix) and hasattr(item, "_id"):
            from _pytest.nodeid import NodeId

            item._id = NodeId.parse(item.nodeid + suffix)


# xdist puts each worker's temp dirs one level deeper (<basetemp>/popen-gwN/), which pushes
# the ssh ControlMaster socket under RGT_HOME past the 107 bytes a unix socket path may have
# ("unix_listener: path ... too long"). A parallel run without --basetemp gets a short one,
# removed again when every test passed.
_SHORT_BASETEMP = pytest.StashKey[str]()
_STARTED = pytest.StashKey[float]()


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    config.stash[_STARTED] = time.time()
    parallel = getattr(config.option, "numprocesses", None)
    if parallel and config.option.basetemp is None and not hasattr(config, "workerinput"):
        config.option.basetemp = config.stash[_SHORT_BASETEMP] = tempfile.mkdtemp(prefix="rgt-t.")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    short = session.config.stash.get(_SHORT_BASETEMP, None)
    if short and exitstatus == 0:
        session.config.add_cleanup(lambda: shutil.rmtree(short, ignore_errors=True))
    if not hasattr(session.config, "workerinput"):
        _remove_empty_control_dirs(session.config.stash.get(_STARTED, time.time()))


def _remove_empty_control_dirs(since: float) -> None:
    """The short ssh control folders (``/tmp/rgt-UID-*``) that this run's tests made through
    an RGT_HOME of their own (a subprocess's, not the fixture's): the empty ones made since the
    run started. A folder with a live master's socket is not empty and stays."""
    for folder in Path(tempfile.gettempdir()).glob(f"rgt-{os.getuid()}-*"):
        with contextlib.suppress(OSError):
            if folder.stat().st_mtime >= since - 1:
                folder.rmdir()


@pytest.fixture(autouse=True)
def rgt_home(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Path]:
    home = tmp_path_factory.mktemp("rgt-home")
    for key in list(os.environ):
        if key.startswith("RGT_"):
            monkeypatch.delenv(key)
    monkeypatch.setenv("RGT_HOME", str(home))
    without_a_pin()  # the recorded `--no-pin` opt-out; tests/test_approvals.py tests the PIN
    yield home
    # a long RGT_HOME puts the ssh control sockets in a folder of the temp dir: gone with the test
    for used in {str(home), os.environ.get("RGT_HOME", str(home))}:  # a test may set its own
        with contextlib.suppress(OSError):
            short_control_dir(Path(used) / "ssh").rmdir()


# The fast tier runs each hostile-name test with one name (a space and a command substitution);
# the full suite with all of them.
FAST_HOSTILE_NAME = "$(touch PWNED)"


@pytest.fixture(
    params=[
        pytest.param(name, marks=() if name == FAST_HOSTILE_NAME else pytest.mark.slow)
        for name in HOSTILE_NAMES
    ]
)
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
