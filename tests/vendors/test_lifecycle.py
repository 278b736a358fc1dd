"""`up` and `down` through the vendor APIs, in-process, against the fakes and a real sshd: the
instance id is recorded before `up` returns (even when the create failed or was interrupted),
a lost create answer never makes a second instance, --max-price refuses, orphans are found."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from rgt.errors import GateRefused, VendorError
from rgt.lifecycle.teardown import teardown
from rgt.state.store import Store
from rgt.vendors.lifecycle import VendorUp, vendor_up
from rgt.vendors.orphans import find_orphans
from tests.clirun import rgt
from tests.sshd import SshServer
from tests.ttys import PtyRgt
from tests.vendors.fakes._server import FakeVendor, Fault

StartFake = Callable[..., FakeVendor]


@pytest.fixture(autouse=True)
def fast_polls(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RGT_VENDOR_POLL_S", "0.05")


def _ask(server: SshServer, **kw: object) -> VendorUp:
    fields = {"gpu": "A100:1", "identity_file": str(server.client_key), "timeout_s": 30.0, **kw}
    return VendorUp(**fields)  # type: ignore[arg-type]


def _up(server: SshServer, root: Path, vendor: str = "runpod", name: str = "box", **kw: object):  # type: ignore[no-untyped-def]
    said: list[str] = []
    machine = vendor_up(
        Store.open(), vendor, name, _ask(server, **kw), root=str(root), say=said.append
    )
    return machine, said


@pytest.mark.parametrize("vendor", ["runpod", "vastai"])
def test_up_records_the_id_then_registers_an_ssh_machine(
    vendor: str, fake_for: StartFake, sshd_server: SshServer, tmp_path: Path
) -> None:
    fake = fake_for(vendor, ssh_host=sshd_server.address, ssh_port=sshd_server.port, boot_polls=3)
    machine, said = _up(sshd_server, tmp_path / "root", vendor)
    (instance_id,) = fake.instances
    row = Store.open().vendor_instances("box")[0]
    assert (row["vendor"], row["instance_id"], row["released"]) == (vendor, instance_id, None)
    assert machine.backend == "ssh" and machine.connection["port"] == sshd_server.port
    assert machine.price_per_hour == fake.instances[instance_id].price  # the vendor's price
    assert any("created and recorded" in s for s in said) and any(
        "agent installed" in s for s in said
    )
    assert list((tmp_path / "root" / ".rgt").iterdir())  # the agent is on the machine


def test_a_lost_create_answer_is_found_by_name_not_repeated(
    fake_for: StartFake, sshd_server: SshServer, tmp_path: Path
) -> None:
    fake = fake_for("runpod", ssh_host=sshd_server.address, ssh_port=sshd_server.port)
    fake.faults.append(Fault(502, None, path="/v1/pods", method="POST", act=True))
    _up(sshd_server, tmp_path / "root")
    assert len(fake.instances) == 1 and fake.count("POST", "/v1/pods") == 1


def test_max_price_refuses_before_any_create(fake_for: StartFake, sshd_server: SshServer) -> None:
    fake = fake_for("runpod")
    with pytest.raises(GateRefused):
        vendor_up(Store.open(), "runpod", "box", _ask(sshd_server, max_price=1.0), say=print)
    assert fake.count("POST", "/v1/pods") == 0 and not fake.instances


def test_no_capacity_names_the_next_cheapest(fake_for: StartFake, sshd_server: SshServer) -> None:
    fake = fake_for("lambda")
    sold_out = {
        "error": {
            "code": "instance-operations/launch/insufficient-capacity",
            "message": "Not enough capacity to fulfill launch request.",
        }
    }
    fake.faults.append(Fault(400, sold_out, path="/launch"))
    with pytest.raises(VendorError) as caught:
        vendor_up(Store.open(), "lambda", "b", _ask(sshd_server), say=print)
    assert "Not enough capacity" in caught.value.message
    assert "next cheapest: A100 (40 GB PCIe) in us-west-1 at 1.29/h" in str(caught.value.fix)
    assert Store.open().vendor_instances("b") == [] and not fake.instances


def test_a_failed_bid_that_made_an_instance_is_recorded_then_released(
    fake_for: StartFake, sshd_server: SshServer
) -> None:
    fake = fake_for("vastai")
    ask = VendorUp(gpu="RTX4090:1", spot=True, bid=0.01, timeout_s=5)
    with pytest.raises(VendorError) as caught:
        vendor_up(Store.open(), "vastai", "cheap", ask, say=print)
    (row,) = Store.open().vendor_instances("cheap")
    assert row["instance_id"] == caught.value.instance_id and row["instance_id"] in fake.instances
    down = PtyRgt("down", "cheap")
    down.expect("Type cheap to approve")
    down.type("cheap")
    assert down.wait() == 0, down.seen
    assert fake.billed() == []
    assert Store.open().vendor_instances("cheap")[0]["released"]


def test_an_interrupted_up_resumes_the_same_instance(
    fake_for: StartFake, sshd_server: SshServer, tmp_path: Path
) -> None:
    fake = fake_for(
        "runpod", ssh_host=sshd_server.address, ssh_port=sshd_server.port, boot_polls=10**6
    )
    with pytest.raises(VendorError, match="not running"):
        _up(sshd_server, tmp_path / "r", timeout_s=0.3)
    (recorded,) = Store.open().vendor_instances("box")
    fake.boot_polls = 0
    machine, _ = _up(sshd_server, tmp_path / "r", resume=True)
    assert list(fake.instances) == [recorded["instance_id"]] and machine.name == "box"


def test_orphans_are_what_the_vendor_bills_and_rgt_forgot(
    fake_for: StartFake, sshd_server: SshServer, tmp_path: Path
) -> None:
    fake = fake_for("runpod", ssh_host=sshd_server.address, ssh_port=sshd_server.port)
    _up(sshd_server, tmp_path / "root")
    stray = fake.create_behind_rgts_back("made-in-the-console")
    found = find_orphans(Store.open())
    assert [o["instance_id"] for o in found["orphans"]] == [stray]
    assert set(found["not_checked"]) == {"vastai", "lambda", "paperspace"}


@pytest.mark.parametrize("vendor", ["runpod", "vastai", "lambda", "paperspace"])
def test_an_up_that_never_reached_the_machine_is_released_by_down(
    vendor: str, fake_for: StartFake, sshd_server: SshServer
) -> None:
    fake = fake_for(vendor, boot_polls=10**6, gone_polls=2)
    with pytest.raises(VendorError, match="not running"):
        vendor_up(Store.open(), vendor, "never", _ask(sshd_server, timeout_s=0.3), say=print)
    assert fake.billed() and Store.open().vendor_instances("never")[0]["released"] is None
    with pytest.raises(GateRefused, match="needs a human"):  # nothing to pull, still human
        teardown(Store.open(), "never")
    assert fake.billed() and Store.open().vendor_instances("never")[0]["released"] is None
    # A script (`--yes`: never ask; what the MCP down tool runs) gets the typed refusal with
    # the command the human runs, and the instance stays as it was.
    scripted = rgt("down", "never", "--yes", "--json")
    refused = json.loads(scripted.stdout)
    assert scripted.returncode == 3 and refused["error"] == "ApprovalNeeded", scripted.stdout
    assert "`rgt down never`" in refused["fix"]
    assert fake.billed() and Store.open().vendor_instances("never")[0]["released"] is None
    down = PtyRgt("down", "never")
    down.expect("Type never to approve")
    down.type("never")
    assert down.wait() == 0, down.seen
    assert b"confirms it is gone" in down.seen
    assert fake.billed() == [] and Store.open().vendor_instances("never")[0]["released"]


def test_keep_volume_stops_and_says_what_the_disk_costs(
    fake_for: StartFake, sshd_server: SshServer
) -> None:
    fake = fake_for("runpod", boot_polls=10**6)
    with pytest.raises(VendorError):
        vendor_up(Store.open(), "runpod", "kept", _ask(sshd_server, timeout_s=0.3), say=print)
    down = PtyRgt("down", "kept", "--keep-volume")
    down.expect("Type kept to approve")
    down.type("kept")
    assert down.wait() == 0, down.seen
    (inst,) = fake.instances.values()
    assert inst.wanted == "stopped" and fake.count("DELETE", "/v1/pods") == 0
    assert "50 GB disk at 0.2/GB/month while stopped ≈ 0.33/day until destroyed" in (
        down.seen.decode()
    )
