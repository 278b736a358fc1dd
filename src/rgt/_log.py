"""Logging for the operator: every ssh/rsync/sbatch command rgt runs, with its duration.

One logger tree, ``rgt.*`` (``rgt.transport.ssh``, ``rgt.transport.rsync``, ...), through the
standard ``logging`` module. rgt installs no handler as a library; the CLI adds one, on stderr
only, when ``RGT_DEBUG=1`` or ``rgt -v`` asks for it, so ``--json`` keeps stdout to its one
document. A program that imports rgt configures ``logging`` as it likes.

What is logged is the argv, never stdin (where secrets travel) and never output. Each word is
redacted first: the values of secrets this process knows (those ``rgt run --secret`` sends, and
any environment variable whose name says it is one: ``*TOKEN*``, ``*SECRET*``, ``*PASSWORD*``,
``*API_KEY*``, ...), ``NAME=value`` where NAME says secret, the value after ``--token``,
``--password``, ``--api-key``-like flags, a password in a URL, and a bearer token.
"""

from __future__ import annotations

import logging
import os
import re
import shlex
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from types import TracebackType

ROOT = "rgt"
DEBUG_ENV = "RGT_DEBUG"
MASK = "[redacted]"
_SECRET_WORD = r"(?:TOKEN|SECRET|PASSWORD|PASSWD|API_?KEY|ACCESS_?KEY|PRIVATE_?KEY|CREDENTIALS?)"
# Environment names are upper case; ssh's CamelCase options (PasswordAuthentication=no) are not.
_SECRET_NAME = re.compile(rf"[A-Z0-9_]*{_SECRET_WORD}[A-Z0-9_]*")
_ASSIGNMENT = re.compile(rf"\b([A-Z0-9_]*{_SECRET_WORD}[A-Z0-9_]*=)([^\s'\"]+)")
_FLAG = re.compile(r"--?[a-z0-9-]*(?:token|secret|password|passwd|api-?key|access-?key)[a-z0-9-]*")
_FLAG_VALUE = re.compile(rf"({_FLAG.pattern}=)([^\s'\"]+)", re.IGNORECASE)
_FLAG_SPACE = re.compile(rf"({_FLAG.pattern}\s+)([^\s'\"]+)", re.IGNORECASE)
_URL_PASSWORD = re.compile(r"(://[^/\s:@]+:)[^@\s/]+@")
_BEARER = re.compile(r"(\bbearer\s+)[^\s'\"]+", re.IGNORECASE)
_MIN_SECRET = 6  # shorter environment values ("1", "yes") are not worth masking everywhere
_known: set[str] = set()


def register_secrets(values: Iterable[str]) -> None:
    """Values that must never appear in a log line (the secrets ``rgt run`` sends on stdin)."""
    _known.update(v for v in values if v)


def _secret_values() -> list[str]:
    from_env = (v for k, v in os.environ.items() if _SECRET_NAME.fullmatch(k))
    found = {*_known, *(v for v in from_env if len(v) >= _MIN_SECRET)}
    return sorted(found, key=len, reverse=True)


def redact_argv(argv: Sequence[str]) -> list[str]:
    """``argv`` with every secret replaced by ``[redacted]`` (see the module docstring)."""
    values = _secret_values()
    words, after_flag = [], False
    for word in argv:
        words.append(MASK if after_flag else _redact_word(word, values))
        after_flag = bool(_FLAG.fullmatch(word))
    return words


def _redact_word(word: str, values: list[str]) -> str:
    for value in values:
        # inside ssh's remote command a word is shlex-quoted: a quote in it is spelled '"'"'
        for spelling in {value, value.replace("'", "'\"'\"'")}:
            word = word.replace(spelling, MASK)
    word = _ASSIGNMENT.sub(rf"\1{MASK}", word)
    word = _FLAG_VALUE.sub(rf"\1{MASK}", word)
    word = _FLAG_SPACE.sub(rf"\1{MASK}", word)
    word = _URL_PASSWORD.sub(rf"\1{MASK}@", word)
    return _BEARER.sub(rf"\1{MASK}", word)


class CommandLog:
    """``with CommandLog(log, "ssh", argv) as cmd: ...; cmd.returncode = proc.returncode``
    logs one DEBUG line when the block ends: the tool, how long it took, how it ended, and the
    redacted argv. Costs one clock read when DEBUG is off."""

    def __init__(self, logger: logging.Logger, tool: str, argv: Sequence[str]) -> None:
        self.logger, self.tool, self.argv = logger, tool, argv
        self.returncode: int | None = None
        self.started = 0.0

    def __enter__(self) -> CommandLog:
        self.started = time.monotonic()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if not self.logger.isEnabledFor(logging.DEBUG):
            return
        seconds = time.monotonic() - self.started
        ended = f"exit {self.returncode}" if kind is None else f"failed: {kind.__name__}"
        line = shlex.join(redact_argv([str(word) for word in self.argv]))
        self.logger.debug("%s %.3f s %s: %s", self.tool, seconds, ended, line)


class _StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to whatever ``sys.stderr`` is at the time (a test runner may swap it)."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property  # type: ignore[override]
    def stream(self) -> object:
        return sys.stderr

    @stream.setter
    def stream(self, value: object) -> None:
        pass


def debug_wanted(environ: Mapping[str, str] | None = None) -> bool:
    return (os.environ if environ is None else environ).get(DEBUG_ENV) == "1"


def enable_debug() -> None:
    """Show the ``rgt.*`` DEBUG lines on stderr (idempotent; never on stdout)."""
    root = logging.getLogger(ROOT)
    root.setLevel(logging.DEBUG)
    if not any(isinstance(h, _StderrHandler) for h in root.handlers):
        handler = _StderrHandler()
        handler.setFormatter(logging.Formatter("rgt %(asctime)s %(name)s: %(message)s"))
        root.addHandler(handler)
