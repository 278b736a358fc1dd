"""Hostile answers: one suite, run on each vendor client against its local fake.

Every answer of ``fakes/hostile.py`` (an HTML page or nothing with a 200, JSON cut short, the
wrong envelope, a proxy's 404 page, a redirect to a login, 429s, 5xx, a hang past the
deadline, an endless body, a gzip bomb), on each request rgt's money depends on: the read that
confirms a terminate, the terminate itself, the listing behind ``--orphans`` and the catalogue
behind ``offers``; and a vendor that accepts a terminate and keeps the instance running.

The rule under test: a vendor answer is parsed or it is an error. Nothing but an explicit
not-found makes an instance "gone", so no hostile answer ever makes ``down`` say released while
the fake still bills; the listing says "could not list", never "none"; ``offers`` says the
vendor's answer was garbled, never "unknown GPU".
"""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest

import rgt.vendors.release as release_module
from rgt.errors import KeyRefusedError, UsageError, VendorError
from rgt.state.store import Store
from rgt.vendors import client_for
from rgt.vendors._model import RUNNING
from rgt.vendors.orphans import list_accounts
from rgt.vendors.release import release
from tests.vendors.fakes import FAKES
from tests.vendors.fakes._server import FakeInstance, FakeVendor
from tests.vendors.fakes.hostile import ANSWERS, ENDPOINTS, hostile

StartFake = Callable[..., FakeVendor]
VENDORS = sorted(FAKES)
# The fast tier tries four answers on each client, the full suite every one.
FAST = ("html_200", "empty_200", "wrong_envelope", "not_found_html")
CASES = [
    pytest.param(v, k, id=f"{v}-{k}", marks=() if k in FAST else pytest.mark.slow)
    for v in VENDORS
    for k in ANSWERS
]
CAP = 16 * 2**20  # the client's body cap (rgt.vendors._answer.MAX_BODY_BYTES)


@pytest.fixture(autouse=True)
def quick(monkeypatch: pytest.MonkeyPatch) -> None:
    """Short backoffs, deadline and confirm window, so every hostile trial takes ~1 s at most."""
    monkeypatch.setenv("RGT_VENDOR_BACKOFF_S", "0.01")
    monkeypatch.setenv("RGT_VENDOR_DEADLINE_S", "0.4")
    monkeypatch.setenv("RGT_VENDOR_POLL_S", "0.05")
    monkeypatch.setattr(release_module, "CONFIRM_TIMEOUT_S", 0.3)


def _running(fake_for: StartFake, vendor: str) -> tuple[FakeVendor, FakeInstance]:
    fake = fake_for(vendor, boot_polls=0, gone_polls=0)
    with fake.lock:
        inst = fake.add("box", fake.default_offer(), 0.5)
    return fake, inst


def _aim(
    fake: FakeVendor,
    kind: str,
    where: tuple[str, str],
    inst: FakeInstance,
    *,
    times: int = 0,
    act: bool = False,
) -> None:
    """Answer ``kind`` to ``where`` (on every request, or ``times``); ``act``: the vendor did
    the work first and only its answer is hostile."""
    method, path = where
    for fault in hostile(kind, method, path.replace("{id}", inst.id), times=times):
        fault.act = act
        fake.faults.append(fault)


def _recorded(vendor: str, inst: FakeInstance) -> Store:
    store = Store.open()
    store.record_vendor_instance("box", vendor, inst.id, price=0.5, state=RUNNING, disk_gb=50)
    return store


def _assert_not_released(store: Store, vendor: str, error: VendorError, stderr: str) -> None:
    """The machine stays unreleased and the error says what that means for money."""
    (row,) = store.vendor_instances("box")
    assert row["released"] is None, "a hostile answer made rgt record a release"
    assert "NOT released" in error.message and "meter may still run" in error.message
    assert client_for(vendor).console_url in str(error.fix)
    assert "rgt down box" in str(error.fix)
    assert "waiting for" in stderr or "terminate" in error.message or error.code != "unconfirmed"


