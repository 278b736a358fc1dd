"""Approvals through real pseudo-terminals: the first approval sets the PIN, every later one asks
for it; what a pty driver can do after the `--no-pin` opt-out (documented), what it cannot do with
a PIN, the durable lockout, and `down --yes` that never approves.

tests/conftest.py records the `--no-pin` opt-out in every test's RGT_HOME; the tests of the first
approval start from a home without it (``first_use``)."""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from rgt.lifecycle.approvals import ATTEMPTS_FILE, BASE_LOCK_S, MAX_FAILURES, PIN_FILE, failure
from tests.clirun import rgt
from tests.ttys import PtyRgt, approve_at_a_terminal, set_pin, type_new_pin

PIN = "correct horse 42"
RGT = f"{sys.executable} -m rgt.cli"


def scripted(command: str, typed: str = "") -> subprocess.CompletedProcess[str]:
    """The attack of the issue: `script` makes a pty, so rgt sees a terminal; `typed` is piped
    into it as if a human typed it."""
    return subprocess.run(
        ["script", "-qec", command, "/dev/null"],
        input=typed,
        capture_output=True,
        text=True,
        timeout=120,
    )


def approvals(home: Path) -> list[tuple[str, str]]:
    with sqlite3.connect(home / "state.db") as conn:
        return list(conn.execute("SELECT machine, action FROM approvals"))


@pytest.fixture
def box(tmp_path: Path) -> str:
    """A machine with no jobs: the gate lacks only the approval."""
    proc = rgt("up", "local", "--name", "box", "--root", str(tmp_path / "root"))
    assert proc.returncode == 0, proc.stderr
    return "box"


@pytest.fixture
def first_use(rgt_home: Path) -> Path:
    """A home where no approval happened yet: no PIN, and no recorded `--no-pin`."""
    (rgt_home / PIN_FILE).unlink(missing_ok=True)  # conftest recorded `--no-pin`
    return rgt_home


def pin_record(home: Path) -> dict[str, object]:
    return dict(json.loads((home / PIN_FILE).read_text()))


@pytest.mark.slow
def test_the_first_approval_sets_the_pin_and_later_ones_ask_for_it(
    box: str, first_use: Path
) -> None:
    first = PtyRgt("approve", box)
    first.expect(f"Type {box} to approve")
    first.type(box)
    first.expect("No approval PIN is set yet")
    type_new_pin(first, PIN)
    assert first.wait() == 0, first.seen
    assert PIN.encode() not in first.seen  # typed with echo off
    assert pin_record(first_use)["kdf"] == "scrypt"
    assert approvals(first_use) == [(box, "down")]
    wrong = PtyRgt("approve", box)
    wrong.expect(f"Type {box} to approve")
    wrong.type(box)
    wrong.expect("Approval PIN")
    wrong.type("guess-123456")
    assert wrong.wait() == 3 and b"wrong approval PIN" in wrong.seen
    assert approve_at_a_terminal(box, pin=PIN) == 0


@pytest.mark.slow
def test_a_first_approval_with_two_different_pins_approves_nothing(
    box: str, first_use: Path
) -> None:
    first = PtyRgt("approve", box)
    first.expect(f"Type {box} to approve")
    first.type(box)
    type_new_pin(first, PIN, again="correct horse 43")
    assert first.wait() == 2 and b"differ" in first.seen
    assert approvals(first_use) == [] and not (first_use / PIN_FILE).exists()


@pytest.mark.parametrize("verb", ["approve", "down"])
@pytest.mark.slow
def test_a_pty_driver_typing_the_name_cannot_approve_on_first_use(
    box: str, first_use: Path, verb: str
) -> None:
    # The weak spot of the issue: a program that drives the terminal typed the name, which
    # approved before. Now the approval waits for a PIN to be set; an empty answer refuses.
    proc = PtyRgt(verb, box)
    proc.expect(f"Type {box} to approve")
    proc.type(box)
    proc.expect("No approval PIN is set yet")
    type_new_pin(proc, "")
    assert proc.wait() == 2 and b"too short" in proc.seen
    assert approvals(first_use) == [] and not (first_use / PIN_FILE).exists()
    assert rgt("status", "--json").returncode == 0
    with sqlite3.connect(first_use / "state.db") as conn:
        assert conn.execute("SELECT released FROM machines").fetchone()[0] is None


