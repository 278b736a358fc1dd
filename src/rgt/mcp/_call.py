"""Run a tool as the library call its ``rgt`` command makes, and answer as that command would.

A tool calls the same library function as the CLI body of its command (``rgt.verbs`` and
below), never the click app. What the client sees stays what ``rgt … --json`` prints: the
document goes through the same JSON round trip (``default=str``: paths and times as text), an
``RgtError`` becomes the ``{"error", "message", "fix", "exit_code"}`` object ``main`` prints, a
bug becomes ``InternalError``, a result the command exits 1 on comes back as an error whose text
is the document. The command line a human would type is kept for "see more" (``bounded``).
Calls run one at a time, as the click path's did: a tool's thread holds the lock for its call.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from rgt.errors import RgtError
from rgt.mcp._invoke import ONE_AT_A_TIME, CommandFailed, internal, remember


@contextmanager
def as_command(
    words: Sequence[str], positionals: Iterable[str] = (), **options: object
) -> Iterator[None]:
    """The body runs as ``rgt WORDS --json [--option value…] -- POSITIONALS…`` would:
    that command line is remembered, and its failures read as that command's."""
    remember(words, positionals, options)
    with ONE_AT_A_TIME:
        try:
            yield
        except RgtError as exc:
            raise CommandFailed({**exc.to_dict(), "exit_code": exc.exit_code}) from None
        except CommandFailed:
            raise
        except Exception as exc:  # a bug in rgt: said as `main` says it, never a traceback
            raise CommandFailed(internal(exc)) from None


def document(data: Any, exit_code: int = 0) -> dict[str, Any]:
    """``data`` as ``--json`` prints it and the client reads it back; a non-zero
    ``exit_code`` (the command's exit status) makes it a ``CommandFailed``."""
    parsed = json.loads(json.dumps(data, sort_keys=True, default=str))
    shown = parsed if isinstance(parsed, dict) else {"items": parsed}
    if exit_code:
        raise CommandFailed({**shown, "exit_code": exit_code})
    return shown
