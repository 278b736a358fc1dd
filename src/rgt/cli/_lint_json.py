"""`rgt lint PATH... --json` answered without click: what an agent runs on every edit.

Importing click and the command group costs ~12 ms of a lint's start (a fifth of its fixed
cost), and a ``--json`` lint needs none of it: its arguments are paths and four options. So
``rgt.cli.main`` hands a call that names ``lint`` and ``--json`` here first; a plain call
(paths, ``--select``/``--ignore`` with a value, ``--no-cache``, ``--json``, nothing else) is
answered here with the document and exit code of ``rgt.cli.lint``, which shares this module's
``document`` and ``leave``. Anything else (``--help``, an unknown or misspelled option, ``--``,
no path, ``RGT_DEBUG``, shell completion) returns at once and click answers, as before; so does
a lint that raises (a bad code, a missing path: click's run reports it, in its words and exit
code, with the lint done again, which stops where it stopped here, before any file is read).
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

TYPE_CHECKING = False
if TYPE_CHECKING:
    from rgt.lint import LintReport

VALUED = ("--select", "--ignore")


def answer(args: list[str]) -> None:
    """Lint as ``rgt lint ARGS`` (``args``: after ``lint``) would, print its JSON document
    and exit (never returns); or return, doing nothing, where click must answer."""
    plain = _plain(args)
    if plain is None or os.environ.get("RGT_DEBUG") == "1" or os.environ.get("_RGT_COMPLETE"):
        return
    paths, select, ignore, cache = plain
    from rgt.lint import lint_paths

    try:
        report = lint_paths(paths, select, ignore, cache=cache)
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")  # as rgt.cli.app.run says it
        sys.exit(130)
    except Exception:  # an error to report (or a bug): in click's words, from click's run
        return
    sys.stdout.write(json.dumps(document(report), sort_keys=True, default=str, indent=2) + "\n")
    sys.stdout.flush()
    leave(report.exit_code)
    sys.exit(report.exit_code)


def _plain(args: list[str]) -> tuple[list[str], list[str], list[str], bool] | None:
    """(paths, selected, ignored, cache) of a call click would parse the same way, with
    ``--json``; None for any other."""
    paths: list[str] = []
    chosen: dict[str, list[str]] = {"--select": [], "--ignore": []}
    cache, json_mode = True, False
    tokens = iter(args)
    for token in tokens:
        name, equals, value = token.partition("=")
        if token == "--json":
            json_mode = True
        elif token == "--no-cache":
            cache = False
        elif name in VALUED and equals:
            chosen[name].append(value)
        elif token in VALUED:
            value = next(tokens, "-")
            if value.startswith("-"):
                return None  # click would take it as the value, or say it is missing
            chosen[token].append(value)
        elif token.startswith("-"):
            return None  # --help, a typo, "--", "-": click's to answer
        else:
            paths.append(token)
    if not (json_mode and paths):
        return None
    return paths, chosen["--select"], chosen["--ignore"], cache


def document(report: LintReport) -> dict[str, Any]:
    """The report's JSON document, each finding with the command that explains it."""
    data = report.to_json()
    for finding in data["findings"]:  # per printed finding, never per file: lint stays fast
        finding["explain"] = f"rgt explain {finding['code']}"
    return data


def leave(code: int) -> None:
    """Exit with ``code``; as the program (``rgt.cli.PROGRAM``), at once when the output is
    flushed: the interpreter's teardown (a last garbage collection over every object, every
    module freed) costs ~10 ms, and lint leaves no file open, thread or exit handler behind.
    In-process (tests), returns for 0, as a command that returns does."""
    import rgt.cli

    if rgt.cli.PROGRAM:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except (OSError, ValueError):
            pass  # a closed pipe: the interpreter's own exit says so, as before
        else:
            os._exit(code)
    if code:
        sys.exit(code)
