"""Read-only calls against the real vendor APIs. Runs only when RGT_LIVE_VENDOR_TESTS=1 and the
vendor's key is in the environment; never in CI. It rents nothing: offers and list only."""

from __future__ import annotations

import os

import pytest

from rgt.vendors import client_for
from rgt.vendors._keys import KEY_VARIABLES


@pytest.mark.parametrize(
    ("vendor", "gpu"),
    [("runpod", "A100:1"), ("vastai", "RTX4090:1"), ("lambda", "A100:1"), ("paperspace", "A100:1")],
)
def test_live_offers_and_list(vendor: str, gpu: str, monkeypatch: pytest.MonkeyPatch) -> None:
    if os.environ.get("RGT_LIVE_VENDOR_TESTS") != "1" or not os.environ.get(KEY_VARIABLES[vendor]):
        pytest.skip(f"live test: set RGT_LIVE_VENDOR_TESTS=1 and {KEY_VARIABLES[vendor]}")
    client = client_for(vendor)
    try:
        offers = client.offers(gpu)
        assert all(o.price_per_hour > 0 for o in offers)
        assert isinstance(client.list(), list)
    finally:
        client.close()
