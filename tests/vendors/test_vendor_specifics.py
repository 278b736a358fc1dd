"""What one vendor does and the others don't: GraphQL errors in a 200 (RunPod), an error that
still made an instance (vast.ai), Lambda's error codes, Paperspace's pages, and the keys."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from rgt.errors import MissingKeyError, UsageError, VendorError
from rgt.vendors import client_for
from rgt.vendors._keys import api_key, credentials_path, save_key
from rgt.vendors._model import CreateRequest, GpuSpec, family
from tests.vendors.fakes._server import Fault


def test_graphql_errors_in_a_200_are_errors(fake_for) -> None:  # type: ignore[no-untyped-def]
    fake = fake_for("runpod")
    fake.faults.append(Fault(200, {"data": None, "errors": [{"message": "Something went wrong"}]}))
    with pytest.raises(VendorError) as caught:
        client_for("runpod").offers("A100:1")
    assert "Something went wrong" in caught.value.message and caught.value.status == 200


def test_runpod_spot_bid_below_the_minimum_is_refused_by_graphql(fake_for) -> None:  # type: ignore[no-untyped-def]
    fake = fake_for("runpod")
    client = client_for("runpod")
    offer = client.offers("A100:1", spot=True)[0]
    with pytest.raises(VendorError, match="bid too low"):
        client.create(CreateRequest("s", offer, "img", 20, bid=offer.price_per_hour / 2))
    made = client.create(CreateRequest("s", offer, "img", 20, bid=offer.price_per_hour))
    assert made.id in fake.instances and fake.instances[made.id].name == "s"


def test_vast_error_with_new_contract_names_the_instance(fake_for) -> None:  # type: ignore[no-untyped-def]
    fake = fake_for("vastai")
    client = client_for("vastai")
    offer = client.offers("RTX4090:1", spot=True)[0]
    with pytest.raises(VendorError) as caught:
        client.create(CreateRequest("low", offer, "img", 20, bid=0.01))
    assert caught.value.code == "bid_too_low"
    assert caught.value.instance_id in fake.instances  # it exists and bills: the caller records it


def test_lambda_error_code_is_kept(fake_for) -> None:  # type: ignore[no-untyped-def]
    fake_for("lambda")
    client = client_for("lambda")
    offer = client.offers("A100:1")[0]
    sold_out = CreateRequest("x", offer.__class__(**{**offer.__dict__, "region": "eu-1"}), "i", 1)
    with pytest.raises(VendorError) as caught:
        client.create(sold_out)
    assert caught.value.code == "instance-operations/launch/insufficient-capacity"
    assert "Try another region" in caught.value.message


def test_paperspace_lists_walk_every_page(fake_for) -> None:  # type: ignore[no-untyped-def]
    fake = fake_for("paperspace")
    for n in range(5):
        fake.create_behind_rgts_back(f"m{n}")
    assert len(client_for("paperspace").list()) == 5
    assert fake.count("GET", "/machines") == 3  # pages of 2, 2 and 1


def test_gpu_families() -> None:
    assert family("NVIDIA GeForce RTX 4090") == family("RTX 4090") == "RTX4090"
    assert family("A100 (40 GB PCIe)") == family("A100-80G") == family("A100 SXM4") == "A100"
    assert GpuSpec.parse("rtx 4090:2") == GpuSpec("RTX4090", 2)
    with pytest.raises(UsageError):
        GpuSpec.parse("A100:x")


def test_missing_key_names_the_variable_and_the_file() -> None:
    with pytest.raises(MissingKeyError) as caught:
        api_key("vastai")
    assert caught.value.exit_code == 2
    assert (
        "VAST_API_KEY" in caught.value.message and str(credentials_path()) in caught.value.message
    )


def test_credentials_file_is_0600_and_refused_when_loose() -> None:
    path = save_key("runpod", "rp-key-1")
    save_key("lambda", 'la"key')
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert api_key("runpod") == "rp-key-1" and api_key("lambda") == 'la"key'
    os.chmod(path, 0o644)
    with pytest.raises(UsageError, match="group or others") as caught:
        api_key("runpod")
    assert caught.value.fix == f"chmod 600 {path}"


def test_the_environment_wins(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    save_key("paperspace", "from-file")
    monkeypatch.setenv("PAPERSPACE_API_KEY", "from-env")
    assert api_key("paperspace") == "from-env"


def test_cost_so_far_is_the_vendor_price_times_the_hours() -> None:
    from datetime import datetime, timezone

    from rgt.vendors.orphans import cost_so_far

    row = {"price_per_hour": 1.64, "created": "2026-12-01T10:00:00.000000Z", "released": None}
    noon = datetime(2026, 12, 1, 12, 30, tzinfo=timezone.utc)
    assert cost_so_far(row, noon) == 4.1
    assert cost_so_far({**row, "released": "2026-12-01T11:00:00.000000Z"}, noon) == 1.64
    assert cost_so_far({**row, "price_per_hour": None}) is None
