"""Forgotten machines: instances a vendor bills on this account that rgt's state does not
know, or believes released — the number one money leak of rented GPUs.

Every vendor with a key is asked (a vendor without one is listed as not checked, never as
clean). An instance is an orphan when it is not terminated at the vendor and rgt has no
unreleased record of it. Cost so far is the vendor's price × the time rgt has known it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from rgt.errors import MissingKeyError, VendorError
from rgt.state.store import Store
from rgt.vendors import VENDORS, client_for
from rgt.vendors._model import TERMINATED


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
    rows = store.vendor_instances()
    held = {(r["vendor"], r["instance_id"]) for r in rows if r["released"] is None}
    released = {(r["vendor"], r["instance_id"]): r["machine"] for r in rows if r["released"]}
    found: list[Orphan] = []
    skipped: dict[str, str] = {}
    for vendor in VENDORS:
        try:
            client = client_for(vendor)
        except MissingKeyError as exc:
            skipped[vendor] = f"not checked: {exc.message}"
            continue
        try:
            instances = client.list()
        except VendorError as exc:
            skipped[vendor] = f"not checked: {exc.message}"
            continue
        finally:
            client.close()
        for inst in instances:
            key = (vendor, inst.id)
            if inst.state == TERMINATED or key in held:
                continue
            why = (
                f"rgt believes {released[key]} was released"
                if key in released
                else "unknown to rgt (made in the console or by another tool)"
            )
            found.append(Orphan(vendor, inst.id, inst.name, inst.state, inst.price_per_hour, why))
    return {"orphans": [o.to_json() for o in found], "not_checked": skipped}


def cost_so_far(row: dict[str, Any], now: datetime | None = None) -> float | None:
    """The vendor's hourly price × the hours since rgt recorded the instance (until released)."""
    price = row.get("price_per_hour")
    if price is None:
        return None
    start = _parse(row["created"])
    end = _parse(row["released"]) if row.get("released") else (now or datetime.now(timezone.utc))
    return round(max(0.0, (end - start).total_seconds()) / 3600 * float(price), 4)


def _parse(stamp: str) -> datetime:
    return datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc)
