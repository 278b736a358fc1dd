"""Vendor APIs: `rgt offers`, `rgt machines [--orphans]`, and the options `rgt up` takes when it
rents through RunPod, vast.ai, Lambda or Paperspace (``vendor_up_options``)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

import click

from rgt.cli._output import Output, escape, output_options
from rgt.state.store import Store

F = TypeVar("F", bound=Callable[..., Any])

_UP_OPTIONS = (
    click.option("--gpu", help="Rent through the vendor API: GPU[:COUNT], e.g. A100:1."),
    click.option("--offer", "offer_id", help="A specific offer id from `rgt offers`."),
    click.option("--image", help="Container image (RunPod, vast.ai) or template (Paperspace)."),
    click.option("--disk", "disk_gb", type=int, default=50, show_default=True, help="Disk GB."),
    click.option("--spot", is_flag=True, help="Interruptible capacity (RunPod, vast.ai)."),
    click.option("--bid", type=float, help="Spot bid per hour for the whole instance."),
    click.option("--max-price", type=float, help="Refuse offers above this price per hour."),
    click.option("--region", help="Only offers in this region."),
    click.option(
        "--ssh-key", "identity_file", help="Private key to log in with (its .pub is sent)."
    ),
    click.option(
        "--ssh-user", help="Login user, when the image's is not the vendor's (root/ubuntu/…)."
    ),
    click.option(
        "--ssh-port",
        type=click.IntRange(1, 65535),
        help="sshd port, when not the one the vendor reports (Lambda, Paperspace: 22).",
    ),
    click.option("--resume", is_flag=True, help="Finish an interrupted `up` of this name."),
    click.option(
        "--budget",
        type=float,
        help="Announce (event + --notify) at 80 % and 100 % of this spend; never stops it.",
    ),
    click.option(
        "--notify",
        "notify_source",
        metavar="env:NAME|credentials:NAME",
        help="Where the webhook URL for budget notifications is read (never the URL itself).",
    ),
)
_UP_NAMES = (
    *("gpu", "offer_id", "image", "disk_gb", "spot", "bid", "max_price", "region"),
    *("ssh_user", "ssh_port"),
)


def vendor_up_options(func: F) -> F:
    """Adds the renting options to `rgt up` and hands them over as one ``vendor`` argument
    (None unless --gpu or --resume was given: then `up` registers an existing machine)."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        values = {n: kwargs.pop(n) for n in (*_UP_NAMES, "identity_file", "resume")}
        rents = bool(values["gpu"] or values["resume"])
        budget, notify = kwargs.pop("budget"), kwargs.pop("notify_source")
        if budget is not None and not rents and kwargs.get("price") is None:
            from rgt.errors import UsageError

            raise UsageError(
                "--budget needs a price: the vendor's (rent with --gpu) or --price P",
                fix="add --price (per hour), or drop --budget",
            )
        _set_budget(kwargs["name"], budget, notify)
        kwargs["vendor"] = _vendor_up(values) if rents else None
        return func(*args, **kwargs)

    for option in reversed(_UP_OPTIONS):
        wrapper = option(wrapper)
    return wrapper  # type: ignore[return-value]


def _set_budget(name: str, budget: float | None, notify: str | None) -> None:
    """Recorded before renting, so an `up` cut short still has its budget watched."""
    from rgt.errors import UsageError

    if budget is None:
        if notify:
            raise UsageError("--notify on `up` is for --budget", fix="add --budget AMOUNT")
        return
    if not budget > 0:
        raise UsageError(f"--budget {budget:g} is not a positive amount", fix="e.g. --budget 20")
    if notify:
        from rgt.jobs.notify import resolve

        if notify in ("-", "stdin"):
            raise UsageError(
                "a budget notification is sent later, by `rgt status`/`watch`: stdin is gone then",
                fix="use --notify env:NAME or --notify credentials:NAME",
            )
        resolve(notify)  # refuses a URL in argv, an unset variable, a loose credentials file
    from rgt.lifecycle.machines import validate_name
    from rgt.vendors._ledger import set_budget

    set_budget(validate_name(name), budget, notify)
    click.echo(
        f"budget {budget:g} for {name}: events at 80 % and 100 % (seen by `rgt status`, "
        "`rgt watch`, `rgt down`); rgt never stops the machine by itself",
        err=True,
    )


def _vendor_up(values: dict[str, Any]) -> Any:
    from rgt.verbs.up import rental

    return rental({**values, "offer": values["offer_id"]})


@click.command()
@click.argument("platform")
@click.option("--gpu", required=True, help="GPU[:COUNT], e.g. A100:1 or RTX4090:2.")
@click.option("--spot", is_flag=True, help="Interruptible capacity and its minimum bid.")
@click.option("--max-price", type=float, help="Hide offers above this price per hour.")
@click.option("--region", help="Only offers in this region.")
@output_options
def offers(
    platform: str, gpu: str, spot: bool, max_price: float | None, region: str | None, out: Output
) -> None:
    """What PLATFORM (runpod, vastai, lambda, paperspace) rents now, cheapest first."""
    from rgt.verbs.offers import offers as find

    data = find(platform, gpu, spot, max_price, region)
    rows = data["offers"]

    def human(o: Output) -> None:
        o.table(
            ["offer", "GPU", "count", "price/h", "spot", "disk GB", "region", "reliability"],
            [
                [
                    r["id"],
                    r["gpu"],
                    r["count"],
                    f"{r['price_per_hour']:.3f}",
                    r["spot"],
                    r["disk_gb"],
                    r["region"],
                    r["reliability"],
                ]
                for r in rows
            ],
            title=f"{platform} offers for {gpu}",
        )

    out.result(data, human)


