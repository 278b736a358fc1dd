"""Calls against the real vendor APIs. Never run in CI: every test skips unless
``RGT_LIVE_VENDOR_TESTS=1`` and the vendor's key are in the environment.

- ``test_live_offers_and_list``: read-only (offers, the account's instances); rents nothing.
- ``test_live_rent_and_release``: rents the cheapest offer, reaches it over ssh, releases it and
  checks the vendor forgot it. It costs money, so it also needs ``RGT_LIVE_RENT=<vendor>``,
  ``RGT_LIVE_MAX_PRICE`` (per hour) and ``RGT_LIVE_SSH_KEY`` (a private key whose ``.pub`` the
  vendor installs); optional ``RGT_LIVE_GPU`` (default ``RTX4090:1``).

    RGT_LIVE_VENDOR_TESTS=1 RUNPOD_API_KEY=… RGT_LIVE_RENT=runpod RGT_LIVE_MAX_PRICE=0.8 \\
    RGT_LIVE_SSH_KEY=~/.ssh/id_ed25519 .venv/bin/python -m pytest tests/vendors/test_live.py
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rgt.state.store import Store
from rgt.vendors import client_for
from rgt.vendors._keys import KEY_VARIABLES
from rgt.vendors.lifecycle import VendorUp, vendor_up
from rgt.vendors.orphans import find_orphans
from rgt.vendors.release import release

VENDORS = [("runpod", "A100:1"), ("vastai", "RTX4090:1"), ("lambda", "A100:1")]
VENDORS.append(("paperspace", "A100:1"))


def _live(vendor: str) -> None:
    if os.environ.get("RGT_LIVE_VENDOR_TESTS") != "1" or not os.environ.get(KEY_VARIABLES[vendor]):
        pytest.skip(f"live test: set RGT_LIVE_VENDOR_TESTS=1 and {KEY_VARIABLES[vendor]}")


@pytest.mark.parametrize(("vendor", "gpu"), VENDORS)
def test_live_offers_and_list(vendor: str, gpu: str) -> None:
    _live(vendor)
    client = client_for(vendor)
    try:
        offers = client.offers(gpu)
        assert all(o.price_per_hour > 0 for o in offers)
        assert isinstance(client.list(), list)
    finally:
        client.close()


@pytest.mark.parametrize("vendor", [v for v, _ in VENDORS])
def test_live_rent_and_release(vendor: str, tmp_path: Path) -> None:
    _live(vendor)
    if os.environ.get("RGT_LIVE_RENT") != vendor or not os.environ.get("RGT_LIVE_MAX_PRICE"):
        pytest.skip(f"renting costs money: set RGT_LIVE_RENT={vendor} and RGT_LIVE_MAX_PRICE")
    key = str(Path(os.environ["RGT_LIVE_SSH_KEY"]).expanduser())
    ask = VendorUp(
        gpu=os.environ.get("RGT_LIVE_GPU", "RTX4090:1"),
        max_price=float(os.environ["RGT_LIVE_MAX_PRICE"]),
        identity_file=key,
        timeout_s=900,
    )
    store, name = Store.open(), f"rgt-live-{os.getpid()}"
    try:
        machine = vendor_up(store, vendor, name, ask, say=print)
        assert machine.price_per_hour is not None and machine.price_per_hour <= ask.max_price
    finally:  # whatever happened above, the instance (if any was recorded) is destroyed
        done = release(store, name)
    assert done is not None and done["instances"]
    assert all(r["released"] for r in store.vendor_instances(name))
    assert not [o for o in find_orphans(store)["orphans"] if o["name"] == name]
