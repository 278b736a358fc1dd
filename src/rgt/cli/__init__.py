"""The ``rgt`` command line: thin over the library.

``main`` runs every call through the click application in ``rgt.cli.app``, whose ``run`` is the
only place that catches exceptions (an ``RgtError`` becomes its message, the fix and an exit code;
``RGT_DEBUG=1`` shows tracebacks). The one exception is the calls a person types to see what rgt
is: ``rgt --help``, ``rgt -h``, ``rgt`` alone and ``rgt --version``. Importing click alone takes
several times a bare interpreter's start-up, so these print a copy of click's own rendering
(``rgt.cli._help``, written by ``tools/render_help.py``; tests/cli/test_fast_help.py fails when
it is stale) with click's streams and exit codes, and only where click would wrap the text the
same way: a terminal (or ``COLUMNS``) of at least 80 columns, a UTF-8 stream, and no shell
completion or debug request. Command modules must not import torch, numpy or any other heavy
package at module level (a test checks ``rgt --help`` in a fresh interpreter).

This module imports nothing beyond what a bare interpreter has loaded; the names that lived here
(``cli``, ``load_all``, ``COMMANDS``, …) are ``rgt.cli.app``'s, reached through ``__getattr__``.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # mypy reads the block below; at run time typing is not imported
if TYPE_CHECKING:
    from typing import TextIO

    from rgt.cli.app import COMMAND_MODULES as COMMAND_MODULES
    from rgt.cli.app import COMMANDS as COMMANDS
    from rgt.cli.app import DEBUG_ENV as DEBUG_ENV
    from rgt.cli.app import LazyGroup as LazyGroup
    from rgt.cli.app import cli as cli
    from rgt.cli.app import load_all as load_all

_APP_NAMES = frozenset(("COMMAND_MODULES", "COMMANDS", "DEBUG_ENV", "LazyGroup", "cli", "load_all"))

# click wraps help at min(terminal columns, 80) - 2: the copy is its rendering at 80 or more.
MIN_COLUMNS = 80


# True when ``main`` runs as the program itself (``rgt``, ``python -m rgt.cli``), not called
# in-process with arguments (tests): a command may then leave without the interpreter's teardown.
PROGRAM = False


def main(argv: list[str] | None = None) -> None:
    """``rgt ARGS…``: print and exit (never returns)."""
    global PROGRAM
    PROGRAM = argv is None
    args = list(sys.argv[1:] if argv is None else argv)
    _answer_without_click(args)
    if args[:1] == ["lint"] and "--json" in args:  # an agent's lint, on every edit
        from rgt.cli._lint_json import answer

        answer(args[1:])  # returns only where click must answer
    from rgt.cli.app import run

    run(args)


def _answer_without_click(args: list[str]) -> None:
    """Exit with click's output and code for ``--help``/``-h``/``--version``/no arguments, or
    return (doing nothing) where click might print something else."""
    if args not in ([], ["--help"], ["-h"], ["--version"]) or not _plain_call():
        return
    if args == ["--version"]:
        from rgt import __version__

        _write(sys.stdout, f"rgt, version {__version__}\n", 0)
    if _terminal_columns() < MIN_COLUMNS:
        return  # click wraps the help narrower than the copy
    from rgt.cli._help import HELP

    if args:
        _write(sys.stdout, HELP + "\n", 0)
    # A group called without a command is a usage error in click: rgt.cli.app.run prints it so.
    _write(sys.stderr, f"error: {HELP}\n", 2)


def _plain_call() -> bool:
    """No shell completion, no debug log, UTF-8 streams: click would print the same text."""
    env = os.environ
    if env.get("_RGT_COMPLETE") or env.get("RGT_DEBUG") == "1":
        return False  # shell completion answers instead of help; debug logging starts first
    streams = (sys.stdout, sys.stderr)
    # With another encoding click may re-encode (the help holds a "→").
    return all(s is not None and s.encoding.lower().replace("-", "") == "utf8" for s in streams)


def _terminal_columns() -> int:
    """``shutil.get_terminal_size().columns``, as click asks it (without importing shutil):
    ``COLUMNS`` when it is a positive number, else the width of stdout's terminal, else 80."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns > 0:
        return columns
    stream = sys.__stdout__
    if stream is None:
        return 80
    try:
        return os.get_terminal_size(stream.fileno()).columns or 80
    except (ValueError, OSError):
        return 80


def _write(stream: TextIO, text: str, code: int) -> None:
    stream.write(text)
    sys.exit(code)


def __getattr__(name: str) -> object:
    """``from rgt.cli import cli`` and the other names of ``rgt.cli.app`` (PEP 562)."""
    if name not in _APP_NAMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from rgt.cli import app

    return getattr(app, name)
