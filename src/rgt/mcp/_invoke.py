"""What every tool call shares: the command line it stands for, one call at a time, and the
error object a failure answers with.

Every tool is the library call its ``rgt`` command's body makes (``_call``); none runs the
click app. What stays here is what the command line meant: the argv a human would type
(``remember``, shown for "see more"), ``CommandFailed`` carrying the same ``{"error",
"message", "fix", "exit_code"}`` object ``main`` prints, and ``internal`` for a bug. Only one
call runs at a time; the stdio transport (``wire``) writes to its own copy of the protocol
descriptor and has pointed fd 1 at stderr, so nothing a call prints can reach the wire.
"""

from __future__ import annotations

import json
import shlex
import threading
from collections.abc import Iterable, Sequence
from typing import Any

# One call at a time (``_call``); re-entrant, as a tool (``logs``) may call another
# (``triage``) on its own thread.
ONE_AT_A_TIME = threading.RLock()
_LAST = threading.local()  # each tool call runs on its own thread (protocol.Session)


class CommandFailed(Exception):
    """The command exited non-zero; ``document`` is what ``--json`` printed (or the error).
    The client sees ``isError`` and the document as the text: the same ``fix`` as a human."""

    def __init__(self, document: dict[str, Any]) -> None:
        super().__init__(json.dumps(document, sort_keys=True, default=str))
        self.document = document

    @property
    def exit_code(self) -> int:
        return int(self.document.get("exit_code", 1))


def remember(
    words: Sequence[str], positionals: Iterable[str], options: dict[str, object]
) -> list[str]:
    """Keep ``rgt WORDS --json [--option value…] -- POSITIONALS…`` as this thread's last
    command (``last_command``), and return its argv."""
    argv = [*words, "--json", *_flags(options), "--", *positionals]
    _LAST.argv = argv
    return argv


def last_command() -> str | None:
    """The `rgt …` command line this thread's tool call ran last (for "see more"), or None."""
    argv = getattr(_LAST, "argv", None)
    return None if argv is None else shlex.join(["rgt", *argv])


def forget() -> None:
    _LAST.argv = None


def _flags(options: dict[str, object]) -> list[str]:
    argv: list[str] = []
    for name, value in options.items():
        flag = "--" + name.replace("_", "-")
        if value is None or value is False:
            continue
        if value is True:
            argv.append(flag)
        elif isinstance(value, (list, tuple)):
            for item in value:
                argv += [flag, str(item)]
        else:
            argv += [flag, str(value)]
    return argv


def internal(exc: Exception) -> dict[str, Any]:
    """A bug in rgt, said as ``main`` says it: never a traceback."""
    return {
        "error": "InternalError",
        "message": f"{type(exc).__name__}: {exc}",
        "fix": "re-run the command with RGT_DEBUG=1 in a terminal and report the traceback",
        "exit_code": 1,
    }
