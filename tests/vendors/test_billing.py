"""The money lines of `status`/`watch`/the gate: no vendor call without a key, the orphans
line from a cached glance with a short deadline, budget thresholds announced once (event and
webhook), and the dated danger clocks of SSH-line platforms."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from rgt.models import Machine
from rgt.state.store import Store
from rgt.vendors import _ledger as ledger
from rgt.vendors.billing import summary
from rgt.watch.events import parse_time
from tests import clirun
from tests.vendors.fakes import KEY_VARIABLES
from tests.vendors.fakes._server import FakeVendor

StartFake = Callable[..., FakeVendor]


def rgt(*args: str) -> subprocess.CompletedProcess[str]:
    return clirun.rgt(*args, timeout=60)


def _machine(name: str, profile: str = "generic-ssh", price: float | None = None) -> None:
    conn = {"host": "203.0.113.9", "port": 22, "user": "root"}
    Store.open().add_machine(Machine(name, "ssh", profile, conn, "/root/rgt", price))


@pytest.fixture
def hook(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[bytes]]:
    """A webhook receiver on loopback; its URL is in $HOOK (what `--notify env:HOOK` reads)."""
    bodies: list[bytes] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            bodies.append(self.rfile.read(int(self.headers["Content-Length"])))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setenv("HOOK", f"http://127.0.0.1:{server.server_address[1]}/hook")
    yield bodies
    server.shutdown()
    server.server_close()


def test_status_without_a_key_asks_no_vendor(
    fake_for: StartFake, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = fake_for("runpod")
    for variable in KEY_VARIABLES.values():
        monkeypatch.delenv(variable, raising=False)
    _machine("box", price=2.0)
    proc = rgt("status", "--json")
    assert proc.returncode == 0, proc.stderr
    billing = json.loads(proc.stdout)["billing"]
    assert billing["orphans"] is None and fake.requests == []  # not one call
    assert [c["machine"] for c in billing["costs"]] == ["box"]
    assert billing["lines"][0].startswith("cost so far: box ")


def test_the_orphans_line_counts_and_is_cached_until_rgt_changes_its_records(
    fake_for: StartFake,
) -> None:
    fake = fake_for("runpod")
    stray = fake.create_behind_rgts_back("made-in-the-console")
    first = summary(Store.open())
    assert [o["instance_id"] for o in first["orphans"]["orphans"]] == [stray]
    assert first["orphans"]["checked"] == ["runpod"]  # only vendors with a key are asked
    assert "orphans: 1 instance bills on this account that rgt does not know" in first["lines"][-1]
    calls = len(fake.requests)
    assert summary(Store.open())["orphans"]["orphans"] == first["orphans"]["orphans"]
    assert len(fake.requests) == calls  # the cached listing
    Store.open().record_vendor_instance("adopted", "runpod", stray, price=0.5, state="running")
    assert summary(Store.open())["orphans"]["orphans"] == []  # recomputed from the records
    assert summary(Store.open())["orphans"]["orphans"] == []


def test_a_vendor_that_never_answers_costs_one_short_deadline(
    fake_for: StartFake, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_for("runpod")  # sets the key
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)  # accepts connections, never answers
    monkeypatch.setenv("RGT_RUNPOD_API_URL", f"http://127.0.0.1:{silent.getsockname()[1]}")
    monkeypatch.setenv("RGT_VENDOR_GLANCE_TIMEOUT_S", "0.3")
    try:
        started = time.monotonic()
        data = summary(Store.open())
        assert time.monotonic() - started < 2.0
    finally:
        silent.close()
    assert data["orphans"]["orphans"] == [] and "runpod" in data["orphans"]["not_checked"]
    assert "orphans: unknown" in data["lines"][-1]  # never "none" for a vendor not listed
    assert "runpod could not list" in data["lines"][-1]


def test_a_budget_is_announced_once_at_80_and_100_percent(
    hook: list[bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    _machine("dear", price=3_600_000.0)  # 1000 a second: past 100 % of 1 at once
    _machine("cheap", price=0.01)
    ledger.set_budget("dear", 1.0, "env:HOOK")
    ledger.set_budget("cheap", 1000.0, "env:HOOK")
    proc = rgt("status", "--json")
    assert proc.returncode == 0, proc.stderr
    budgets = {b["machine"]: b for b in json.loads(proc.stdout)["billing"]["budgets"]}
    assert [e["kind"] for e in budgets["dear"]["events"]] == ["budget_80", "budget_100"]
    assert all(e["notify"] == "sent" for e in budgets["dear"]["events"])
    assert budgets["cheap"]["events"] == [] and budgets["cheap"]["percent"] < 80
    assert [json.loads(b)["kind"] for b in hook] == ["budget_80", "budget_100"]
    assert "rgt down dear" in json.loads(hook[0])["text"]  # it says; it never stops the machine
    events = ledger.machine_events("dear")
    assert [(e["kind"], e["severity"]) for e in events] == [
        ("budget_80", "warning"),
        ("budget_100", "error"),
    ]
    summary(Store.open(), vendors=False)  # looked at again: nothing new is announced
    assert len(hook) == 2 and len(ledger.machine_events()) == 2
    assert Store.open().machine("dear").active
    url = os.environ["HOOK"].encode()
    for name in (ledger.BUDGETS, ledger.EVENTS):  # the source is kept, never the URL
        assert url not in (Store.open().path.parent / name).read_bytes()


def test_budget_options_are_refused_before_anything_is_rented(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ssh = ("--ssh", "ssh root@203.0.113.9")
    url = rgt("up", "generic-ssh", "--name", "b", "--price", "1", "--budget", "5", *ssh,
              "--notify", "https://hooks.example/x", "--json")  # fmt: skip
    assert url.returncode == 2 and "bearer secret" in json.loads(url.stdout)["message"]
    no_price = rgt("up", "generic-ssh", "--name", "b", "--budget", "5", *ssh)
    assert no_price.returncode == 2 and "--budget needs a price" in no_price.stderr
    assert ledger.budgets() == {}


def test_an_autodl_machine_gets_a_dated_danger_clock_after_down() -> None:
    _machine("adl", profile="autodl", price=2.0)
    _machine("pod", profile="runpod", price=2.0)
    for name in ("adl", "pod"):
        Store.open().release_machine(name)
    released = parse_time(Store.open().machine("adl").released)
    assert released is not None
    data = summary(Store.open(), vendors=False)
    (clock,) = data["clocks"]
    due = released + timedelta(days=15)
    assert (clock["machine"], clock["clock"]) == ("adl", "stopped-auto-release")
    assert clock["date"] == due.strftime("%Y-%m-%dT%H:%M:%SZ")
    (event,) = ledger.machine_events("adl")
    assert event["kind"] == "danger_clock" and event["detail"]["date"] == clock["date"]
    assert due.strftime("%Y-%m-%d") in event["next"]
    assert any(
        line.startswith("danger clock (AutoDL): if adl is left stopped, ") for line in data["lines"]
    )
    summary(Store.open(), vendors=False)
    assert len(ledger.machine_events()) == 1  # one event per clock, not per look
    assert datetime.now(released.tzinfo) < due