@pytest.mark.parametrize(("vendor", "kind"), CASES)
def test_a_hostile_state_read_is_an_error_never_gone(
    fake_for: StartFake, vendor: str, kind: str
) -> None:
    fake, inst = _running(fake_for, vendor)
    _aim(fake, kind, ENDPOINTS[vendor].read, inst)
    client = client_for(vendor)
    try:
        with pytest.raises(VendorError) as caught:
            got = client.get(inst.id)
            print("read as", got)  # None here was "gone": a false release
    finally:
        client.close()
    assert not isinstance(caught.value, KeyRefusedError) and caught.value.fix


@pytest.mark.parametrize(("vendor", "kind"), CASES)
def test_one_hostile_answer_is_retried_like_a_5xx(
    fake_for: StartFake, vendor: str, kind: str
) -> None:
    fake, inst = _running(fake_for, vendor)
    _aim(fake, kind, ENDPOINTS[vendor].read, inst, times=1)
    client = client_for(vendor)
    try:
        got = client.get(inst.id)
    finally:
        client.close()
    assert got is not None and got.id == inst.id and got.state == RUNNING
    method, path = ENDPOINTS[vendor].read
    reads = [r for r in fake.requests if r[:2] == (method, path.replace("{id}", inst.id))]
    assert len(reads) == len(hostile(kind, method, path)) + 1  # each hostile answer, then one more


