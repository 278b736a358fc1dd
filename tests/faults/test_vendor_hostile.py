"""A vendor API that answers with hostile bodies, through the real CLI.

Each trial starts the vendor's local fake (tests/vendors/fakes: a loopback HTTP server in the
vendor's documented shapes), records a rented instance of machine ``box`` in a fresh RGT_HOME
with a human's approval, turns the fake hostile, and runs `rgt down box --yes --json` (or
`rgt machines --orphans`, `rgt offers`). Every answer of ``fakes/hostile.py`` is tried, each on
a client drawn by the seeded RNG; the liar (accepts terminate, runs on) on every client.

Verdicts: never a false "released" (exit 0 with ``released`` only when the fake really deleted
the instance); otherwise rgt's clear error saying the machine is NOT released, its meter may
still run, with the vendor's console; the machine and its instance stay unreleased in the
store; progress lines on stderr while `down` waits; an orphan listing that failed says "could
not list"; a garbled catalogue is never "unknown GPU".
"""

from __future__ import annotations

import getpass
from collections.abc import Iterator
from pathlib import Path

import pytest

from rgt.models import ACTION_DOWN, Machine
from rgt.state.store import Store, utcnow
from tests.faults.harness import Outcome, assert_clear_error, rgt, rng
from tests.vendors.fakes import FAKES, KEY_VARIABLES, URL_VARIABLES
from tests.vendors.fakes._server import FakeInstance, FakeVendor
from tests.vendors.fakes.hostile import ANSWERS, ENDPOINTS, hostile

VENDORS = sorted(FAKES)
CONSOLES = {  # where a human sees (and can terminate) the account's instances
    "runpod": "https://www.runpod.io/console/pods",
    "vastai": "https://cloud.vast.ai/instances/",
    "lambda": "https://cloud.lambda.ai/instances",
    "paperspace": "https://console.paperspace.com/machines",
}
KNOBS = {  # short waits, so a trial takes seconds: the rules are the same at any length
    "RGT_VENDOR_POLL_S": "0.05",
    "RGT_VENDOR_CONFIRM_S": "0.5",
    "RGT_VENDOR_BACKOFF_S": "0.01",
    "RGT_VENDOR_DEADLINE_S": "0.4",
}


def _drawn(what: str) -> list[tuple[str, str]]:
    """Every hostile answer once, each on a vendor drawn by the seeded RNG."""
    return [(rng("vendor-hostile", what, kind).choice(VENDORS), kind) for kind in ANSWERS]


@pytest.fixture
def vendor_fake() -> Iterator[list[FakeVendor]]:
    started: list[FakeVendor] = []
    yield started
    for fake in started:
        fake.stop()


def _rented(
    home: Path, fakes: list[FakeVendor], vendor: str
) -> tuple[FakeVendor, FakeInstance, dict[str, str]]:
    """A fake vendor with box's running instance; box registered, its release approved."""
    fake = FAKES[vendor](boot_polls=0, gone_polls=0)
    env = {URL_VARIABLES[vendor]: fake.start(), KEY_VARIABLES[vendor]: fake.key, **KNOBS}
    fakes.append(fake)
    with fake.lock:
        inst = fake.add("box", fake.default_offer(), 0.5)
    store = Store.open()
    root = home / "machines" / "box"
    root.mkdir(parents=True)
    store.add_machine(Machine("box", "local", "local", {}, str(root), 0.5, utcnow()))
    store.record_vendor_instance("box", vendor, inst.id, price=0.5, state="running", disk_gb=50)
    store.add_approval("box", ACTION_DOWN, getpass.getuser(), "/dev/pts/fault-trial")
    return fake, inst, env


def _no_false_release(out: Outcome, fake: FakeVendor, inst: FakeInstance, vendor: str) -> None:
    """Released only with the instance really gone; else a clear error and nothing released."""
    doc = out.doc() or {}
    if out.code == 0:
        assert doc.get("released") is True and inst.wanted == "deleted" and not fake.lied, (
            f"a false release: rgt says released, the vendor still bills\n{out}"
        )
        return
    assert doc.get("released") is not True, f"exit {out.code} yet released:\n{out}"
    console = CONSOLES[vendor]
    assert_clear_error(out, names=["NOT released", "meter may still run", console])
    store = Store.open()
    assert store.machine("box").active, f"box was marked released:\n{out}"
    assert [r["released"] for r in store.vendor_instances("box")] == [None]


