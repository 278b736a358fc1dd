"""$RGT_HOME/machine-events.jsonl: every kind the ledger writes matches
src/rgt/schemas/machine_events.schema.json, the tolerant reader skips a bad line and names its
path, line and fix, and `rgt watch` shows the events newest first, bounded."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from rgt.models import Machine
from rgt.state.store import Store
from rgt.vendors import _ledger as ledger
from rgt.vendors import machine_events
from rgt.vendors.billing import summary
from tests import clirun
from tests.vendors.fakes._server import FakeVendor


def _schema() -> dict[str, Any]:
    text = resources.files("rgt").joinpath("schemas/machine_events.schema.json").read_text()
    schema: dict[str, Any] = json.loads(text)
    return schema


def _validator() -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(_schema())


def _machine(name: str, profile: str, price: float | None = 2.0) -> None:
    conn = {"host": "203.0.113.9", "port": 22, "user": "root"}
    Store.open().add_machine(Machine(name, "ssh", profile, conn, "/root/rgt", price))


def _events_file() -> Path:
    return Store.open().path.parent / ledger.EVENTS


def test_every_kind_the_ledger_writes_matches_the_schema(
    fake_for: Callable[..., FakeVendor],
) -> None:
    fake = fake_for("runpod")
    store = Store.open()
    _machine("dear", "generic-ssh", price=3_600_000.0)  # past 100 % of its budget at once
    ledger.set_budget("dear", 1.0, None)
    _machine("adl", "autodl")
    store.release_machine("adl")  # its 15-day clock starts
    for name in ("spot", "lost"):  # active machines whose instances the vendor changed
        _machine(name, "runpod")
        with fake.lock:
            instance = fake.add(name, fake.default_offer(), 0.5)
        store.record_vendor_instance(name, "runpod", instance.id, price=0.5, state="running")
    fake.instances[store.vendor_instances("spot")[0]["instance_id"]].wanted = "stopped"
    fake.instances.pop(store.vendor_instances("lost")[0]["instance_id"])
    summary(store)  # announces the budget and the clock; the glance sees the vendor's states
    lines = _events_file().read_text().splitlines()
    for line in lines:
        _validator().validate(json.loads(line))
    events = ledger.machine_events()
    assert len(events) == len(lines) == 5
    kinds = {(e["machine"], e["kind"]) for e in events}
    assert {("dear", "budget_80"), ("dear", "budget_100"), ("adl", "danger_clock")} <= kinds
    states = {e["machine"]: e["detail"] for e in events if e["kind"] == "vendor_state"}
    assert (states["spot"]["reported"], states["spot"]["interrupted"]) == ("stopped", True)
    assert states["lost"]["reported"] == "gone"
    summary(store)  # seen again: nothing new
    assert len(ledger.machine_events()) == 5
    assert set(ledger.REQUIRED) <= set(_schema()["required"])  # the reader asks no more


BAD = [
    "{not json",
    '["a list"]',
    json.dumps({"time": "t", "machine": "m", "key": "k", "severity": "info", "next": "x"}),
    json.dumps(
        {"time": "t", "machine": "m", "kind": "k", "key": "k", "severity": "loud", "next": "x"}
    ),
]


def test_a_bad_line_is_skipped_with_its_path_line_and_fix() -> None:
    ledger.add_event("a", "budget_80", "k1", {"spent": 1.0}, "pull first", "warning")
    with open(_events_file(), "a") as handle:
        handle.write("\n".join(BAD) + "\n")
    ledger.add_event("a", "budget_100", "k2", {"spent": 2.0}, "pull first", "error")
    events, problems = ledger.read_events()
    assert [e["key"] for e in events] == ["k1", "k2"]  # a bad line never hides the others
    assert len(problems) == len(BAD)
    for number, problem in enumerate(problems, start=2):
        assert f"{_events_file()} line {number}" in problem
    assert all("fix: delete that line" in p for p in problems)
    for line in BAD:  # what the reader refuses, the schema refuses too
        document = json.loads(line) if line.startswith(('{"', "[")) else None
        assert document is None or not _validator().is_valid(document)
    assert summary(Store.open(), vendors=False)["lines"][-len(BAD) + 1 :] == problems[:3]


def _watch(*args: str) -> subprocess.CompletedProcess[str]:
    proc = clirun.rgt("watch", "--once", *args, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc


@pytest.mark.slow
def test_watch_shows_machine_events_newest_first_and_bounded() -> None:
    for n in range(machine_events.SHOWN + 4):
        ledger.add_event("box", "vendor_state", f"k{n}", {}, f"step {n}", "warning")
    shown = json.loads(_watch("--json").stdout)["billing"]["events"]
    assert shown["total"] == machine_events.SHOWN + 4
    assert [e["key"] for e in shown["events"]] == [
        f"k{n}" for n in range(machine_events.SHOWN + 3, 3, -1)
    ]
    human = _watch().stdout
    assert "box vendor_state: step 13" in human and "step 0" not in human
    assert f"5 of {machine_events.SHOWN + 4} shown" in human
