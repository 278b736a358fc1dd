"""Approvals a program cannot give: the human at the terminal, and the approval PIN.

An approval needs a terminal: the human types the machine's name at the controlling terminal.
That stops an agent that runs rgt through a pipe, but not a process that drives a
pseudo-terminal (``script -qc "rgt approve NAME" /dev/null``). So every approval also needs a PIN,
a secret only the human knows, typed at the controlling terminal with echo off; a program can
ask for it, it cannot know it. The first approval asks the human to set it (or set it ahead with
``rgt approve --set-pin``, before any agent runs: whoever answers the first approval chooses).
``rgt approve NAME --no-pin`` is the explicit opt-out, recorded in the PIN file
(``{"kdf": "none"}``) so later approvals do not ask again; without a PIN, a program that drives a
pseudo-terminal can approve a release.

The PIN is stored as a slow salted hash (scrypt, ~32 MiB and ~0.1 s per try) in
``$RGT_HOME/approval-pin.json`` (mode 0600), never in the state DB. Wrong PINs are counted in
``$RGT_HOME/approval-attempts.json``: every ``MAX_FAILURES`` wrong in a row lock approvals for
a delay that doubles each time, recorded on disk so a new process starts locked too.
"""

from __future__ import annotations

import fcntl
import hashlib
import hmac
import json
import os
import secrets
import time
from pathlib import Path
from typing import Any

from rgt._tty import Terminal
from rgt.config import rgt_home
from rgt.errors import GateRefused, StateError, UsageError

PIN_FILE = "approval-pin.json"
ATTEMPTS_FILE = "approval-attempts.json"
NO_PIN = "none"  # the PIN file's ``kdf`` once the human opted out with ``rgt approve --no-pin``
SCRYPT = {"n": 2**15, "r": 8, "p": 1}
SCRYPT_MAXMEM = 64 * 2**20
MIN_PIN = 6
MAX_FAILURES = 5
BASE_LOCK_S = 60.0
MAX_LOCK_S = 24 * 3600.0


def pin_path() -> Path:
    return rgt_home() / PIN_FILE


def pin_state() -> str:
    """``pin`` (a PIN guards approvals), ``none`` (the human chose ``--no-pin``, recorded) or
    ``unset`` (no approval yet: the first one asks the human to set a PIN). Anything in the PIN
    file but a readable opt-out counts as ``pin``: a damaged file fails closed in ``check_pin``."""
    try:
        record = json.loads(pin_path().read_text())
    except FileNotFoundError:
        return "unset"
    except (OSError, ValueError):
        return "pin"
    return "none" if isinstance(record, dict) and record.get("kdf") == NO_PIN else "pin"


def pin_is_set() -> bool:
    return pin_state() == "pin"


def _hash(pin: str, salt: bytes, params: dict[str, int]) -> bytes:
    return hashlib.scrypt(pin.encode("utf-8"), salt=salt, maxmem=SCRYPT_MAXMEM, dklen=32, **params)


def _load_pin() -> dict[str, Any]:
    path = pin_path()
    try:
        record = json.loads(path.read_text())
        params = {k: int(record["scrypt"][k]) for k in ("n", "r", "p")}
        salt, digest = bytes.fromhex(record["salt"]), bytes.fromhex(record["hash"])
        return {"salt": salt, "hash": digest, "scrypt": params}
    except (OSError, ValueError, KeyError, TypeError) as exc:
        # Fail closed: a PIN file that cannot be read never means "no PIN".
        raise StateError(
            f"the approval PIN file {path} is unreadable ({exc})",
            fix=f"restore it, or delete {path} yourself to remove the PIN and set a new one",
        ) from exc


def _write_private(path: Path, data: dict[str, Any]) -> None:
    """Atomically, readable by the owner only (0600 from creation, not chmod-ed after)."""
    temp = path.with_name(f".{path.name}.{secrets.token_hex(4)}")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as handle:
        json.dump(data, handle)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temp, path)


