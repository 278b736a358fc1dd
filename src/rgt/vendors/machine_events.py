"""Machine events as `rgt status` and `rgt watch` show them (``billing.events``), and the one
kind written here: ``vendor_state``, when a vendor's account listing reports an instance of an
active machine in a state rgt did not put it in (a spot instance reclaimed, a machine stopped
or deleted in the console). The file and its lines: ``_ledger`` and
src/rgt/schemas/machine_events.schema.json.
"""

from __future__ import annotations

import contextlib
from collections.abc import Collection
from typing import Any

from rgt.state.store import Store
from rgt.vendors import _ledger as ledger

SHOWN = 10  # newest first; the file keeps them all
GONE = "gone"  # not in the vendor's listing any more
_QUIET = ("running", "provisioning")  # the states of a machine that works or is coming up


def recent(only: Collection[str] | None = None, limit: int = SHOWN) -> dict[str, Any]:
    """The newest ``limit`` events (of ``only`` these machines), and the lines skipped."""
    events, problems = ledger.read_events()
    mine = [e for e in events if only is None or e["machine"] in only]
    return {"events": mine[::-1][:limit], "total": len(mine), "problems": problems}


def lines(shown: dict[str, Any]) -> list[str]:
    out = [
        f"event {e['time'][:19].replace('T', ' ')} {e['machine']} {e['kind']}: {e['next']}"
        for e in shown["events"][:5]
    ]
    if shown["total"] > len(out):
        out.append(f"events: {len(out)} of {shown['total']} shown ({ledger.EVENTS} in RGT_HOME)")
    problems: list[str] = shown["problems"][:3]
    return out + problems


def note_vendor_states(store: Store, listings: dict[str, list[dict[str, Any]]]) -> None:
    """One ``vendor_state`` event per (instance, reported state) of an active machine whose
    instance the vendor lists in another state than rgt recorded, or no longer lists."""
    active = {m.name for m in store.machines() if m.active}
    for row in store.vendor_instances():
        if row["released"] is not None or row["machine"] not in active:
            continue
        if row["vendor"] not in listings:
            continue  # not checked this time: no news is not news
        listed = {i["id"]: i["state"] for i in listings[row["vendor"]]}
        reported = listed.get(row["instance_id"], GONE)
        if reported != row["state"] and not (reported in _QUIET and row["state"] in _QUIET):
            with contextlib.suppress(OSError):  # shown next time when $RGT_HOME is full now
                _record(row, reported)


def _record(row: dict[str, Any], reported: str) -> None:
    name, vendor, instance_id = row["machine"], row["vendor"], row["instance_id"]
    interrupted = row["state"] in _QUIET and reported not in _QUIET
    ledger.add_event(
        name,
        "vendor_state",
        f"{name}:{vendor}:{instance_id}:{reported}",
        {
            "vendor": vendor,
            "instance_id": instance_id,
            "recorded": row["state"],
            "reported": reported,
            "interrupted": interrupted,
        },
        f"{vendor} reports {name}'s instance {instance_id} {reported} (rgt recorded "
        f"{row['state']}): `rgt up {vendor} --name {name} --resume` restarts a stopped one; "
        f"`rgt down {name}` releases it",
        "error" if interrupted else "warning",
    )
