"""Bad autostop input: a clear error naming the fix, and nothing armed (no policy on the machine,
no question at the terminal: these run with no terminal at all)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.autostop.helpers import files, recorder
from tests.clirun import rgt
from tests.sshd import SshServer

# Each test registers a machine and runs the CLI (2-4 s under load).
pytestmark = pytest.mark.slow


@pytest.fixture
def box(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    up = rgt("up", "local", "--name", "box", "--root", str(root), "--self-stop", recorder(root))
    assert up.returncode == 0, up.stderr
    return root


@pytest.mark.parametrize(
    ("options", "words"),
    [
        (("--idle", "0"), "--idle must be longer than 0"),
        (("--idle", "soon"), "is not a duration"),
        (("--budget", "-1"), "--budget must be more than 0"),
        (("--budget", "5XYZ"), "unknown currency 'XYZ'"),
        (("--budget", "5CNY"), "this machine's prices are in USD"),
        (("--budget", "5"), "--budget needs the price of box"),
        (("--at", "2001-01-01T00:00"), "is in the past"),
    ],
)
def test_bad_values_arm_nothing(box: Path, options: tuple[str, ...], words: str) -> None:
    proc = rgt("approve", "box", "--autostop", *options)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert words in proc.stderr and "fix" in proc.stderr.lower(), proc.stderr
    assert "Type box" not in proc.stdout + proc.stderr  # refused before anyone was asked
    assert not Path(files(box).policy).exists()


def test_an_option_without_autostop_is_a_usage_error(box: Path) -> None:
    proc = rgt("approve", "box", "--idle", "30m")
    assert proc.returncode == 2 and "--idle belongs to --autostop" in proc.stderr


def test_a_destroy_is_never_a_self_stop(tmp_path: Path) -> None:
    root = tmp_path / "root"
    cmd = "vastai destroy instance 42"
    proc = rgt("up", "local", "--name", "box", "--root", str(root), "--self-stop", cmd)
    assert proc.returncode == 2 and "release/terminate/destroy" in proc.stderr
    assert "box" not in rgt("status", "--json").stdout  # nothing registered


def test_a_machine_without_a_declared_stop_is_refused_with_the_fix(tmp_path: Path) -> None:
    assert rgt("up", "local", "--name", "plain", "--root", str(tmp_path / "r")).returncode == 0
    proc = rgt("approve", "plain", "--autostop")
    assert proc.returncode == 3, proc.stderr
    assert "--self-stop" in proc.stderr


def test_arming_where_the_stop_still_bills_is_refused(
    tmp_path: Path, sshd_server: SshServer
) -> None:
    root = tmp_path / "root"
    up = rgt("up", "lambda", "--name", "lam", "--ssh", sshd_server.ssh_line, "--root", str(root))
    assert up.returncode == 0, up.stderr
    proc = rgt("approve", "lam", "--autostop", "--after-jobs")
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "billing continues" in proc.stderr
    assert not Path(files(root).policy).exists()


def test_arming_needs_the_pin_like_a_release(box: Path, rgt_home: Path) -> None:
    """Same approval path as `rgt approve NAME`: with a PIN set, a program that drives a
    terminal and types the name cannot arm autostop."""
    from rgt.lifecycle.approvals import PIN_FILE
    from tests.ttys import PtyRgt, set_pin

    (rgt_home / PIN_FILE).unlink()  # conftest recorded the --no-pin opt-out
    assert set_pin("correct horse 42") == 0
    proc = PtyRgt("approve", "box", "--autostop")
    proc.expect("Type box to approve")
    proc.type("box")
    proc.expect("Approval PIN")
    proc.type("a guess")
    assert proc.wait() == 3
    assert not Path(files(box).policy).exists()


def test_the_library_never_asks_a_human_itself(box: Path) -> None:
    """Arming and disarming take the caller's consent; with none (MCP, scripts) both are refused
    with the command a human runs, and nothing is written on the machine."""
    from rgt.autostop import arm
    from rgt.autostop.policy import Options
    from rgt.errors import ApprovalNeeded
    from rgt.state.store import Store

    store = Store.open()
    money = {"price_per_hour": None, "spent_at_arm": 0.0}
    with pytest.raises(ApprovalNeeded) as refused:
        arm.arm(store, "box", Options(idle="30m"), money)
    assert refused.value.command == "rgt approve box --autostop"
    assert not Path(files(box).policy).exists()
    Path(files(box).policy).parent.mkdir(parents=True)
    Path(files(box).policy).write_text("{}")
    with pytest.raises(ApprovalNeeded, match="needs a human"):
        arm.disarm(store, "box")
    assert Path(files(box).policy).exists()  # still armed: nothing was removed
