"""The money lines of `rgt status`, `rgt watch` and the gate's notes: cost so far per machine
(the vendor's price × uptime), ``--budget`` thresholds, stopped instances kept with
``--keep-volume``, the danger clocks of SSH-line platforms, and the orphans line.

Everything but the orphans line is computed from the state store with no network call. The
orphans line asks only vendors with a key set (none set: no network at all), one try with a
3 s deadline (``RGT_VENDOR_GLANCE_TIMEOUT_S``), and keeps the account listings for
``RGT_VENDOR_GLANCE_TTL_S`` (default 120 s) in ``$RGT_HOME/cache/vendor-instances.json``; a
change rgt makes to its own vendor records (an `up`, a `down`) makes that listing stale.

Budgets and clocks are announced as machine events (``rgt.vendors._ledger``) the first time
any of these commands sees them crossed; a budget never stops a machine by itself. The newest
machine events (``events``: budgets, clocks, vendor state changes) come with every summary.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Collection
from datetime import datetime, timedelta, timezone
from typing import Any

from rgt.agent.jobfiles import parse_time
from rgt.errors import RgtError
from rgt.models import Machine
from rgt.state.store import Store
from rgt.vendors import VENDORS, is_vendor
from rgt.vendors import _ledger as ledger
from rgt.vendors import machine_events as events
from rgt.vendors._keys import configured
from rgt.vendors.orphans import classify, cost_so_far, list_accounts

GLANCE_TIMEOUT_S = 3.0
STOPPED = "stopped"  # rgt.vendors._model.STOPPED, not imported: `status` stays light
CACHE = ("cache", "vendor-instances.json")


def summary(
    store: Store, only: Collection[str] | None = None, *, vendors: bool = True
) -> dict[str, Any]:
    """Everything above for every machine (``only``: these machines), with one line each."""
    now = datetime.now(timezone.utc)
    machines = [m for m in store.machines() if only is None or m.name in only]
    costs = [machine_cost(store, m, now) for m in machines]
    data: dict[str, Any] = {
        "costs": [c for c in costs if c["active"] and c["price_per_hour"] is not None],
        "kept": kept_instances(store, machines),
        "budgets": check_budgets(costs),
        "clocks": danger_clocks(machines, now),
        "orphans": glance_orphans(store) if vendors else None,
        "events": events.recent(only),  # after the glance: it may add vendor_state events
    }
    data["lines"] = lines(data) + events.lines(data["events"])
    return data


def machine_cost(store: Store, machine: Machine, now: datetime) -> dict[str, Any]:
    rows = store.vendor_instances(machine.name)
    if rows:  # the vendor's price, per instance; a kept (stopped) one stopped computing at `down`
        spent = [
            cost_so_far(r, now, machine.released if r["state"] == STOPPED else None) for r in rows
        ]
        price, source = rows[0]["price_per_hour"], "vendor"
        total = None if all(s is None for s in spent) else round(sum(s or 0 for s in spent), 4)
    else:
        price, source = machine.price_per_hour, "--price"
        start, end = _time(machine.registered), _time(machine.released) or now
        total = None
        if price is not None and start is not None:
            total = round(max(0.0, (end - start).total_seconds()) / 3600 * price, 4)
    return {
        "machine": machine.name,
        "active": machine.active,
        "price_per_hour": price,
        "price_source": source if price is not None else None,
        "cost_so_far": total,
    }


def kept_instances(store: Store, machines: list[Machine]) -> list[dict[str, Any]]:
    """Instances stopped by `down --keep-volume`: released machines whose instance still bills."""
    released = {m.name for m in machines if not m.active}
    return [
        {k: r[k] for k in ("machine", "vendor", "instance_id", "state", "disk_gb")}
        for r in store.vendor_instances()
        if r["machine"] in released and r["released"] is None
    ]


def check_budgets(costs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each budgeted machine's spend; a threshold crossed for the first time is announced."""
    budgets, found = ledger.budgets(), []
    for cost in costs:
        entry = budgets.get(cost["machine"])
        if entry is None or not cost["active"] or cost["cost_so_far"] is None:
            continue
        amount, spent = float(entry["amount"]), float(cost["cost_so_far"])
        row = {
            "machine": cost["machine"],
            "budget": amount,
            "spent": spent,
            "percent": round(100 * spent / amount, 1),
            "events": [],
        }
        for threshold in ledger.THRESHOLDS:
            if spent >= amount * threshold / 100 and threshold not in entry.get("announced", []):
                row["events"].append(_announce(cost["machine"], entry, threshold, spent))
        found.append(row)
    return found


