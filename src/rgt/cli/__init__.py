"""The ``rgt`` command line: thin over the library.

``main`` is the only place that catches exceptions: an ``RgtError`` becomes its message, the fix
and an exit code (0 ok, 1 failed, 2 usage or bad input, 3 refused by a gate); anything else is a
bug and says so. ``RGT_DEBUG=1`` shows tracebacks and, like ``rgt -v``, logs every
ssh/rsync/sbatch argv with its duration on stderr (``rgt._log``). Command modules must not
import torch, numpy or any other heavy package at module level (a test checks ``rgt --help`` in
a fresh interpreter).
"""

from __future__ import annotations

import importlib
import json
import sys
import traceback

import click

from rgt import __version__
from rgt._log import debug_wanted, enable_debug
from rgt.errors import RgtError

# Each module defines ``register(group)``. Add one line per noun group.
COMMAND_MODULES = (
    "rgt.cli.machines",
    "rgt.cli.jobs",
    "rgt.cli.demo",
    "rgt.cli.verify",
    "rgt.cli.deliver",
    "rgt.cli.triage",
    "rgt.cli.profiles",
    "rgt.cli.push",
    "rgt.cli.watch",
    "rgt.cli.sweep",
    "rgt.cli.ckpt",
    "rgt.cli.vendors",
    "rgt.cli.adopt",
    "rgt.cli.lint",
    "rgt.mcp.command",  # the agent front end sits above the CLI: loaded by name
    "rgt.mcp.skill_command",
    "rgt.ui.command",  # the dashboard, like mcp, sits above the CLI
    "rgt.cli.fetch",
)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="rgt")
@click.option(
    "-v",
    "--verbose",
    is_flag=True,
    help="Log every ssh/rsync/sbatch command and its duration on stderr (as RGT_DEBUG=1).",
)
def cli(verbose: bool) -> None:
    """rgt: run, verify and deliver deep-learning experiments on rented GPU machines."""
    if verbose:
        enable_debug()


for _name in COMMAND_MODULES:
    importlib.import_module(_name).register(cli)


def _wants_json(argv: list[str]) -> bool:
    return "--json" in argv


def main(argv: list[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    debug = debug_wanted()
    if debug:
        enable_debug()
    try:
        cli.main(args=args, prog_name="rgt", standalone_mode=False)
    except RgtError as exc:
        if debug:
            traceback.print_exc()
        _report(exc.to_dict(), exc.exit_code, args)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(1)
    except click.ClickException as exc:
        _report({"error": "UsageError", "message": exc.format_message()}, 2, args)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        sys.exit(130)
    except Exception as exc:  # a bug in rgt: say so, keep the traceback one env var away
        if debug:
            traceback.print_exc()
        _report(
            {
                "error": "InternalError",
                "message": f"{type(exc).__name__}: {exc}",
                "fix": "re-run with RGT_DEBUG=1 and report the traceback",
            },
            1,
            args,
        )
    sys.exit(0)


def _report(data: dict[str, object], code: int, args: list[str]) -> None:
    if _wants_json(args):
        data["exit_code"] = code
        sys.stdout.write(json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")
    click.echo(f"error: {data['message']}", err=True)
    reasons = data.get("reasons")
    if isinstance(reasons, list):
        for reason in reasons:
            click.echo(f"  - {reason}", err=True)
    if data.get("fix"):
        click.echo(f"fix: {data['fix']}", err=True)
    sys.exit(code)
