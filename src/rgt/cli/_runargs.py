"""`rgt run NAME [OPTIONS] -- COMMAND…`: the command's own options only after ``--``.

``rgt run box python a.py --env X=1 --retries 0`` looks like a command with options, but click
reads ``--env`` and ``--retries`` as rgt's own (options may follow positionals), so the job would
silently run with rgt's flags taken from it. ``RunCommand`` keeps the raw arguments, and
``check_separator`` refuses any option that follows the command's first word before a ``--``:
rgt's options go between NAME and ``--``, the command's after it (``rgt.verbs.run.env_of``
reads the ``--env NAME=VALUE`` options). ``resource_options`` adds rgt's one resource vocabulary
(``--gpus --cpus --mem --time --partition --account --qos --nodes``) to ``rgt run`` and, as a
machine's defaults, to ``rgt up``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

import click

from rgt.errors import UsageError
from rgt.resources import Resources

F = TypeVar("F", bound=Callable[..., Any])
# option -> (Resources key, click type, metavar, help)
RESOURCE_OPTIONS: dict[str, tuple[str, Any, str, str]] = {
    "--gpus": ("gpus", str, "[TYPE:]N", "GPUs per node; 0: none (CUDA_VISIBLE_DEVICES='')."),
    "--cpus": ("cpus", int, "N", "CPU cores (Slurm --cpus-per-task, a Kubernetes request)."),
    "--mem": ("mem_gb", float, "GB", "Memory in GiB (Slurm --mem, a Kubernetes request)."),
    "--time": ("timeout_min", int, "MIN", "Time limit (Slurm --time, k8s deadline)."),
    "--partition": ("partition", str, "P", "Slurm partition."),
    "--account": ("account", str, "A", "Slurm account."),
    "--qos": ("qos", str, "Q", "Slurm QOS."),
    "--nodes": ("nodes", int, "N", "Nodes (ssh/local: `rgt run A,B` is one node per machine)."),
}


def resource_options(prefix: str = "") -> Callable[[F], F]:
    """The resource options, handed over as one ``resources`` value: a ``Resources`` with
    what was given, or None when none was. ``prefix`` starts each help line."""

    def decorate(func: F) -> F:
        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            given = {spec[0]: kwargs.pop(spec[0]) for spec in RESOURCE_OPTIONS.values()}
            kwargs["resources"] = resources_of(given)
            return func(*args, **kwargs)

        for option, (key, kind, metavar, text) in reversed(RESOURCE_OPTIONS.items()):
            add = click.option(option, key, type=kind, metavar=metavar, help=prefix + text)
            wrapper = add(wrapper)
        return wrapper  # type: ignore[return-value]

    return decorate


def resources_of(given: dict[str, Any]) -> Resources | None:
    """The options given, checked (``Resources`` says what is wrong); None when none was."""
    chosen = {key: value for key, value in given.items() if value is not None}
    return Resources.from_mapping(chosen) if chosen else None


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
