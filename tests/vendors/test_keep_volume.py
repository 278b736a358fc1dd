"""`down --keep-volume` is no dead end: the stopped instance stays in view (status, not an
orphan) with what it costs, and a later `rgt down` destroys it once a human consents."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from rgt.cli.vendors import _machine_rows, _released
from rgt.errors import GateRefused
from rgt.lifecycle.teardown import teardown
from rgt.state.store import Store
from rgt.vendors.billing import summary
from rgt.vendors.lifecycle import VendorUp, vendor_up
from rgt.vendors.orphans import find_orphans
from tests.sshd import SshServer
from tests.ttys import PtyRgt, approve_at_a_terminal
from tests.vendors.fakes._server import FakeVendor


@pytest.mark.slow
def test_a_kept_volume_stays_visible_and_a_later_down_terminates_it(
    fake_for: Callable[..., FakeVendor],
    sshd_server: SshServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("RGT_VENDOR_POLL_S", "0.05")
    # One Store for the whole test: a second Store.open() in this process would re-read the
    # file's header and, closing it, drop this process's sqlite locks (POSIX locks are per
    # process), so the `rgt down` below could delete the WAL under a live connection.
    store = Store.open()
    fake = fake_for("runpod", ssh_host=sshd_server.address, ssh_port=sshd_server.port)
    ask = VendorUp(gpu="A100:1", identity_file=str(sshd_server.client_key), timeout_s=30)
    vendor_up(store, "runpod", "box", ask, root=str(tmp_path / "root"), say=print)
    (pod,) = fake.instances
    with pytest.raises(GateRefused) as unapproved:
        teardown(store, "box", check_only=True)
    notes = unapproved.value.notes  # type: ignore[attr-defined]
    assert any(n.startswith("cost so far: box ") and "vendor price" in n for n in notes)
    assert "orphans: none on runpod" in notes[-1]  # the gate's notes look too
    assert approve_at_a_terminal("box") == 0
    kept = teardown(store, "box", keep_volume=True, yes=True)
    # never plain "released": the instance and its volume are still there and bill
    assert kept["released"] is False and "disk" in kept["still_bills"][0]
    assert kept["kept"] == "instance stopped, volume kept (bills ≈0.33/day)"
    assert fake.instances[pod].wanted == "stopped" and not store.machine("box").active

    (row,) = [r for r in _machine_rows(store) if r["name"] == "box"]
    assert _released(row) == "no: instance stopped, volume kept (`rgt down box`)"
    view = summary(store)
    assert [(k["machine"], k["instance_id"]) for k in view["kept"]] == [("box", pod)]
    assert any("`rgt down box` terminates it" in line for line in view["lines"])
    orphans = find_orphans(store)
    assert orphans["orphans"] == []  # known to rgt: not an orphan, but listed as still billing
    assert [(k["instance_id"], k["fix"]) for k in orphans["kept"]] == [(pod, "rgt down box")]
    assert teardown(store, "box", check_only=True)["gate"]["checks"][0]["name"] == ("kept volume")
    with pytest.raises(GateRefused, match="needs a human"):
        teardown(store, "box", yes=True)
    assert fake.count("DELETE", "/v1/pods") == 0

    down = PtyRgt("down", "box")
    down.expect("will be destroyed")
    down.expect("Type box to approve")
    down.type("box")
    assert down.wait() == 0, down.seen
    assert b"confirms it is gone" in down.seen and fake.billed() == []
    assert summary(store)["kept"] == []