def _announce(machine: str, entry: dict[str, Any], threshold: int, spent: float) -> dict[str, Any]:
    try:
        return _announce_once(machine, entry, threshold, spent)
    except OSError as exc:  # a full or read-only $RGT_HOME must not break `status`
        return {"kind": f"budget_{threshold}", "not_recorded": f"{exc.strerror}: {exc.filename}"}


def _announce_once(
    machine: str, entry: dict[str, Any], threshold: int, spent: float
) -> dict[str, Any]:
    if not ledger.mark_announced(machine, threshold):
        return {"kind": f"budget_{threshold}", "announced_by": "another rgt"}
    record = ledger.add_event(
        machine,
        f"budget_{threshold}",
        f"{machine}:budget_{threshold}:{entry['set']}",
        {"spent": spent, "budget": entry["amount"], "percent": threshold},
        f"{machine} has spent {spent:.2f} of its budget {entry['amount']:g}: pull, then "
        f"`rgt down {machine}` (rgt never stops a machine by itself)",
        "error" if threshold >= 100 else "warning",
    )
    if record is None:
        return {"kind": f"budget_{threshold}", "announced_by": "another rgt"}
    return {**record, "notify": ledger.notify(entry.get("notify"), record) or "sent"}


def danger_clocks(machines: list[Machine], now: datetime) -> list[dict[str, Any]]:
    """SSH-line platforms whose console machine, once stopped after `rgt down`, is released by
    the platform on a date: each clock is an event (once) and a line until that date."""
    found = []
    for m in machines:
        released = _time(m.released)
        if released is None or is_vendor(m.profile):
            continue
        from rgt.profiles import load_profile

        try:
            profile = load_profile(m.profile)
        except RgtError:
            continue
        for clock in profile.clocks:
            if clock.when != "stopped" or not clock.duration_s:
                continue
            due = released + timedelta(seconds=clock.duration_s)
            if due > now:
                found.append(_clock_event(m, profile.title, clock, due))
    return found


def _clock_event(m: Machine, title: str, clock: Any, due: datetime) -> dict[str, Any]:
    date = due.strftime("%Y-%m-%d %H:%M UTC")
    detail = {
        "platform": title,
        "clock": clock.name,
        "date": due.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "trigger": clock.trigger,
        "consequence": clock.consequence,
    }
    with contextlib.suppress(OSError):  # shown either way; recorded when $RGT_HOME can be written
        ledger.add_event(
            m.name,
            "danger_clock",
            f"{m.name}:{clock.name}:{m.released}",
            detail,
            f"if {m.name} is left stopped in the {title} console: {clock.consequence} on {date}; "
            "copy off what you still need before then, or release it there",
            "warning",
        )
    return {"machine": m.name, **detail}


