"""Forgotten machines: instances a vendor bills on this account that rgt's state does not
know, or believes released — the number one money leak of rented GPUs.

Every vendor with a key is asked (a vendor without one is listed as not checked, one whose
answer failed or did not parse as "could not list" — never as clean). An instance is an
orphan when it is not terminated at the vendor and rgt has no unreleased record of it.
Cost so far is the vendor's price × the time rgt has known it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from rgt.agent.jobfiles import parse_time
from rgt.errors import UsageError, VendorError
from rgt.state.store import Store
from rgt.vendors import VENDORS, client_for
from rgt.vendors._keys import configured


@dataclass(frozen=True)
class Orphan:
    vendor: str
    instance_id: str
    name: str
    state: str
    price_per_hour: float | None
    why: str

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


def find_orphans(store: Store) -> dict[str, Any]:
    return classify(store, *list_accounts())


def list_accounts(
    quick_s: float | None = None, only_configured: bool = False
) -> tuple[dict[str, list[dict[str, Any]]], dict[str, str]]:
    """Every instance of every vendor account with a key, as JSON; and why a vendor was not
    checked. ``quick_s``: one try with that deadline (a glance from `status`); with
    ``only_configured`` a vendor without a key is left out instead of listed as not checked."""
    listings: dict[str, list[dict[str, Any]]] = {}
    skipped: dict[str, str] = {}
    for vendor in VENDORS:
        if only_configured and not configured(vendor):
            continue
        try:
            client = client_for(vendor)
        except UsageError as exc:  # no key, or a credentials.toml others can read
            skipped[vendor] = f"not checked: {exc.message}"
            continue
        try:
            if quick_s is not None:
                client.quick(quick_s)
            listings[vendor] = [i.to_json() for i in client.list()]
        except VendorError as exc:  # garbled, refused, unreachable: unknown, never "none"
            skipped[vendor] = f"could not list: {exc.message[:200]}"
        finally:
            client.close()
    return listings, skipped


def classify(
    store: Store, listings: dict[str, list[dict[str, Any]]], skipped: dict[str, str]
) -> dict[str, Any]:
    """The listed instances rgt holds no unreleased record of, and why each is an orphan."""
    from rgt.vendors._model import TERMINATED

    rows = store.vendor_instances()
    held = {(r["vendor"], r["instance_id"]) for r in rows if r["released"] is None}
    released = {(r["vendor"], r["instance_id"]): r["machine"] for r in rows if r["released"]}
    found: list[Orphan] = []
    for vendor, instances in listings.items():
        for inst in instances:
            key = (vendor, inst["id"])
            if inst["state"] == TERMINATED or key in held:
                continue
            why = (
                f"rgt believes {released[key]} was released"
                if key in released
                else "unknown to rgt (made in the console or by another tool)"
            )
            price = inst.get("price_per_hour")
            found.append(Orphan(vendor, inst["id"], inst["name"], inst["state"], price, why))
    gone = {m.name for m in store.machines() if not m.active}
    kept = [  # known and billing on purpose (`down --keep-volume`): listed, not orphans
        {
            **{k: r[k] for k in ("vendor", "instance_id", "machine", "state")},
            "fix": f"rgt down {r['machine']}",
        }
        for r in rows
        if r["released"] is None and r["machine"] in gone
    ]
    return {
        "orphans": [o.to_json() for o in found],
        "kept": kept,
        "checked": sorted(listings),
        "not_checked": skipped,
    }


def cost_so_far(
    row: dict[str, Any], now: datetime | None = None, until: str | None = None
) -> float | None:
    """The vendor's hourly price × the hours since rgt recorded the instance, until released
    (or ``until``: when a stopped instance's compute meter stopped)."""
    price = row.get("price_per_hour")
    if price is None:
        return None
    start = _parse(row["created"])
    stamp = row.get("released") or until
    end = _parse(stamp) if stamp else (now or datetime.now(timezone.utc))
    return round(max(0.0, (end - start).total_seconds()) / 3600 * float(price), 4)


def _parse(stamp: str) -> datetime:
    found = parse_time(stamp)
    if found is None:
        raise ValueError(f"not an rgt timestamp: {stamp!r}")
    return found
