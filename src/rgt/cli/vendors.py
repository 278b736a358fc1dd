"""Vendor APIs: `rgt offers`, `rgt machines [--orphans]`, and the options `rgt up` takes when it
rents through RunPod, vast.ai, Lambda or Paperspace (``vendor_up_options``)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

import click
from rich.markup import escape

from rgt.cli._output import Output, output_options
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
    click.option("--resume", is_flag=True, help="Finish an interrupted `up` of this name."),
)
_UP_NAMES = ("gpu", "offer_id", "image", "disk_gb", "spot", "bid", "max_price", "region")


def vendor_up_options(func: F) -> F:
    """Adds the renting options to `rgt up` and hands them over as one ``vendor`` argument
    (None unless --gpu or --resume was given: then `up` registers an existing machine)."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        values = {n: kwargs.pop(n) for n in (*_UP_NAMES, "identity_file", "resume")}
        kwargs["vendor"] = _vendor_up(values) if values["gpu"] or values["resume"] else None
        return func(*args, **kwargs)

    for option in reversed(_UP_OPTIONS):
        wrapper = option(wrapper)
    return wrapper  # type: ignore[return-value]


def _vendor_up(values: dict[str, Any]) -> Any:
    from rgt.vendors.lifecycle import VendorUp

    image = values.pop("image")
    offer = values.pop("offer_id")
    return VendorUp(**values, offer=offer, **({"image": image} if image else {}))


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
    from rgt.vendors import client_for

    client = client_for(platform)
    try:
        found = client.offers(gpu, spot=spot, region=region)
    finally:
        client.close()
    rows = [o.to_json() for o in found if max_price is None or o.price_per_hour <= max_price]

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

    out.result({"platform": platform, "gpu": gpu, "offers": rows}, human)


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
                    r["released"] or "",
                    ", ".join(v["instance_id"] for v in r["vendor_instances"]),
                    sum(v["cost_so_far"] or 0 for v in r["vendor_instances"]) or "",
                ]
                for r in rows
            ],
        )

    return human


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
        else:
            o.line("no orphaned instances on the vendors checked")
        for vendor, why in data["not_checked"].items():
            o.line(f"  • {vendor}: {escape(why)}")  # messages name "[vendor]" tables

    return human


def register(cli: click.Group) -> None:
    for command in (offers, machines):
        cli.add_command(command)