def glance_orphans(store: Store) -> dict[str, Any] | None:
    """The orphans line's data, or None (no network) when no vendor key is set."""
    if not any(configured(v) for v in VENDORS):
        return None
    path = store_path = _cache_path()
    stamp = _fingerprint(store)
    try:
        cached = json.loads(path.read_text())
        fresh = time.time() - cached["time"] < _ttl() and cached["store"] == stamp
    except (OSError, ValueError, KeyError, TypeError):
        cached, fresh = None, False
    if not fresh or cached is None:
        quick = float(os.environ.get("RGT_VENDOR_GLANCE_TIMEOUT_S") or GLANCE_TIMEOUT_S)
        listings, skipped = list_accounts(quick, only_configured=True)
        cached = {"time": time.time(), "store": stamp, "listings": listings, "skipped": skipped}
        with contextlib.suppress(OSError):  # no cache on a full $RGT_HOME: ask again next time
            store_path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".{path.name}.{os.getpid()}")
            tmp.write_text(json.dumps(cached))
            os.replace(tmp, path)
    events.note_vendor_states(store, cached["listings"])
    result = classify(store, cached["listings"], cached["skipped"])
    result["as_of"] = datetime.fromtimestamp(cached["time"], timezone.utc).strftime("%H:%M:%S")
    return result


def _cache_path() -> Any:
    from rgt.config import rgt_home

    return rgt_home().joinpath(*CACHE)


def _ttl() -> float:
    return float(os.environ.get("RGT_VENDOR_GLANCE_TTL_S") or 120)


def _fingerprint(store: Store) -> str:
    import hashlib

    rows = [
        (r["vendor"], r["instance_id"], r["state"], r["released"]) for r in store.vendor_instances()
    ]
    return hashlib.sha256(json.dumps(sorted(rows)).encode()).hexdigest()[:16]


def _time(stamp: str | None) -> datetime | None:
    return parse_time(stamp)


def lines(data: dict[str, Any]) -> list[str]:
    out = [
        f"cost so far: {c['machine']} {c['cost_so_far']:.2f} at {c['price_per_hour']:g}/h "
        f"({'the vendor price' if c['price_source'] == 'vendor' else 'price given at up'})"
        for c in data["costs"]
        if c["cost_so_far"] is not None
    ]
    out += [
        f"budget: {b['machine']} has spent {b['spent']:.2f} of {b['budget']:g} ({b['percent']:g} %)"
        for b in data["budgets"]
    ]
    out += [
        f"kept volume: {k['machine']}'s {k['vendor']} instance {k['instance_id']} is {k['state']}"
        f" and its disk still bills: `rgt down {k['machine']}` terminates it"
        for k in data["kept"]
    ]
    out += [
        f"danger clock ({c['platform']}): if {c['machine']} is left stopped, "
        f"{c['consequence']} on {c['date'].replace('T', ' ').replace('Z', ' UTC')}"
        for c in data["clocks"]
    ]
    if data["orphans"] is not None:
        out.append(orphans_line(data["orphans"]))
    return out


def orphans_line(glance: dict[str, Any]) -> str:
    n, checked = len(glance["orphans"]), ", ".join(glance["checked"]) or "no vendor"
    unchecked = "".join(f"; {v} {why[:160]}" for v, why in glance["not_checked"].items())
    if not n and not glance["checked"]:  # nothing listed: unknown, not "none"
        return (
            f"orphans: unknown, no vendor could be listed (as of {glance['as_of']} UTC){unchecked}"
        )
    if n:
        return (
            f"orphans: {n} instance{' bills' if n == 1 else 's bill'} on this account that rgt "
            f"does not know ({checked}, as of {glance['as_of']} UTC): `rgt machines --orphans`"
            f"{unchecked}"
        )
    return f"orphans: none on {checked} (as of {glance['as_of']} UTC){unchecked}"


def gate_notes(store: Store, name: str) -> list[str]:
    """What the gate adds to its notes: the vendor's cost, the budget, kept volumes, orphans."""
    data = summary(store, [name])
    data["costs"] = [c for c in data["costs"] if c["price_source"] == "vendor"]  # else: money clock
    return lines(data)


def after_release(store: Store, name: str) -> list[dict[str, Any]]:
    """Called by `down` once NAME is released: its danger clocks start now (events, dated)."""
    return danger_clocks([store.machine(name)], datetime.now(timezone.utc))
