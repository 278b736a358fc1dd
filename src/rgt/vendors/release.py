"""The meter-stop step of ``rgt down`` for a machine rented through a vendor API, run only
after the teardown gate passed: the profile's verb (terminate; ``--keep-volume`` stops), then
poll until the vendor confirms — RunPod's delete is eventually consistent, so only a 404
counts there — and only then mark it released and say what still bills.

"Released" needs a parsed terminal answer: an explicit not-found or a terminated state (see
``_rest``: a garbled answer is an error, never "gone"). While waiting, a progress line goes to
stderr (text and ``--json`` alike) on every change and at least every ``PROGRESS_EVERY_S``;
past ``RGT_VENDOR_CONFIRM_S`` (default 600 s) the instance stays unreleased and the error says
its meter may still run, with the vendor's console. ``--keep-volume`` never says "released":
it records "instance stopped, volume kept" and what the volume bills per day.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from typing import Any

from rgt.errors import Consent, KeyRefusedError, RgtError, UsageError, VendorError, needs_human
from rgt.state.store import Store
from rgt.vendors import client_for
from rgt.vendors._model import STOPPED, TERMINATED, Instance
from rgt.vendors._rest import VendorClient
from rgt.vendors.lifecycle import poll_interval

CONFIRM_TIMEOUT_S = 600.0
PROGRESS_EVERY_S = 15.0
Say = Callable[[str], None]


def confirm_timeout() -> float:
    return float(os.environ.get("RGT_VENDOR_CONFIRM_S") or CONFIRM_TIMEOUT_S)


def _stderr(message: str) -> None:
    sys.stderr.write(message + "\n")
    sys.stderr.flush()


def release(
    store: Store, name: str, *, keep_volume: bool = False, say: Say = _stderr
) -> dict[str, Any] | None:
    """The meter-stop step for a machine rented through a vendor API; None for other machines.
    Polls until the vendor confirms, then says what still bills. ``kept`` (``--keep-volume``)
    says what was kept: the machine is then *not* released, its volume bills on."""
    rows = [r for r in store.vendor_instances(name) if r["released"] is None]
    if not rows:
        return None
    done = [_release_one(store, name, row, keep_volume, say) for row in rows]
    kept = "; ".join(d["kept"] for d in done if d.get("kept"))
    return {
        "meter": "; ".join(d["meter"] for d in done),
        "still_bills": [s for d in done for s in d["still_bills"]] or ["nothing bills"],
        "instances": done,
        "kept": kept or None,
    }


def _release_one(
    store: Store, name: str, row: dict[str, Any], keep_volume: bool, say: Say
) -> dict[str, Any]:
    vendor, instance_id = row["vendor"], row["instance_id"]
    client = client_for(vendor)
    try:
        if keep_volume:
            client.stop(instance_id)
            _poll(client, name, instance_id, "stopped", say)
            store.set_vendor_instance_state(vendor, instance_id, STOPPED)
            kept = f"instance stopped, volume kept ({_per_day(client, row)})"
            return {
                "instance_id": instance_id,
                "meter": f"{instance_id}: {kept}",
                "kept": kept,
                "still_bills": [_disk_cost(client, row)],
            }
        client.terminate(instance_id)
        _poll(client, name, instance_id, "gone", say)
        store.set_vendor_instance_state(vendor, instance_id, TERMINATED, released=True)
        return {
            "instance_id": instance_id,
            "meter": f"terminated {instance_id} ({vendor} confirms it is gone)",
            "still_bills": _profile_leftovers(vendor),
        }
    except VendorError as exc:
        raise _still_billing(exc, client, name, instance_id) from exc
    finally:
        client.close()


def _poll(client: VendorClient, name: str, instance_id: str, want: str, say: Say) -> None:
    """Read the instance until it is ``want`` ("gone" or "stopped"), saying how it stands."""
    done: Callable[[Instance | None], bool] = (
        client.gone if want == "gone" else lambda i: i is not None and i.state == STOPPED
    )
    limit = confirm_timeout()
    started = time.monotonic()
    last, said_at = "", started
    while True:
        try:
            found = client.get(instance_id)
            if done(found):
                return
            seen = found.raw_state or found.state if found else "not found"
        except VendorError as exc:  # a garbled or failed read: keep asking until the deadline
            if isinstance(exc, KeyRefusedError):
                raise
            seen = f"unreadable ({exc.message})"
        waited = time.monotonic() - started
        if seen != last or time.monotonic() - said_at >= PROGRESS_EVERY_S:
            say(
                f"{name}: waiting for {client.vendor} to confirm {instance_id} is {want}: "
                f"{seen} ({waited:.0f}s of {limit:g}s)"
            )
            last, said_at = seen, time.monotonic()
        if waited > limit:
            raise VendorError(
                f"{client.vendor} has not confirmed {instance_id} is {want} after {limit:g}s "
                f"(last seen: {seen})",
                backend=client.vendor,
                code="unconfirmed",
                instance_id=instance_id,
            )
        time.sleep(poll_interval())


def _still_billing(
    exc: VendorError, client: VendorClient, name: str, instance_id: str
) -> VendorError:
    """The failure, saying what it means for money: unreleased, the meter may still run."""
    console = client.console_url or f"{client.vendor}'s console"
    return type(exc)(
        f"{exc.message}; {name} is NOT released: instance {instance_id}'s meter may still run",
        backend=client.vendor,
        status=exc.status,
        code=exc.code,
        instance_id=instance_id,
        fix=f"look at {instance_id} in {console} (terminate it there if it still runs), then "
        f"run `rgt down {name}` again; `rgt machines --orphans` lists what still bills",
    )


def _per_day(client: VendorClient, row: dict[str, Any]) -> str:
    rate, disk = client.stopped_disk_per_gb_month, row.get("disk_gb")
    if rate is None or not disk:
        return f"bills at {client.vendor}'s storage rate"
    return f"bills ≈{rate * float(disk) / 30:.2f}/day"


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
    store: Store,
    name: str,
    keep_volume: bool,
    check_only: bool,
    consent: Consent = needs_human,
) -> dict[str, Any] | None:
    """``rgt down NAME`` for a vendor instance that no registered, active machine stands for:

    - recorded by an `up` that never reached it (Ctrl-C, a failed create that still made one,
      sshd never answered): no job can have run there, nothing to pull;
    - kept by an earlier ``down --keep-volume``: that `down` passed the gate (every job pulled
      and verified, a human approved), and the stopped instance runs nothing since.

    Either way the gate's only open question is the human's consent to destroy it, asked
    through ``consent`` (the CLI: at the terminal). None when NAME is an active machine or has
    no unreleased instance."""
    machine = next((m for m in store.machines() if m.name == name), None)
    if machine is not None and machine.active:
        return None
    if not any(r["released"] is None for r in store.vendor_instances(name)):
        return None
    kept = machine is not None
    detail = _KEPT.format(released=machine.released) if machine is not None else _NEVER_REACHED
    check = {"name": "kept volume" if kept else "never reached", "ok": True, "detail": detail}
    result: dict[str, Any] = {
        "machine": name,
        "released": False,
        "gate": {"ok": True, "checks": [check]},
        "notes": [],
    }
    if check_only:
        return result
    if kept and keep_volume:
        raise UsageError(
            f"{name}'s instance is already stopped with its volume kept",
            fix=f"`rgt down {name}` (without --keep-volume) terminates it",
        )
    # Nothing to pull, but stopping a meter is still the human's decision (invariant 4).
    what = (
        f"{name}'s stopped instance and its volume will be destroyed; what is on it is lost."
        if kept
        else f"{name} was never reached; terminating it through the vendor stops its meter."
    )
    consent(what, name, f"rgt down {name}")
    done = release(store, name, keep_volume=keep_volume)
    assert done is not None
    return {**result, **done, "released": not done["kept"]}


_NEVER_REACHED = "never reached over ssh: no job ran on it, nothing to pull"
_KEPT = (
    "stopped by `down --keep-volume` on {released}, after the gate passed (every job pulled "
    "and verified, a human approved); no job has run on it since"
)
