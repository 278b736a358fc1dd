"""Ctrl-C during `rgt up`: the vendor's instance id is already in the state store, and
`rgt down NAME` finds and terminates it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable

import pytest

from rgt.state.store import Store
from tests.sshd import wait_for
from tests.ttys import PtyRgt
from tests.vendors.fakes._server import FakeVendor

# `rgt` as a terminal starts it: Ctrl-C raises KeyboardInterrupt. A test run started in the
# background by a non-interactive shell inherits SIGINT ignored, and Python then leaves it so.
CTRL_C_ON = (
    "import runpy, signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
    "sys.argv[0] = 'rgt'; runpy.run_module('rgt.cli', run_name='__main__')"
)


@pytest.mark.slow
def test_ctrl_c_during_up_leaves_the_id_recorded_for_down(
    fake_for: Callable[..., FakeVendor], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RGT_VENDOR_POLL_S", "0.1")
    fake = fake_for("runpod", boot_polls=10**6, gone_polls=1)
    up = subprocess.Popen(
        [sys.executable, "-c", CTRL_C_ON, "up", "runpod", "--name", "cc", "--gpu", "A100:1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONFAULTHANDLER": "1"},  # SIGABRT dumps every thread's stack
    )
    try:
        assert wait_for(lambda: fake.count("GET", "/v1/pods/") >= 2, timeout=60)
        up.send_signal(signal.SIGINT)
        assert _ended(up) != 0  # click turns Ctrl-C into "aborted", exit 1
    finally:
        if up.poll() is None:
            up.kill()
            up.wait()
    (row,) = Store.open().vendor_instances("cc")
    assert row["instance_id"] in fake.instances and row["released"] is None
    refused = subprocess.run(
        [sys.executable, "-m", "rgt.cli", "down", "cc", "--json"],
        capture_output=True,
        text=True,
        env=os.environ.copy(),
        timeout=120,
    )
    assert refused.returncode == 3 and fake.billed()  # no human at a terminal: still billing
    down = PtyRgt("down", "cc")
    down.expect("Type cc to approve")
    down.type("cc")
    assert down.wait() == 0, down.seen
    assert fake.billed() == []


def _ended(up: subprocess.Popen[bytes], timeout: float = 60.0) -> int:
    """The exit code of ``up`` after its Ctrl-C; if it is still running after ``timeout``
    (once, on a heavily loaded run), fail with where each of its threads stood."""
    try:
        return up.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        up.send_signal(signal.SIGABRT)
        _, err = up.communicate(timeout=30)
        said = err.decode()
        raise AssertionError(f"rgt up still ran {timeout:g} s after Ctrl-C:\n{said}") from None
