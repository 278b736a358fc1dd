"""What rgt keeps on this laptop about money and deadlines, beside the state store:

- ``$RGT_HOME/budgets.json``: ``rgt up … --budget AMOUNT [--notify SOURCE]`` per machine name,
  with the thresholds already announced (80 %, 100 %), so each is announced once;
- ``$RGT_HOME/machine-events.jsonl``: machine events (``budget_80``, ``budget_100``,
  ``danger_clock``, ``vendor_state``), one JSON object a line
  (src/rgt/schemas/machine_events.schema.json) with the job events' fields (``time``, ``kind``,
  ``severity``, ``detail``, ``next``) plus ``machine`` and a ``key`` that makes each unique.

Both are rewritten under an flock, the budget file by rename, so two `rgt status` at once never
announce a threshold twice. Neither holds a secret: a budget records the webhook's *source*
(``env:NAME``), never its URL.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from rgt.config import rgt_home

BUDGETS = "budgets.json"
EVENTS = "machine-events.jsonl"
THRESHOLDS = (80, 100)


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@contextlib.contextmanager
def locked() -> Iterator[Path]:
    """rgt's home, held exclusively while budgets and machine events are read and written."""
    home = rgt_home()
    fd = os.open(home / ".ledger.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield home
    finally:
        os.close(fd)


def budgets() -> dict[str, dict[str, Any]]:
    try:
        data = json.loads((rgt_home() / BUDGETS).read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def set_budget(machine: str, amount: float, notify: str | None) -> dict[str, Any]:
    """A new budget for ``machine`` (a new `up` of the name starts its thresholds afresh)."""
    entry: dict[str, Any] = {"amount": amount, "notify": notify, "announced": [], "set": _now()}
    with locked():
        data = budgets()
        data[machine] = entry
        _write_budgets(data)
    return entry


def mark_announced(machine: str, threshold: int) -> bool:
    """Record that ``threshold`` was announced; False when another rgt already did."""
    with locked():
        data = budgets()
        entry = data.get(machine)
        if entry is None or threshold in entry.get("announced", []):
            return False
        entry["announced"] = sorted({*entry.get("announced", []), threshold})
        _write_budgets(data)
    return True


def _write_budgets(data: dict[str, Any]) -> None:
    path = rgt_home() / BUDGETS
    tmp = path.with_name(f".{BUDGETS}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    os.replace(tmp, path)


def machine_events(machine: str | None = None) -> list[dict[str, Any]]:
    """The events, oldest first; a bad line is skipped (``read_events`` says which and why)."""
    return read_events(machine)[0]


# What a reader needs of a line (src/rgt/schemas/machine_events.schema.json says the rest).
REQUIRED = {"time": str, "machine": str, "kind": str, "key": str, "severity": str, "next": str}
SEVERITIES = ("info", "warning", "error")


def read_events(machine: str | None = None) -> tuple[list[dict[str, Any]], list[str]]:
    """The events (``machine``'s only, if given), oldest first, and one problem per line that
    is not an event — path, line number, why, and the fix. A bad line never hides the others."""
    path = rgt_home() / EVENTS
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return [], []
    found, problems = [], []
    for number, line in enumerate(lines, start=1):
        record, why = _parse_event(line)
        if record is None:
            if line.strip():
                problems.append(
                    f"{path} line {number} is not a machine event ({why}): skipped; fix: delete "
                    "that line (cut by a crash or edited by hand; the others still count)"
                )
        elif machine is None or record["machine"] == machine:
            found.append(record)
    return found, problems


def _parse_event(line: str) -> tuple[dict[str, Any] | None, str]:
    try:
        record = json.loads(line)
    except ValueError:
        return None, "not JSON"
    if not isinstance(record, dict):
        return None, "not a JSON object"
    for name, kind in REQUIRED.items():
        if not isinstance(record.get(name), kind) or not record[name]:
            return None, f"no {name!r}"
    if record["severity"] not in SEVERITIES or not isinstance(record.get("detail", {}), dict):
        return None, "bad 'severity' or 'detail'"
    return record, ""


def add_event(
    machine: str, kind: str, key: str, detail: dict[str, Any], next_step: str, severity: str
) -> dict[str, Any] | None:
    """Append the event unless one with this ``key`` exists; the event, or None if it did."""
    record = {
        "time": _now(),
        "machine": machine,
        "kind": kind,
        "key": key,
        "severity": severity,
        "detail": detail,
        "next": next_step,
    }
    with locked() as home:
        if any(e.get("key") == key for e in machine_events(machine)):
            return None
        with open(home / EVENTS, "a") as handle:
            handle.write(json.dumps(record, sort_keys=True) + "\n")
    return record


def notify(source: str | None, record: dict[str, Any]) -> str | None:
    """POST the event to the webhook named by ``source``; None when sent, else why not (never
    the URL). A notification that fails never stops anything: the event is already written."""
    if not source:
        return None
    from rgt.agent._webhook import split_format
    from rgt.errors import RgtError
    from rgt.jobs.notify import resolve

    try:
        url = resolve(source).url
    except RgtError as exc:
        return f"not sent: {exc.message}"
    message = f"rgt machine {record['machine']}: {record['kind']} - {record['next']}"
    kind, target = split_format(url)
    body = json.dumps({**record, "text": message}, sort_keys=True).encode()
    headers = {"Content-Type": "application/json"}
    if kind == "ntfy":
        body = message.encode()
        headers = {"Content-Type": "text/plain; charset=utf-8", "Title": f"rgt {record['kind']}"}
    elif kind == "slack":
        body = json.dumps({"text": message}).encode()
    return _post(target, body, headers)


def _post(url: str, body: bytes, headers: dict[str, str]) -> str | None:
    import urllib.error
    import urllib.request

    request = urllib.request.Request(url, data=body, method="POST", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            response.read()
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", None) or exc.__class__.__name__
        return f"not sent: the webhook did not accept it ({reason})"
    return None
