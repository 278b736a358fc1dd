"""The controlling terminal: where a human answers approval prompts.

Every prompt of an approval is written to and read from ``/dev/tty``, never from stdin, argv or
the environment: a pipe into rgt cannot answer it. A process that runs rgt inside a
pseudo-terminal it drives (``script``, ``expect``, python's ``pty``) *does* own that terminal and
can answer anything asked there; only a secret the human keeps (the approval PIN) stops it.
"""

from __future__ import annotations

import os
import sys
import termios
from types import TracebackType

from rgt.errors import GateRefused

MAX_ANSWER = 1024  # bytes; a line longer than this is not a name or a PIN


class Terminal:
    """An open controlling terminal; use as a context manager."""

    def __init__(self, fd: int, name: str) -> None:
        self.fd = fd
        self.name = name

    @classmethod
    def open(cls, why: str, fix: str) -> Terminal:
        """The controlling terminal, or ``GateRefused`` when there is none (a pipe, a daemon,
        a detached process) or when stdin is not a terminal (rgt was started by a program)."""
        if not _stdin_is_tty():
            raise GateRefused(why, ["stdin is not a terminal"], fix=fix)
        try:
            fd = os.open("/dev/tty", os.O_RDWR | os.O_NOCTTY)
        except OSError as exc:
            raise GateRefused(why, [f"no controlling terminal ({exc.strerror})"], fix=fix) from exc
        try:
            name = os.ttyname(fd)
        except OSError:
            name = "/dev/tty"
        return cls(fd, name)

    def __enter__(self) -> Terminal:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        os.close(self.fd)

    def say(self, text: str) -> None:
        os.write(self.fd, text.encode("utf-8", "replace"))

    def ask(self, prompt: str, *, echo: bool = True) -> str:
        """One line typed at the terminal; with ``echo=False`` nothing typed is shown."""
        if echo:
            self.say(prompt)
            return self._read_line()
        old = termios.tcgetattr(self.fd)
        quiet = list(old)
        quiet[3] &= ~termios.ECHO  # lflags
        # Echo goes off before the prompt shows, and what was typed before it is discarded.
        termios.tcsetattr(self.fd, termios.TCSAFLUSH, quiet)
        try:
            self.say(prompt)
            return self._read_line()
        finally:
            termios.tcsetattr(self.fd, termios.TCSADRAIN, old)
            self.say("\n")

    def _read_line(self) -> str:
        data = b""
        while not data.endswith(b"\n") and len(data) < MAX_ANSWER:
            chunk = os.read(self.fd, 1)
            if not chunk:  # the terminal hung up
                break
            data += chunk
        return data.decode("utf-8", "replace").rstrip("\r\n")


def _stdin_is_tty() -> bool:
    try:
        return sys.stdin is not None and sys.stdin.isatty()
    except (OSError, ValueError):
        return False
