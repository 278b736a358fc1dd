"""`rgt offers` and the key errors through the real CLI, against the fakes."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from tests.clirun import rgt
from tests.vendors.fakes._server import FakeVendor

StartFake = Callable[..., FakeVendor]


@pytest.mark.parametrize(
    ("vendor", "gpu", "cheapest"),
    [
        ("runpod", "A100:1", 1.64),
        ("vastai", "A100", 0.95),
        ("lambda", "A100:1", 1.29),
        ("paperspace", "A100:1", 3.09),
    ],
)
def test_offers_sorted_by_price(
    fake_for: StartFake, vendor: str, gpu: str, cheapest: float
) -> None:
    fake_for(vendor)
    proc = rgt("offers", vendor, "--gpu", gpu, "--json")
    assert proc.returncode == 0, proc.stderr
    offers = json.loads(proc.stdout)["offers"]
    prices = [o["price_per_hour"] for o in offers]
    assert prices == sorted(prices) and prices[0] == cheapest
    assert {o["family"] for o in offers} == {"A100"}


@pytest.mark.slow
def test_offers_filters_spot_price_and_region(fake_for: StartFake) -> None:
    fake_for("vastai")
    spot = json.loads(rgt("offers", "vastai", "--gpu", "A100", "--spot", "--json").stdout)
    assert [o["price_per_hour"] for o in spot["offers"]] == [0.5, 0.6]
    capped = json.loads(
        rgt("offers", "vastai", "--gpu", "A100", "--max-price", "1", "--json").stdout
    )
    assert [o["id"] for o in capped["offers"]] == ["5003"]
    fake_for("lambda")
    west = json.loads(
        rgt("offers", "lambda", "--gpu", "A100", "--region", "us-west-1", "--json").stdout
    )
    assert [o["region"] for o in west["offers"]] == ["us-west-1"]


def test_unknown_gpu_lists_the_valid_ones(fake_for: StartFake) -> None:
    fake_for("runpod")
    proc = rgt("offers", "runpod", "--gpu", "B9000:1", "--json")
    assert proc.returncode == 2
    assert "A100, RTX4090" in json.loads(proc.stdout)["fix"]


def test_missing_key_exits_2_naming_variable_and_file(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LAMBDA_API_KEY", raising=False)
    proc = rgt("offers", "lambda", "--gpu", "A100", "--json")
    assert proc.returncode == 2
    message = json.loads(proc.stdout)["message"]
    assert "LAMBDA_API_KEY" in message and "credentials.toml" in message


def test_a_refused_key_exits_1_once(fake_for: StartFake, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = fake_for("paperspace")
    monkeypatch.setenv("PAPERSPACE_API_KEY", "ps-wrong-key-9f8e7d")
    proc = rgt("offers", "paperspace", "--gpu", "A100", "--json")
    assert proc.returncode == 1
    assert "the key was refused" in proc.stdout and "ps-wrong-key" not in proc.stdout + proc.stderr
    assert len(fake.requests) == 1


def test_orphans_table_and_the_vendors_not_checked(fake_for: StartFake) -> None:
    fake = fake_for("vastai")
    stray = fake.create_behind_rgts_back("console-made")
    proc = rgt("machines", "--orphans")
    assert proc.returncode == 0, proc.stderr
    assert stray in proc.stdout and "console-made" in proc.stdout
    assert "[runpod]" in proc.stdout  # "no [runpod] key in credentials.toml", not eaten as markup
