"""`rgt run … --dry-run`: what would start, where, its expected cost; nothing starts."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from rgt.cli._output import Output, escape

if TYPE_CHECKING:
    from rgt.autostop.forecast import Forecast


def dry_run_option(func: Any) -> Any:
    return click.option(
        "--dry-run",
        is_flag=True,
        help="Start nothing: say what would start, where, and the expected duration and cost "
        "(p50/p90 of this command's earlier runs on this machine type, or 'no history').",
    )(func)


def show(out: Output, result: Forecast) -> None:
    """Print ``rgt.verbs.run.forecast``'s answer."""
    from rgt.autostop.forecast import lines

    def human(o: Output) -> None:
        for line in lines(result):
            o.line(escape(line))

    out.result(result.to_json(), human)