@pytest.mark.slow
def test_no_pin_is_recorded_and_later_approvals_do_not_ask(box: str, first_use: Path) -> None:
    proc = PtyRgt("approve", box, "--no-pin")
    proc.expect(f"Type {box} to approve")
    proc.type(box)
    assert proc.wait() == 0, proc.seen
    assert b"PIN" not in proc.seen.split(box.encode() + b" to approve")[-1]
    assert pin_record(first_use)["kdf"] == "none"
    assert approve_at_a_terminal(box) == 0  # the name alone, as recorded


@pytest.mark.slow
def test_no_pin_cannot_skip_a_pin_that_is_set(box: str, rgt_home: Path) -> None:
    assert set_pin(PIN) == 0
    proc = PtyRgt("approve", box, "--no-pin")
    assert proc.wait() == 2 and b"does not skip it" in proc.seen
    alone = scripted(f"{RGT} approve --no-pin")
    assert alone.returncode == 2 and "does not skip it" in alone.stdout
    assert pin_record(rgt_home)["kdf"] == "scrypt" and approvals(rgt_home) == []


def test_no_pin_needs_the_terminal(first_use: Path) -> None:
    proc = rgt("approve", "--no-pin", "--json")
    assert proc.returncode == 3 and "terminal" in json.loads(proc.stdout)["message"]
    assert not (first_use / PIN_FILE).exists()


def test_after_no_pin_a_pty_driver_can_approve(box: str, rgt_home: Path) -> None:
    # Documented in README ("Approvals and the threat model"): with the `--no-pin` opt-out the
    # terminal check alone does not stop a program that drives a pseudo-terminal.
    proc = scripted(f"{RGT} approve {box}", typed=f"{box}\n")
    assert proc.returncode == 0, proc.stdout
    assert approvals(rgt_home) == [(box, "down")]


def test_a_pipe_cannot_approve_even_with_the_name(box: str, rgt_home: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "rgt.cli", "approve", box, "--json"],
        input=f"{box}\n",
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 3
    assert "terminal" in json.loads(proc.stdout)["message"]
    assert approvals(rgt_home) == []


@pytest.mark.slow
def test_with_a_pin_a_pty_driver_cannot_approve(box: str, rgt_home: Path) -> None:
    assert set_pin(PIN) == 0
    proc = scripted(f"{RGT} approve {box}", typed=f"{box}\n")
    assert proc.returncode == 3, proc.stdout
    wrong = PtyRgt("approve", box)
    wrong.expect(f"Type {box} to approve")
    wrong.type(box)
    wrong.expect("Approval PIN")
    wrong.type("guess-123456")
    assert wrong.wait() == 3
    assert b"wrong approval PIN" in wrong.seen and b"guess-123456" not in wrong.seen  # echo off
    assert approvals(rgt_home) == []
    assert approve_at_a_terminal(box, pin=PIN) == 0
    assert approvals(rgt_home) == [(box, "down")]
    assert rgt("down", box, "--json").returncode == 0


@pytest.mark.slow
def test_the_lockout_holds_across_processes(box: str, rgt_home: Path) -> None:
    assert set_pin(PIN) == 0
    for attempt in range(MAX_FAILURES):
        assert approve_at_a_terminal(box, pin=f"wrong-{attempt:06d}") == 3
    # Every try above was its own process; the next one, even with the right PIN, is locked.
    locked = PtyRgt("approve", box)
    locked.expect(f"Type {box} to approve")
    locked.type(box)
    locked.expect("Approval PIN")
    locked.type(PIN)
    assert locked.wait() == 3
    assert b"locked" in locked.seen
    assert approvals(rgt_home) == []
    record = json.loads((rgt_home / ATTEMPTS_FILE).read_text())
    assert record["lockouts"] == 1 and record["locked_until"] > 0