@pytest.mark.parametrize(("vendor", "kind"), CASES)
def test_down_is_never_released_on_hostile_reads(
    fake_for: StartFake, vendor: str, kind: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The terminate goes through; every read after it is hostile: rgt cannot know, so the
    machine stays unreleased, the error says its meter may still run and names the console."""
    fake, inst = _running(fake_for, vendor)
    store = _recorded(vendor, inst)
    _aim(fake, kind, ENDPOINTS[vendor].read, inst)
    with pytest.raises(VendorError) as caught:
        release(store, "box")
    _assert_not_released(store, vendor, caught.value, capsys.readouterr().err)


@pytest.mark.parametrize("acted", [False, True], ids=["lost", "acted"])
@pytest.mark.parametrize(("vendor", "kind"), CASES)
def test_a_hostile_terminate_answer_never_yields_a_false_release(
    fake_for: StartFake, vendor: str, kind: str, acted: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    """Hostile answers to the terminate itself: whether the vendor acted (``acted``) or not,
    `released` comes only with the instance really gone at the fake."""
    fake, inst = _running(fake_for, vendor)
    store = _recorded(vendor, inst)
    _aim(fake, kind, ENDPOINTS[vendor].terminate, inst, act=acted)
    try:
        done = release(store, "box")
    except VendorError as exc:
        _assert_not_released(store, vendor, exc, capsys.readouterr().err)
        return
    assert done is not None and inst.wanted == "deleted" and fake.billed() == []
    assert "confirms it is gone" in done["meter"]


@pytest.mark.parametrize(("vendor", "kind"), CASES)
def test_a_hostile_listing_is_could_not_list_never_none(
    fake_for: StartFake, vendor: str, kind: str
) -> None:
    fake, inst = _running(fake_for, vendor)  # one instance bills, unknown to rgt: an orphan
    _aim(fake, kind, ENDPOINTS[vendor].listing, inst)
    listings, skipped = list_accounts()
    assert vendor not in listings, f"a hostile listing read as {listings.get(vendor)}"
    assert skipped[vendor].startswith("could not list: ")


@pytest.mark.parametrize(("vendor", "kind"), CASES)
def test_a_hostile_catalog_is_an_error_not_an_unknown_gpu(
    fake_for: StartFake, vendor: str, kind: str
) -> None:
    fake, inst = _running(fake_for, vendor)
    _aim(fake, kind, ENDPOINTS[vendor].catalog, inst)
    client = client_for(vendor)
    try:
        with pytest.raises(VendorError) as caught:
            client.offers("A100:1")
    except UsageError as exc:  # what a garbled catalogue said before: "unknown GPU 'A100'"
        pytest.fail(f"a garbled catalogue read as {exc.message}")
    finally:
        client.close()
    assert not isinstance(caught.value, KeyRefusedError) and caught.value.fix


@pytest.mark.parametrize("vendor", VENDORS)
def test_a_liar_that_accepts_terminate_and_runs_on_is_never_released(
    fake_for: StartFake, vendor: str, capsys: pytest.CaptureFixture[str]
) -> None:
    fake, inst = _running(fake_for, vendor)
    fake.liar = True
    store = _recorded(vendor, inst)
    with pytest.raises(VendorError) as caught:
        release(store, "box")
    err = capsys.readouterr().err
    assert fake.lied == [inst.id] and fake.billed() == [inst]
    _assert_not_released(store, vendor, caught.value, err)
    assert caught.value.code == "unconfirmed" and "after 0.3s" in caught.value.message
    assert re.search(rf"box: waiting for {vendor} to confirm {inst.id} is gone: \w+", err), err


@pytest.mark.parametrize(("vendor", "kind"), CASES)
def test_a_liar_behind_hostile_reads_is_never_released(
    fake_for: StartFake, vendor: str, kind: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The vendor accepts the terminate, runs on, and its state reads are hostile: the case
    where reading garbage as "gone" cost money (the instance bills on)."""
    fake, inst = _running(fake_for, vendor)
    fake.liar = True
    store = _recorded(vendor, inst)
    _aim(fake, kind, ENDPOINTS[vendor].read, inst)
    with pytest.raises(VendorError) as caught:
        release(store, "box")
    assert fake.billed() == [inst]
    _assert_not_released(store, vendor, caught.value, capsys.readouterr().err)


@pytest.mark.parametrize("kind", ["huge_body", "gzip_bomb"])
@pytest.mark.parametrize("vendor", VENDORS)
def test_a_flood_is_cut_at_the_cap(fake_for: StartFake, vendor: str, kind: str) -> None:
    fake, inst = _running(fake_for, vendor)
    _aim(fake, kind, ENDPOINTS[vendor].read, inst)
    client = client_for(vendor)
    try:
        with pytest.raises(VendorError) as caught:
            client.get(inst.id)
    finally:
        client.close()
    read = int(re.findall(r"stopped reading at (\d+)", caught.value.message)[0])
    assert CAP < read <= CAP + 2**20, read  # the most any answer holds in memory
    print(f"largest body read: {read} bytes")


def test_a_parsed_empty_catalogue_says_nothing_is_offered(fake_for: StartFake) -> None:
    """Lambda sells no spot capacity: that is "nothing offered", not "unknown GPU 'A100'"."""
    fake_for("lambda")
    client = client_for("lambda")
    try:
        with pytest.raises(VendorError) as caught:
            client.offers("A100:1", spot=True)
    finally:
        client.close()
    assert caught.value.code == "no_capacity"
    assert caught.value.message == "lambda offers nothing spot with 1 GPU(s) now"


@pytest.mark.parametrize("vendor", VENDORS)
def test_a_terminate_whose_answer_was_lost_is_released_by_the_next_down(
    fake_for: StartFake, vendor: str
) -> None:
    """The vendor terminated, but each answer to it was an HTML page (a proxy, every try):
    the first `down` is not released; the next one finds the instance gone and is."""
    fake, inst = _running(fake_for, vendor)
    store = _recorded(vendor, inst)
    _aim(fake, "html_200", ENDPOINTS[vendor].terminate, inst, act=True)
    with pytest.raises(VendorError):
        release(store, "box")
    fake.faults.clear()
    done = release(store, "box")
    assert done is not None and "confirms it is gone" in done["meter"]
    assert [r["released"] is not None for r in store.vendor_instances("box")] == [True]
