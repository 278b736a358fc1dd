"""`rgt run NAME [OPTIONS] -- COMMAND…`: the command's own options only after ``--``.

``rgt run box python a.py --env X=1 --retries 0`` looks like a command with options, but click
reads ``--env`` and ``--retries`` as rgt's own (options may follow positionals), so the job would
silently run with rgt's flags taken from it. ``RunCommand`` keeps the raw arguments, and
``check_separator`` refuses any option that follows the command's first word before a ``--``:
rgt's options go between NAME and ``--``, the command's after it. ``env_pairs_of`` reads the
``--env NAME=VALUE`` options.
"""

from __future__ import annotations

import click

from rgt.errors import UsageError

ARGV_KEY = "rgt.run.argv"


class RunCommand(click.Command):
    """A click command that remembers the arguments it was given, before parsing."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        ctx.meta[ARGV_KEY] = list(args)
        return super().parse_args(ctx, args)


def check_separator(ctx: click.Context) -> None:
    """Raise ``UsageError`` when an option follows the command's first word without ``--``."""
    raw: list[str] = ctx.meta.get(ARGV_KEY, [])
    takes_value = _value_options(ctx.command)
    positionals: list[int] = []  # where NAME and the command's words are
    skip = False
    for index, token in enumerate(raw):
        if skip:
            skip = False
            continue
        if token == "--":
            return
        if token.startswith("-") and token != "-":
            if len(positionals) >= 2:
                _refuse(raw, positionals[1], index)
            skip = token in takes_value
            continue
        positionals.append(index)


def _value_options(command: click.Command) -> set[str]:
    names: set[str] = set()
    for param in command.params:
        if isinstance(param, click.Option) and not param.is_flag and not param.count:
            names.update(param.opts + param.secondary_opts)
    return names


def _refuse(raw: list[str], start: int, index: int) -> None:
    command = " ".join(raw[start:index])
    raise UsageError(
        f"option {raw[index]!r} follows the command {command!r} without `--`: rgt would read "
        "it as its own option instead of passing it to the job",
        fix="put rgt's options before `--` and the command with its own options after it: "
        "rgt run NAME [rgt options] -- python train.py --lr 3e-4",
    )


def env_pairs_of(pairs: tuple[str, ...]) -> dict[str, str]:
    """``--env NAME=VALUE`` options as a mapping; anything else is a usage error."""
    env = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise UsageError(f"--env {pair!r} is not NAME=VALUE")
        env[name] = value
    return env