@pytest.mark.parametrize(("vendor", "kind"), _drawn("read"), ids=lambda x: str(x))
def test_down_with_hostile_state_reads(
    rgt_home: Path, vendor_fake: list[FakeVendor], vendor: str, kind: str
) -> None:
    fake, inst, env = _rented(rgt_home, vendor_fake, vendor)
    method, path = ENDPOINTS[vendor].read
    fake.faults.extend(hostile(kind, method, path.replace("{id}", inst.id)))
    out = rgt(rgt_home, "down", "box", "--yes", "--json", **env)
    _no_false_release(out, fake, inst, vendor)
    assert f"waiting for {vendor} to confirm {inst.id} is gone" in out.stderr, str(out)


@pytest.mark.parametrize(("vendor", "kind"), _drawn("terminate"), ids=lambda x: str(x))
def test_down_with_a_hostile_terminate_answer(
    rgt_home: Path, vendor_fake: list[FakeVendor], vendor: str, kind: str
) -> None:
    fake, inst, env = _rented(rgt_home, vendor_fake, vendor)
    method, path = ENDPOINTS[vendor].terminate
    acted = rng("vendor-hostile", "acted", kind).random() < 0.5  # the vendor acted, or not
    for fault in hostile(kind, method, path.replace("{id}", inst.id)):
        fault.act = acted
        fake.faults.append(fault)
    out = rgt(rgt_home, "down", "box", "--yes", "--json", **env)
    _no_false_release(out, fake, inst, vendor)


@pytest.mark.parametrize("vendor", VENDORS)
def test_down_against_a_liar(rgt_home: Path, vendor_fake: list[FakeVendor], vendor: str) -> None:
    """The vendor accepts the terminate and keeps the instance running: `down` must say so,
    with progress lines on stderr while it waits, and a clear timeout."""
    fake, inst, env = _rented(rgt_home, vendor_fake, vendor)
    fake.liar = True
    out = rgt(rgt_home, "down", "box", "--yes", "--json", **env)
    _no_false_release(out, fake, inst, vendor)
    assert out.code != 0 and fake.lied == [inst.id] and fake.billed() == [inst]
    assert "has not confirmed" in str((out.doc() or {}).get("message")), str(out)
    assert f"box: waiting for {vendor} to confirm {inst.id} is gone" in out.stderr, str(out)


@pytest.mark.parametrize(("vendor", "kind"), _drawn("listing"), ids=lambda x: str(x))
def test_orphans_with_a_hostile_listing(
    rgt_home: Path, vendor_fake: list[FakeVendor], vendor: str, kind: str
) -> None:
    fake, inst, env = _rented(rgt_home, vendor_fake, vendor)
    Store.open().set_vendor_instance_state(vendor, inst.id, "terminated", released=True)
    method, path = ENDPOINTS[vendor].listing  # the instance now bills unknown to rgt
    fake.faults.extend(hostile(kind, method, path))
    out = rgt(rgt_home, "machines", "--orphans", "--json", **env)
    doc = out.doc() or {}
    assert out.code == 0 and vendor not in doc.get("checked", [vendor]), str(out)
    assert str(doc["not_checked"][vendor]).startswith("could not list: "), str(out)


@pytest.mark.parametrize(("vendor", "kind"), _drawn("catalog"), ids=lambda x: str(x))
def test_offers_with_a_hostile_catalog(
    rgt_home: Path, vendor_fake: list[FakeVendor], vendor: str, kind: str
) -> None:
    fake, _, env = _rented(rgt_home, vendor_fake, vendor)
    method, path = ENDPOINTS[vendor].catalog
    fake.faults.extend(hostile(kind, method, path))
    out = rgt(rgt_home, "offers", vendor, "--gpu", "A100:1", "--json", **env)
    doc = assert_clear_error(out, names=[vendor])
    assert doc["error"] != "UsageError" and "unknown GPU" not in str(doc["message"]), str(out)
