"""Drive rgt inside a real pseudo-terminal that is its controlling terminal (what a human at a
terminal has, and what `script` or `expect` give any program)."""

from __future__ import annotations

import os
import pty
import select
import signal
import sys
import time


class PtyRgt:
    """``rgt ARGS…`` as the session leader of a fresh pty; read and type through the master."""

    def __init__(self, *args: str, env: dict[str, str] | None = None) -> None:
        argv = [sys.executable, "-m", "rgt.cli", *args]
        child_env = {**os.environ, **(env or {})}
        pid, fd = pty.fork()  # setsid + the pty becomes the child's controlling terminal
        if pid == 0:  # pragma: no cover - the child
            try:
                os.execve(argv[0], argv, child_env)
            finally:
                os._exit(127)
        self.pid, self.fd = pid, fd
        self.seen = b""
        self.code: int | None = None

    def expect(self, marker: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while marker.encode() not in self.seen:
            assert time.monotonic() < deadline, f"never saw {marker!r}: {self.seen!r}"
            if not self._read(0.2):
                assert self.poll() is None, f"exited {self.code} before {marker!r}: {self.seen!r}"

    def type(self, line: str) -> None:
        os.write(self.fd, line.encode() + b"\n")

    def wait(self, timeout: float = 60) -> int:
        deadline = time.monotonic() + timeout
        while self.poll() is None:
            if time.monotonic() > deadline:
                os.kill(self.pid, signal.SIGKILL)
                os.waitpid(self.pid, 0)
                raise AssertionError(f"still running after {timeout}s: {self.seen!r}")
            self._read(0.1)
        while self._read(0.05):
            pass
        os.close(self.fd)
        assert self.code is not None
        return self.code

    def poll(self) -> int | None:
        if self.code is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.code = os.waitstatus_to_exitcode(status)
        return self.code

    def _read(self, wait: float) -> bool:
        ready, _, _ = select.select([self.fd], [], [], wait)
        if not ready:
            return False
        try:
            chunk = os.read(self.fd, 4096)
        except OSError:  # EIO: the child closed its side
            return False
        self.seen += chunk
        return bool(chunk)


def without_a_pin() -> None:
    """Record, in this test's RGT_HOME, the documented opt-out a human gives once with
    ``rgt approve NAME --no-pin``: tests that approve through a pty then type only the name, as
    before the first approval asked for a PIN. Tests of the PIN itself set one (``set_pin``) or
    remove this record to start from a first approval (``tests/test_approvals.py``)."""
    from rgt.lifecycle.approvals import record_no_pin

    record_no_pin("tests/conftest.py")


def approve_at_a_terminal(name: str, *extra: str, pin: str | None = None) -> int:
    """The human's approval: type the name (and the PIN when one is set) at a real terminal."""
    proc = PtyRgt("approve", name, *extra)
    proc.expect(f"Type {name} to approve")
    proc.type(name)
    if pin is not None:
        proc.expect("Approval PIN")
        proc.type(pin)
    return proc.wait()


def set_pin(pin: str, old: str | None = None) -> int:
    proc = PtyRgt("approve", "--set-pin")
    if old is not None:
        proc.expect("Current approval PIN")
        proc.type(old)
    type_new_pin(proc, pin)
    return proc.wait()


def type_new_pin(proc: PtyRgt, pin: str, again: str | None = None) -> None:
    """Answer the two prompts that set a PIN (``again``: a different second answer)."""
    proc.expect("New approval PIN")
    proc.type(pin)
    proc.expect("again")
    proc.type(pin if again is None else again)
