"""``rgt offers PLATFORM --gpu GPU[:COUNT]``: what a vendor API rents now, cheapest first."""

from __future__ import annotations

from typing import Any


def offers(
    platform: str,
    gpu: str,
    spot: bool = False,
    max_price: float | None = None,
    region: str | None = None,
) -> dict[str, Any]:
    """The vendor's offers for ``gpu`` (``spot``: interruptible capacity and its minimum bid),
    none above ``max_price`` per hour."""
    from rgt.vendors import client_for

    client = client_for(platform)
    try:
        found = client.offers(gpu, spot=spot, region=region)
    finally:
        client.close()
    rows = [o.to_json() for o in found if max_price is None or o.price_per_hour <= max_price]
    return {"platform": platform, "gpu": gpu, "offers": rows}
