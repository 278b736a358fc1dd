"""The click application behind ``rgt``: the lazy command group and the error translation.

``run`` is the only place that catches exceptions: an ``RgtError`` becomes its message, the fix
and an exit code (0 ok, 1 failed, 2 usage or bad input, 3 refused by a gate); anything else is a
bug and says so. ``RGT_DEBUG=1`` shows tracebacks and, like ``rgt -v``, logs every
ssh/rsync/sbatch argv with its duration on stderr (``rgt._log``). ``rgt.cli.main`` answers
``rgt --help``/``--version`` from a copy of this group's rendering without importing click
(``rgt.cli._help``), and calls ``run`` for everything else.
"""

from __future__ import annotations

import importlib
import json
import os
import sys

import click

from rgt import __version__
from rgt.errors import RgtError

DEBUG_ENV = "RGT_DEBUG"  # rgt._log's (logging is loaded only when it is wanted)

# Each module defines ``register(group)``; here each top-level command names its module, so a
# call imports only its own (`rgt lint` never loads the vendors', the dashboard's or the state
# store's code). tests/cli/test_basics.py checks this map against what the modules register.
COMMANDS = {
    **dict.fromkeys(("up", "approve", "down"), "rgt.cli.machines"),
    **dict.fromkeys(("run", "status", "logs", "cancel", "pull", "resume"), "rgt.cli.jobs"),
    **dict.fromkeys(("smoke", "demo"), "rgt.cli.demo"),
    "verify": "rgt.cli.verify",
    "deliver": "rgt.cli.deliver",
    "triage": "rgt.cli.triage",
    "profiles": "rgt.cli.profiles",
    **dict.fromkeys(("push", "trust"), "rgt.cli.push"),
    **dict.fromkeys(("watch", "audit", "reap"), "rgt.cli.watch"),
    "sweep": "rgt.cli.sweep",
    "ckpt": "rgt.cli.ckpt",
    **dict.fromkeys(("offers", "machines", "vendors"), "rgt.cli.vendors"),
    "adopt": "rgt.cli.adopt",
    "lint": "rgt.cli.lint",
    "explain": "rgt.cli.explain",
    "mcp": "rgt.cli.mcp",  # starts the agent front end (rgt.mcp), which never imports the CLI
    "skill": "rgt.cli.skill",
    "ui": "rgt.cli.ui",  # starts the dashboard (rgt.ui), which never imports the CLI either
    "fetch": "rgt.cli.fetch",
}
COMMAND_MODULES = tuple(dict.fromkeys(COMMANDS.values()))


class LazyGroup(click.Group):
    """Imports a command's module (its ``register``) when the command is first asked for."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *COMMANDS})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in COMMANDS:
            importlib.import_module(COMMANDS[cmd_name]).register(self)
        return self.commands.get(cmd_name)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
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
        _enable_debug()


def load_all() -> click.Group:
    """``cli`` with every command registered (what ``rgt --help`` lists)."""
    for name in COMMANDS:
        cli.get_command(click.Context(cli), name)
    return cli


def _wants_json(argv: list[str]) -> bool:
    return "--json" in argv


def run(args: list[str]) -> None:
    """Run ``rgt ARGS…`` through click and exit with its code (never returns)."""
    debug = os.environ.get(DEBUG_ENV) == "1"
    if debug:
        _enable_debug()
    try:
        cli.main(args=args, prog_name="rgt", standalone_mode=False)
    except RgtError as exc:
        if debug:
            _print_traceback()
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
            _print_traceback()
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


def _enable_debug() -> None:
    from rgt._log import enable_debug

    enable_debug()


def _print_traceback() -> None:
    import traceback

    traceback.print_exc()


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
