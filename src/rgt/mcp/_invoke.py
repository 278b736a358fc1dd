"""Run one ``rgt … --json`` command in this process and hand back the document it prints: the
path of the tools not yet moved onto the library (``_call``), which only shrinks.

Still here: ``up`` (its registration and renting are still built in its CLI body). It
builds the argv a human would type and runs the real click command here, so its output is byte
for byte the ``--json`` document and its error the same ``{"error", "message", "fix",
"exit_code"}`` object ``main`` prints. Only one command runs at a time (stdout is redirected for
the whole process while it does); the stdio transport (``wire``) writes to its own copy of the
protocol descriptor, and it has already pointed fd 1 at stderr, so nothing a child process
prints can reach the wire.
"""

from __future__ import annotations

import io
import json
import shlex
import threading
from collections.abc import Iterable, Sequence
from contextlib import redirect_stderr, redirect_stdout
from typing import Any

from rgt.errors import RgtError

# One command at a time, on the click path and the library path (``_call``) alike; re-entrant,
# as a tool (``logs``) may call another (``triage``) on its own thread.
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


def invoke(
    words: Sequence[str], positionals: Iterable[str] = (), **options: object
) -> dict[str, Any]:
    """``rgt WORDS --json [--option value…] -- POSITIONALS…``: its JSON document, or
    ``CommandFailed``. ``options`` use the flag's name with ``_`` for ``-``; ``True`` is a bare
    flag, ``None``/``False`` leave it out, a list or tuple repeats it."""
    argv = remember(words, positionals, options)
    stdout, code, error = _run(argv)
    if error is not None:
        raise CommandFailed(error)
    document = _document(stdout)
    if code:
        raise CommandFailed({**document, "exit_code": code})
    return document


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


def _run(argv: list[str]) -> tuple[str, int, dict[str, Any] | None]:
    """The command's stdout, its exit status, and its error document when it raised."""
    import click  # only the tools still on the click path load it

    from rgt.cli import cli

    out = io.StringIO()
    code, error = 0, None
    with ONE_AT_A_TIME, redirect_stdout(out), redirect_stderr(io.StringIO()):
        try:
            cli.main(args=argv, prog_name="rgt", standalone_mode=False)
        except RgtError as exc:
            error = {**exc.to_dict(), "exit_code": exc.exit_code}
        except click.ClickException as exc:
            error = {"error": "UsageError", "message": exc.format_message(), "exit_code": 2}
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        except Exception as exc:  # a bug in rgt: said as `main` says it, never a traceback
            error = internal(exc)
    return out.getvalue(), code, error


def internal(exc: Exception) -> dict[str, Any]:
    """A bug in rgt, said as ``main`` says it: never a traceback."""
    return {
        "error": "InternalError",
        "message": f"{type(exc).__name__}: {exc}",
        "fix": "re-run the command with RGT_DEBUG=1 in a terminal and report the traceback",
        "exit_code": 1,
    }


def _document(stdout: str) -> dict[str, Any]:
    text = stdout.strip()
    if not text:
        return {}
    data = json.loads(text)
    return data if isinstance(data, dict) else {"items": data}
