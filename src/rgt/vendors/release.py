"""The meter-stop step of ``rgt down`` for a machine rented through a vendor API, run only
after the teardown gate passed: the profile's verb (terminate; ``--keep-volume`` stops), then
poll until the vendor confirms — RunPod's delete is eventually consistent, so only a 404
counts there — and only then mark it released and say what still bills.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from rgt.approvals import approve_at_terminal
from rgt.errors import RgtError, VendorError
from rgt.state.store import Store
from rgt.vendors import client_for
from rgt.vendors._model import STOPPED, TERMINATED, Instance
from rgt.vendors._rest import VendorClient
from rgt.vendors.lifecycle import poll_interval

CONFIRM_TIMEOUT_S = 600.0


def release(store: Store, name: str, *, keep_volume: bool = False) -> dict[str, Any] | None:
    """The meter-stop step for a machine rented through a vendor API; None for other machines.
    Polls until the vendor confirms, then says what still bills."""
    rows = [r for r in store.vendor_instances(name) if r["released"] is None]
    if not rows:
        return None
    done = [_release_one(store, row, keep_volume) for row in rows]
    return {
        "meter": "; ".join(d["meter"] for d in done),
        "still_bills": [s for d in done for s in d["still_bills"]] or ["nothing bills"],
        "instances": done,
    }


def _release_one(store: Store, row: dict[str, Any], keep_volume: bool) -> dict[str, Any]:
    vendor, instance_id = row["vendor"], row["instance_id"]
    client = client_for(vendor)
    try:
        if keep_volume:
            client.stop(instance_id)
            _poll(client, instance_id, lambda i: i is not None and i.state == STOPPED)
            store.set_vendor_instance_state(vendor, instance_id, STOPPED)
            bills = [_disk_cost(client, row)]
            return {
                "instance_id": instance_id,
                "meter": f"stopped {instance_id}",
                "still_bills": bills,
            }
        client.terminate(instance_id)
        _poll(client, instance_id, client.gone)
        store.set_vendor_instance_state(vendor, instance_id, TERMINATED, released=True)
        return {
            "instance_id": instance_id,
            "meter": f"terminated {instance_id} ({vendor} confirms it is gone)",
            "still_bills": _profile_leftovers(vendor),
        }
    finally:
        client.close()


def _poll(client: VendorClient, instance_id: str, done: Callable[[Instance | None], bool]) -> None:
    deadline = time.monotonic() + CONFIRM_TIMEOUT_S
    while not done(client.get(instance_id)):
        if time.monotonic() > deadline:
            raise VendorError(
                f"{client.vendor} has not confirmed {instance_id} after {CONFIRM_TIMEOUT_S:g}s",
                backend=client.vendor,
                instance_id=instance_id,
                fix="run `rgt down` again later; until confirmed it may still bill",
            )
        time.sleep(poll_interval())


def _disk_cost(client: VendorClient, row: dict[str, Any]) -> str:
    rate, disk = client.stopped_disk_per_gb_month, row.get("disk_gb")
    if rate is None or not disk:
        return (
            f"the stopped instance's disk bills at {client.vendor}'s storage rate until destroyed"
        )
    per_day = rate * float(disk) / 30
    return (
        f"{disk:g} GB disk at {rate:g}/GB/month while stopped ≈ {per_day:.2f}/day until destroyed"
    )


def _profile_leftovers(vendor: str) -> list[str]:
    """The profile's notes on what a terminate leaves billing (network volumes, filesystems)."""
    from rgt.profiles import load_profile

    try:
        return [f"if you made one: {s}" for s in load_profile(vendor).meter_stop.still_bills]
    except RgtError:
        return []


def release_unregistered(
    store: Store, name: str, keep_volume: bool, check_only: bool
) -> dict[str, Any] | None:
    """``rgt down NAME`` for an instance recorded by an `up` that never reached it (Ctrl-C,
    a failed create that still made one, sshd never answered): no job can have run there, so
    there is nothing to pull and nothing for the gate to guard. None when NAME is registered."""
    if any(m.name == name for m in store.machines()):
        return None
    if not any(r["released"] is None for r in store.vendor_instances(name)):
        return None
    check = {"name": "never reached", "ok": True, "detail": _NEVER_REACHED}
    result: dict[str, Any] = {
        "machine": name,
        "released": False,
        "gate": {"ok": True, "checks": [check]},
        "notes": [],
    }
    if check_only:
        return result
    # Nothing to pull, but stopping a meter is still the human's decision (invariant 4).
    what = f"{name} was never reached; terminating it through the vendor stops its meter."
    approve_at_terminal(what, name, f"rgt down {name}")
    done = release(store, name, keep_volume=keep_volume)
    assert done is not None
    return {**result, **done, "released": True}


_NEVER_REACHED = "never reached over ssh: no job ran on it, nothing to pull"
