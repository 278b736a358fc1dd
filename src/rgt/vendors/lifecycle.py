"""Renting and releasing through a vendor API: ``rgt up PLATFORM --gpu …`` and the meter-stop
step of ``rgt down`` (called only after the teardown gate passed).

``up``: pick the offer (``--max-price`` refuses a dearer one; the price is the vendor's), then
create with rgt's machine name as the vendor's name/label — the idempotency key. A create that
timed out or got a 5xx may have happened, so the account is listed by that name before trying
again. The instance id is written to the state store the moment the vendor answers, *before*
waiting for it, and even when the answer was an error that still made an instance (vast.ai's
``new_contract``). Then poll until it runs, wait for sshd, and register it through the ordinary
SSH registration (host key trusted on first use) and install the agent: from there it is an
ordinary SSH machine. ``down``: the profile's meter-stop verb (terminate unless
``--keep-volume``), then poll until the vendor confirms; only a confirmed instance is marked
released. ``RGT_VENDOR_POLL_S`` sets the poll interval (default 5 s).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from rgt.errors import GateRefused, RgtError, VendorError
from rgt.models import Machine
from rgt.state.store import Store
from rgt.vendors import client_for
from rgt.vendors._model import ERROR, RUNNING, STOPPED, TERMINATED, CreateRequest, Instance, Offer
from rgt.vendors._reach import prebuild, register
from rgt.vendors._rest import VendorClient

Say = Callable[[str], None]


@dataclass(frozen=True)
class VendorUp:
    """What ``rgt up PLATFORM`` was asked for when the vendor API rents the machine."""

    gpu: str | None = None
    offer: str | None = None
    image: str | None = None  # None: the vendor client's default_image
    disk_gb: int = 50
    spot: bool = False
    bid: float | None = None
    max_price: float | None = None
    region: str | None = None
    identity_file: str | None = None
    ssh_user: str | None = None  # overrides the vendor's login user (a custom image/template)
    ssh_port: int | None = None  # overrides the vendor's port (Lambda/Paperspace: always 22)
    resume: bool = False
    timeout_s: float = 1800.0


def poll_interval() -> float:
    return float(os.environ.get("RGT_VENDOR_POLL_S") or 5.0)


def _stderr(message: str) -> None:
    sys.stderr.write(message + "\n")
    sys.stderr.flush()


def vendor_up(
    store: Store,
    platform: str,
    name: str,
    ask: VendorUp,
    *,
    root: str | None = None,
    say: Say = _stderr,
) -> Machine:
    client = client_for(platform)
    try:
        instance = _live_instance(store, client, platform, name)
        if instance is None:
            if ask.resume:
                raise VendorError(
                    f"no {platform} instance of {name} to resume",
                    backend=platform,
                    fix=f"rent one with `rgt up {platform} --name {name} --gpu …`",
                )
            instance = _create(store, client, platform, name, ask, say)
        else:
            say(f"{name}: {platform} instance {instance.id} already exists ({instance.state})")
            if instance.state == STOPPED:
                client.start(instance.id)
        agent = prebuild(platform)  # local work, done while the vendor provisions
        ready = _with_price(store, name, _wait_running(client, instance, ask.timeout_s, say))
        store.record_vendor_instance(
            name, platform, ready.id, price=ready.price_per_hour, state=RUNNING
        )
        return register(store, platform, name, ready, ask, root, say, agent)
    finally:
        client.close()


def _with_price(store: Store, name: str, ready: Instance) -> Instance:
    """Some vendors price only offers (Paperspace's machine has no rate): keep the recorded one."""
    if ready.price_per_hour is not None:
        return ready
    rows = [r for r in store.vendor_instances(name) if r["instance_id"] == ready.id]
    return replace(ready, price_per_hour=rows[0]["price_per_hour"] if rows else None)


def _live_instance(store: Store, client: VendorClient, platform: str, name: str) -> Instance | None:
    """The instance this name already has: recorded by an interrupted `up`, or found by name."""
    for row in store.vendor_instances(name):
        if row["vendor"] == platform and row["released"] is None:
            found = client.get(row["instance_id"])
            if not client.gone(found) and found is not None and found.state != TERMINATED:
                return found
            # the vendor confirms it is gone (terminated in the console, reclaimed): not billing
            store.set_vendor_instance_state(platform, row["instance_id"], TERMINATED, released=True)
    found = client.find(name)
    if found is not None:
        store.record_vendor_instance(
            name, platform, found.id, price=found.price_per_hour, state=found.state
        )
    return found


def _create(
    store: Store, client: VendorClient, platform: str, name: str, ask: VendorUp, say: Say
) -> Instance:
    offer = pick_offer(client, ask)
    say(f"renting {offer.gpu} ×{offer.count} on {platform} at {offer.price_per_hour:g}/h")
    image = ask.image or client.default_image
    request = CreateRequest(name, offer, image, ask.disk_gb, ask.bid, _public_key(ask))
    for attempt in (1, 2):
        try:
            made = client.create(request)
            break
        except VendorError as exc:
            if exc.instance_id:  # failed, yet an instance exists and bills: record it
                _record(store, name, platform, exc.instance_id, offer, ask, ERROR)
                exc.fix = f"instance {exc.instance_id} was recorded: `rgt down {name}` releases it"
                raise
            if exc.code != "ambiguous" or attempt == 2:
                _add_next_offer(exc, client, ask, offer)
                raise
            say(f"create got no clear answer ({exc.message}); listing before trying again")
            found = client.find(name)
            if found is not None:
                made = found
                break
    _record(store, name, platform, made.id, offer, ask, made.state, made.price_per_hour)
    say(f"{name}: {platform} instance {made.id} created and recorded")
    return made


def _record(
    store: Store,
    name: str,
    platform: str,
    instance_id: str,
    offer: Offer,
    ask: VendorUp,
    state: str,
    price: float | None = None,
) -> None:
    store.record_vendor_instance(
        name,
        platform,
        instance_id,
        price=price if price is not None else offer.price_per_hour,
        state=state,
        disk_gb=ask.disk_gb,
    )


def pick_offer(client: VendorClient, ask: VendorUp) -> Offer:
    if not ask.gpu:
        raise VendorError(
            "renting through the API needs --gpu", backend=client.vendor, fix="add --gpu A100:1"
        )
    offers = client.offers(ask.gpu, spot=ask.spot, region=ask.region)
    if ask.offer:
        offers = [o for o in offers if o.id == ask.offer]
    if not offers:
        raise VendorError(
            f"{client.vendor} offers no {ask.gpu}{' spot' if ask.spot else ''} now",
            backend=client.vendor,
            code="no_capacity",
            fix=f"see `rgt offers {client.vendor} --gpu {ask.gpu}`",
        )
    best = offers[0]
    if ask.max_price is not None and best.price_per_hour > ask.max_price:
        raise GateRefused(
            f"the cheapest {ask.gpu} costs {best.price_per_hour:g}/h, above --max-price",
            [f"{best.price_per_hour:g}/h > {ask.max_price:g}/h"],
            fix="raise --max-price, or wait for a cheaper offer (`rgt offers`)",
        )
    return best


def _add_next_offer(exc: VendorError, client: VendorClient, ask: VendorUp, tried: Offer) -> None:
    """No capacity: keep the vendor's message, name the next cheapest offer in the fix."""
    try:
        others = [o for o in client.offers(ask.gpu or "", spot=ask.spot) if o != tried]
    except RgtError:
        others = []
    if others and exc.fix is None:
        o = others[0]
        exc.fix = (
            f"next cheapest: {o.gpu} in {o.region or 'any region'} at "
            f"{o.price_per_hour:g}/h (--offer {o.id})"
        )


def _public_key(ask: VendorUp) -> str | None:
    if not ask.identity_file:
        return None
    pub = Path(ask.identity_file + ".pub").expanduser()
    return pub.read_text().strip() if pub.is_file() else None


def _wait_running(client: VendorClient, instance: Instance, timeout_s: float, say: Say) -> Instance:
    deadline = time.monotonic() + timeout_s
    started, last = time.monotonic(), ""
    current: Instance | None = instance
    while True:
        if current is not None and current.reachable:
            return current
        if current is None or current.state in (ERROR, TERMINATED):
            raise VendorError(
                f"{client.vendor} instance {instance.id} is "
                f"{current.raw_state if current else 'gone'}",
                backend=client.vendor,
                instance_id=instance.id,
                fix=f"`rgt down {instance.name}` releases what is recorded",
            )
        waited = time.monotonic() - started
        note = f"{instance.name}: {current.raw_state or current.state} ({waited:.0f}s)"
        if note != last:
            say(note)
            last = note
        if time.monotonic() > deadline:
            raise VendorError(
                f"{client.vendor} instance {instance.id} not running after {timeout_s:g}s",
                backend=client.vendor,
                instance_id=instance.id,
                fix=f"`rgt up {client.vendor} --name {instance.name} --resume` waits again; "
                f"`rgt down {instance.name}` releases it",
            )
        time.sleep(min(poll_interval(), max(0.05, deadline - time.monotonic())))
        current = client.get(instance.id)