def store_pin(pin: str) -> None:
    if len(pin) < MIN_PIN:
        raise UsageError("the PIN is too short", fix=f"use at least {MIN_PIN} characters")
    salt = secrets.token_bytes(16)
    record = {
        "kdf": "scrypt",
        "scrypt": SCRYPT,
        "salt": salt.hex(),
        "hash": _hash(pin, salt, SCRYPT).hex(),
        "set": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    _write_private(pin_path(), record)


def check_pin(pin: str) -> None:
    """Verify one try against the stored hash under the durable attempt limit."""
    path = rgt_home() / ATTEMPTS_FILE
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # tries are serial: parallel guessing gains nothing
        state = _read_attempts(path)
        if state.pop("damaged", False):
            _write_private(path, state)  # the lock starts once, it does not restart each try
        now = time.time()
        if state["locked_until"] > now:
            raise _locked(state["locked_until"] - now)
        record = _load_pin()
        if hmac.compare_digest(_hash(pin, record["salt"], record["scrypt"]), record["hash"]):
            _write_private(path, {"failures": 0, "lockouts": 0, "locked_until": 0.0})
            return
        state = failure(state, now)
        _write_private(path, state)
    finally:
        os.close(fd)
    if state["locked_until"] > now:
        raise _locked(state["locked_until"] - now)
    left = MAX_FAILURES - state["failures"]
    raise GateRefused(
        "wrong approval PIN",
        [f"{left} more wrong PIN(s) lock approvals"],
        fix="type the PIN you set with `rgt approve --set-pin`",
    )


def failure(state: dict[str, Any], now: float) -> dict[str, Any]:
    """The attempt state after one wrong PIN: every MAX_FAILURES-th locks, each lock twice as
    long as the one before (BASE_LOCK_S, 2×, 4×, … up to MAX_LOCK_S)."""
    failures = int(state["failures"]) + 1
    lockouts = int(state["lockouts"])
    locked_until = float(state["locked_until"])
    if failures >= MAX_FAILURES:
        locked_until = now + min(MAX_LOCK_S, BASE_LOCK_S * 2**lockouts)
        failures, lockouts = 0, lockouts + 1
    return {"failures": failures, "lockouts": lockouts, "locked_until": locked_until}


def _read_attempts(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text() or "{}")
        return {
            "failures": int(data.get("failures", 0)),
            "lockouts": int(data.get("lockouts", 0)),
            "locked_until": float(data.get("locked_until", 0.0)),
        }
    except (OSError, ValueError, TypeError, AttributeError):
        # A damaged counter must not unlock: treat it as one full lockout from now.
        until = time.time() + BASE_LOCK_S
        return {"failures": 0, "lockouts": 1, "locked_until": until, "damaged": True}


def _locked(seconds: float) -> GateRefused:
    return GateRefused(
        "approvals are locked after too many wrong PINs",
        [f"locked for another {seconds:.0f} s"],
        fix=f"wait {seconds:.0f} s, then type the PIN carefully",
    )


def human_consent(term: Terminal, what: str, name: str) -> str:
    """The human types ``name`` and the PIN at ``term`` (the first approval sets the PIN; after
    ``--no-pin`` the name alone); else ``GateRefused``. Returns the PIN state it approved under."""
    typed = term.ask(f"{what} Type {name} to approve: ")
    if typed != name:
        raise GateRefused(
            f"approval for {name} not given",
            [f"typed {typed!r}, not {name!r}"],
            fix="run the command again and type the name exactly",
        )
    state = pin_state()
    if state == "pin":
        check_pin(term.ask("Approval PIN: ", echo=False))
    elif state == "unset":
        first_pin(term)
    return state


def first_pin(term: Terminal) -> None:
    """The first approval: the human sets the PIN every later approval asks for."""
    term.say(
        "No approval PIN is set yet. Without one, any program that drives a terminal can "
        "approve a release. Set one now (every later approval asks for it), or stop here "
        "(Ctrl-C) and run `rgt approve --no-pin` to go without one.\n"
    )
    _ask_new_pin(term, "run the command again and type the same PIN twice")


def _ask_new_pin(term: Terminal, fix: str) -> None:
    new = term.ask(f"New approval PIN (at least {MIN_PIN} characters): ", echo=False)
    if term.ask("Type it again: ", echo=False) != new:
        raise UsageError("the two PINs differ; nothing changed", fix=fix)
    store_pin(new)


def record_no_pin(terminal: str) -> dict[str, Any]:
    """``--no-pin``: approvals go without a PIN from now on, recorded so none asks again.
    Refused once a PIN is set: only ``--remove-pin`` (which needs the PIN) takes it away."""
    if pin_is_set():
        raise UsageError(
            "an approval PIN is set; --no-pin does not skip it",
            fix="type the PIN; to go without one, `rgt approve --remove-pin` (needs the PIN), "
            "then `rgt approve NAME --no-pin`",
        )
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    _write_private(pin_path(), {"kdf": NO_PIN, "set": stamp, "terminal": terminal})
    return {"pin": "none", "path": str(pin_path())}


def opt_out_at_terminal(command: str) -> dict[str, Any]:
    """``rgt approve [NAME] --no-pin``: recorded only from the controlling terminal."""
    why = "choosing approvals without a PIN needs a human at a terminal"
    with Terminal.open(why, fix=f"run `{command}` yourself in a terminal") as term:
        return record_no_pin(term.name)


def approve_at_terminal(what: str, name: str, command: str) -> str:
    """Open the terminal, ask for consent; the terminal's name (recorded with the approval)."""
    why = f"`{command}` needs a human at a terminal"
    with Terminal.open(why, fix=f"run `{command}` yourself in a terminal") as term:
        human_consent(term, what, name)
        return term.name


def change_pin(*, remove: bool = False) -> dict[str, Any]:
    """``rgt approve --set-pin`` / ``--remove-pin``: at the terminal; the old PIN first."""
    fix = "run `rgt approve --set-pin` yourself, in a terminal"
    with Terminal.open("setting the approval PIN needs a human at a terminal", fix) as term:
        had = pin_is_set()
        if had:
            check_pin(term.ask("Current approval PIN: ", echo=False))
        elif remove:
            raise UsageError("no approval PIN is set", fix="set one with `rgt approve --set-pin`")
        if remove:  # the next approval asks to set a PIN again (or for --no-pin)
            pin_path().unlink()
            return {"pin": "removed"}
        _ask_new_pin(term, fix)
    return {"pin": "changed" if had else "set", "path": str(pin_path())}
