"""The autostop options of `rgt approve` and `rgt up`, and their output (README: Autostop)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

import click

from rgt.cli._output import Output, escape

F = TypeVar("F", bound=Callable[..., Any])
_KEYS = ("autostop", "idle", "after_jobs", "at", "budget", "on_preempt", "notify_source")


def autostop_options(func: F) -> F:
    """`rgt approve NAME --autostop [--idle 30m] [--after-jobs] [--at TIME] [--budget AMOUNT]
    [--on-preempt CMD] [--notify SOURCE]` or `--autostop off`, handed over as ``autostop``
    (None when --autostop was not given)."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        given = {key: kwargs.pop(key) for key in _KEYS}
        if not given["autostop"]:
            _unused(given)
        kwargs["autostop"] = given if given["autostop"] else None
        return func(*args, **kwargs)

    for option in (
        click.option("--notify", "notify_source", metavar="SOURCE", help=_NOTIFY),
        click.option(
            "--on-preempt",
            metavar="CMD",
            help="autostop: run CMD on a preemption "
            "notice (after the jobs were asked to checkpoint).",
        ),
        click.option(
            "--budget",
            metavar="AMOUNT",
            help="autostop: spend cap in the machine's "
            "currency (20, 20USD, 150CNY): checkpoint, then stop.",
        ),
        click.option(
            "--at",
            metavar="TIME",
            help="autostop: stop at TIME (HH:MM local, or ISO), after the jobs checkpoint.",
        ),
        click.option(
            "--after-jobs", is_flag=True, help="autostop: stop once every job ended (the default)."
        ),
        click.option(
            "--idle",
            metavar="DURATION",
            help="autostop: stop after no job and an idle GPU for DURATION (30m, 2h).",
        ),
        click.option(
            "--autostop",
            type=click.Choice(["on", "off"]),
            is_flag=False,
            flag_value="on",
            default=None,
            help="Arm (or `off`: disarm) the machine's "
            "autostop: its reversible stop once every result is safe.",
        ),
    ):
        wrapper = option(wrapper)
    return wrapper  # type: ignore[return-value]


_NOTIFY = "autostop: where the webhook URL is read (env:NAME, credentials:NAME, -)."


def _unused(given: dict[str, Any]) -> None:
    extra = [k for k in _KEYS[1:] if given[k]]
    if extra:
        from rgt.errors import UsageError

        flag = "--" + extra[0].replace("_", "-").replace("-source", "")
        raise UsageError(f"{flag} belongs to --autostop", fix=f"add --autostop before {flag}")


def approve_autostop(name: str, given: dict[str, Any], out: Output) -> None:
    from rgt.autostop import arm
    from rgt.autostop.policy import Options
    from rgt.lifecycle.approvals import approve_at_terminal
    from rgt.state.store import Store

    store = Store.open()
    if given["autostop"] == "off":
        result = arm.disarm(store, name, approve_at_terminal)
        out.result(result, lambda o: o.line(f"autostop on [bold]{name}[/] disarmed"))
        return
    options = Options(
        given["idle"], given["after_jobs"], given["at"], given["budget"], given["on_preempt"]
    )
    money = ledger_money(store, name)
    arm.prepare(store, name, options, money)  # a bad policy fails before the webhook is read
    url = _webhook(given["notify_source"])
    result = arm.arm(store, name, options, money, url, approve_at_terminal)
    out.result(result, lambda o: o.line(policy_line(name, result["policy"])))


def ledger_money(store: Any, name: str) -> dict[str, Any]:
    """Price per hour and spend so far, as `rgt status`'s money clock has them."""
    from datetime import datetime, timezone

    from rgt.vendors.billing import machine_cost

    cost = machine_cost(store, store.machine(name), datetime.now(timezone.utc))
    return {"price_per_hour": cost["price_per_hour"], "spent_at_arm": cost["cost_so_far"] or 0.0}


def _webhook(source: str | None) -> str | None:
    if not source:
        return None
    from rgt.jobs.notify import resolve

    return resolve(source).url


def policy_line(name: str, doc: dict[str, Any]) -> str:
    trig = doc["triggers"]
    when = [w for w, on in (("every job ended", trig["after_jobs"]),) if on]
    if trig["idle_s"]:
        when.append(f"idle {trig['idle_s'] / 60:g} min")
    if trig["at"]:
        when.append(f"at {trig['at']}")
    if trig["budget"]:
        when.append(f"spend {trig['budget']['amount']:g} {trig['budget']['currency']}")
    return (
        f"autostop armed on [bold]{name}[/]: when {' or '.join(when)}, and only with every "
        f"result verified on storage that survives it, runs `{escape(doc['stop']['command'])}` "
        f"({escape(doc['stop']['source'])})"
    )


def self_stop_option(func: F) -> F:
    return click.option(
        "--self-stop",
        metavar="CMD",
        help="The command that stops this machine's meter from inside, keeping its disk "
        "(autostop runs it; never a release or destroy).",
    )(func)