@click.command()
@click.option("--orphans", is_flag=True, help="Instances the vendors bill that rgt forgot.")
@output_options
def machines(orphans: bool, out: Output) -> None:
    """Registered machines and their vendor instances; --orphans asks every vendor with a key."""
    store = Store.open()
    if orphans:
        from rgt.vendors.orphans import find_orphans

        data = find_orphans(store)
        out.result(data, _human_orphans(data))
        return
    rows = _machine_rows(store)
    out.result({"machines": rows}, _human_machines(rows))


def _machine_rows(store: Store) -> list[dict[str, Any]]:
    from rgt.vendors.orphans import cost_so_far

    return [
        {
            **m.__dict__,
            "vendor_instances": [
                {**v, "cost_so_far": cost_so_far(v)} for v in store.vendor_instances(m.name)
            ],
        }
        for m in store.machines()
    ]


def _human_machines(rows: list[dict[str, Any]]) -> Callable[[Output], None]:
    def human(o: Output) -> None:
        o.table(
            ["name", "profile", "released", "vendor instance", "cost so far"],
            [
                [
                    r["name"],
                    r["profile"],
                    _released(r),
                    ", ".join(v["instance_id"] for v in r["vendor_instances"]),
                    sum(v["cost_so_far"] or 0 for v in r["vendor_instances"]) or "",
                ]
                for r in rows
            ],
        )

    return human


def _released(row: dict[str, Any]) -> str:
    """When it was released; a machine whose instance `down --keep-volume` kept is not."""
    kept = [v for v in row["vendor_instances"] if v["released"] is None]
    if row["released"] and kept:
        return f"no: instance {kept[0]['state']}, volume kept (`rgt down {row['name']}`)"
    return str(row["released"] or "")


def _human_orphans(data: dict[str, Any]) -> Callable[[Output], None]:
    def human(o: Output) -> None:
        if data["orphans"]:
            o.table(
                ["vendor", "instance", "name", "state", "price/h", "why"],
                [
                    [
                        x["vendor"],
                        x["instance_id"],
                        x["name"],
                        x["state"],
                        x["price_per_hour"],
                        x["why"],
                    ]
                    for x in data["orphans"]
                ],
                title="billing, unknown to rgt",
            )
        elif data["checked"]:
            o.line(f"no orphaned instances on {', '.join(data['checked'])}")
        else:
            o.line("orphans unknown: no vendor could be listed")
        for k in data.get("kept", []):
            o.line(
                f"  • kept: {k['vendor']} instance {k['instance_id']} of {k['machine']} is "
                f"{k['state']} and bills its disk: `{k['fix']}` destroys it"
            )
        for vendor, why in data["not_checked"].items():
            o.line(f"  • {vendor}: {escape(why)}")  # messages name "[vendor]" tables

    return human


@click.group()
def vendors() -> None:
    """API keys of the vendors rgt rents through (runpod, vastai, lambda, paperspace)."""


@vendors.command()
@click.argument("platform")
@click.option("--check", is_flag=True, help="List the account's instances with the key first.")
@output_options
def login(platform: str, check: bool, out: Output) -> None:
    """Save PLATFORM's API key to $RGT_HOME/credentials.toml (mode 0600). The key is read from a
    hidden prompt, or one line of stdin when stdin is not a terminal; never from argv."""
    import os
    import sys

    from rgt.errors import UsageError
    from rgt.vendors import VENDORS, client_for
    from rgt.vendors._keys import KEY_VARIABLES, credentials_path, save_key

    if platform not in VENDORS:
        raise UsageError(f"{platform!r} has no vendor API", fix=f"one of: {', '.join(VENDORS)}")
    if sys.stdin.isatty():
        key = click.prompt(f"{platform} API key (hidden)", hide_input=True, err=True)
    else:
        key = sys.stdin.readline()
    if not key.strip():
        raise UsageError("no key was given", fix=f'echo "$KEY" | rgt vendors login {platform}')
    if check:  # a refused key raises KeyRefusedError (exit 1) and nothing is saved
        client = client_for(platform, key=key.strip())
        try:
            client.list()
        finally:
            client.close()
    path = save_key(platform, key)
    shadow = KEY_VARIABLES[platform] if os.environ.get(KEY_VARIABLES[platform]) else None
    data = {"platform": platform, "path": str(path), "mode": "0600", "checked": check}
    if shadow:
        data["note"] = f"${shadow} is set and is used before the file"

    def human(o: Output) -> None:
        o.line(f"saved the {platform} key to {escape(str(credentials_path()))} (mode 0600)")
        if shadow:
            o.line(f"  • ${shadow} is set in this shell and wins over the file")

    out.result(data, human)


def register(cli: click.Group) -> None:
    for command in (offers, machines, vendors):
        cli.add_command(command)
