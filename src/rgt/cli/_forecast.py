"""`rgt run … --dry-run`: what would start, where, its expected cost; nothing starts."""

from __future__ import annotations

from typing import Any

import click

from rgt.cli._output import Output, escape


def dry_run_option(func: Any) -> Any:
    return click.option(
        "--dry-run",
        is_flag=True,
        help="Start nothing: say what would start, where, and the expected duration and cost "
        "(p50/p90 of this command's earlier runs on this machine type, or 'no history').",
    )(func)


def show(out: Output, machine: str, command: tuple[str, ...], resources: Any) -> None:
    from rgt.autostop.forecast import forecast, lines
    from rgt.cli._autostop import ledger_money
    from rgt.state.store import Store

    store = Store.open()
    wanted = resources.to_json() if resources is not None else None
    price = ledger_money(store, machine)["price_per_hour"]
    result = forecast(store, machine, tuple(command), wanted, price)

    def human(o: Output) -> None:
        for line in lines(result):
            o.line(escape(line))

    out.result(result.to_json(), human)