def test_the_lockout_grows() -> None:
    state = {"failures": 0, "lockouts": 0, "locked_until": 0.0}
    locks = []
    for _ in range(3 * MAX_FAILURES):
        state = failure(state, now=1000.0)
        if state["failures"] == 0:
            locks.append(state["locked_until"] - 1000.0)
    assert locks == [BASE_LOCK_S, 2 * BASE_LOCK_S, 4 * BASE_LOCK_S]


def test_the_pin_is_a_private_slow_hash(box: str, rgt_home: Path) -> None:
    assert set_pin(PIN) == 0
    pin_file = rgt_home / PIN_FILE
    assert stat.S_IMODE(pin_file.stat().st_mode) == 0o600
    record = json.loads(pin_file.read_text())
    assert record["kdf"] == "scrypt" and record["scrypt"]["n"] >= 2**14
    for path in rgt_home.rglob("*"):
        if path.is_file():
            assert PIN.encode() not in path.read_bytes(), path


@pytest.mark.slow
def test_changing_or_removing_the_pin_needs_the_old_one(box: str, rgt_home: Path) -> None:
    assert set_pin(PIN) == 0
    change = PtyRgt("approve", "--set-pin")
    change.expect("Current approval PIN")
    change.type("not-the-pin")
    assert change.wait() == 3 and b"New approval PIN" not in change.seen
    assert scripted(f"{RGT} approve --remove-pin", typed="\n").returncode == 3
    assert (rgt_home / PIN_FILE).exists()
    assert set_pin("new-pin-000", old=PIN) == 0
    assert approve_at_a_terminal(box, pin="new-pin-000") == 0
    remove = PtyRgt("approve", "--remove-pin")
    remove.expect("Current approval PIN")
    remove.type("new-pin-000")
    assert remove.wait() == 0
    assert not (rgt_home / PIN_FILE).exists()


def test_an_unreadable_pin_file_fails_closed(box: str, rgt_home: Path) -> None:
    (rgt_home / PIN_FILE).write_text("{not json")
    proc = scripted(f"{RGT} approve {box}", typed=f"{box}\nanything\n")
    assert proc.returncode == 1 and "unreadable" in proc.stdout
    assert approvals(rgt_home) == []


@pytest.mark.parametrize("with_pin", [False, True])
@pytest.mark.slow
def test_down_yes_over_a_pty_never_approves(box: str, rgt_home: Path, with_pin: bool) -> None:
    if with_pin:
        assert set_pin(PIN) == 0
    proc = scripted(f"{RGT} down {box} --yes --json")
    assert proc.returncode == 3, proc.stdout
    assert approvals(rgt_home) == []
    assert os.path.exists(rgt_home / "state.db")
    doc = rgt("status", "--json")
    assert doc.returncode == 0 and "box" in doc.stdout


@pytest.mark.slow
def test_the_typed_prompt_of_down_needs_the_pin(box: str, rgt_home: Path) -> None:
    assert set_pin(PIN) == 0
    for pin, code in (("not-the-pin", 3), (PIN, 0)):
        down = PtyRgt("down", box)
        down.expect(f"Type {box} to approve")
        down.type(box)
        down.expect("Approval PIN")
        down.type(pin)
        assert down.wait() == code, down.seen
    assert b"released" in down.seen
    with sqlite3.connect(rgt_home / "state.db") as conn:
        assert conn.execute("SELECT released FROM machines").fetchone()[0] is not None


@pytest.mark.slow
def test_a_damaged_attempt_counter_locks_once(box: str, rgt_home: Path) -> None:
    assert set_pin(PIN) == 0
    (rgt_home / ATTEMPTS_FILE).write_text("[garbage")
    assert approve_at_a_terminal(box, pin=PIN) == 3  # damaged counter: locked, never unlocked
    record = json.loads((rgt_home / ATTEMPTS_FILE).read_text())
    assert record["lockouts"] == 1 and "damaged" not in record
    record["locked_until"] = 0.0  # the lock ran out
    (rgt_home / ATTEMPTS_FILE).write_text(json.dumps(record))
    assert approve_at_a_terminal(box, pin=PIN) == 0
