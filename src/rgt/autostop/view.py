"""How `rgt status`, `rgt watch`, the UI and MCP show a machine's autostop.

The machine's agent reports it with every ``patrol`` (``rgt.agent._autostop_files.report``):
the armed policy, the money so far, the time to the cap, the last reason it did not fire,
whether it fired, a preemption notice, and its newest events. Here those become the compact
``--json`` field, one human line, and events for the patrol's event list.
"""

from __future__ import annotations

from typing import Any

COMPACT_KEYS = ("spent", "currency", "time_to_cap_s", "watcher_alive")


def compact(report: dict[str, Any] | None) -> dict[str, Any] | None:
    """The compact `--json` form (None when autostop is not armed)."""
    if not report or not report.get("armed"):
        return None
    view: dict[str, Any] = {"armed": True, "when": when(report.get("triggers") or {})}
    view.update({k: report[k] for k in COMPACT_KEYS if report.get(k) is not None})
    refusal = report.get("last_refusal") or {}
    if refusal.get("reason"):
        view["not_fired_because"] = refusal["reason"]
    fired = report.get("fired")
    if fired:
        view["fired"] = fired.get("time") or True
    if report.get("preemption"):
        view["preemption"] = report["preemption"].get("action") or "notice"
    return view


def when(triggers: dict[str, Any]) -> list[str]:
    """The triggers in words: ``every job ended``, ``idle 30 min``, ``spend 20 USD``, …"""
    words = ["every job ended"] if triggers.get("after_jobs") else []
    if triggers.get("idle_s"):
        words.append(f"idle {float(triggers['idle_s']) / 60:g} min")
    if triggers.get("at"):
        words.append(f"at {triggers['at']}")
    budget = triggers.get("budget")
    if budget:
        words.append(f"spend {float(budget['amount']):g} {budget.get('currency') or ''}".strip())
    return words


def line(name: str, report: dict[str, Any] | None) -> str | None:
    """One human line for a machine, or None when nothing is armed."""
    view = compact(report)
    return None if view is None else text(name, view)


def text(name: str, view: dict[str, Any]) -> str:
    """The human line of a compact view (``compact``)."""
    if view.get("error") or not view.get("armed"):
        return f"autostop {name}: " + (f"unknown ({view['error']})" if view.get("error") else "off")
    text = f"autostop {name}: armed, stops when {' or '.join(view['when'])}"
    if "spent" in view:
        text += f"; spent {view['spent']:.2f} {view.get('currency') or ''}".rstrip()
    if "time_to_cap_s" in view:
        text += f", cap in {_duration(float(view['time_to_cap_s']))}"
    if view.get("fired"):
        text += f"; FIRED {view['fired']}"
    elif view.get("not_fired_because"):
        text += f"; not fired: {view['not_fired_because']}"
    if not view.get("watcher_alive") and not view.get("fired"):
        text += " (watcher not running: the next `rgt watch` or job start restarts it)"
    return text


def _duration(seconds: float) -> str:
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 60:.0f} min" if seconds >= 60 else f"{seconds:.0f} s"


def events(name: str, report: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The watcher's newest events, for the patrol's event list (``job_id`` "autostop")."""
    found = (report or {}).get("events") or []
    return [dict(e, machine=name) for e in found if isinstance(e, dict)]


def reports(store: Any, names: list[str]) -> dict[str, Any]:
    """`rgt status`: the compact autostop of each named machine armed from this computer
    (one ``patrol`` round trip each; machines never armed cost nothing)."""
    from rgt.autostop.arm import status
    from rgt.errors import RgtError

    found: dict[str, Any] = {}
    for machine in store.machines():
        if machine.name not in names or not machine.active:
            continue
        if not machine.connection.get("autostop"):
            continue
        try:
            found[machine.name] = compact(status(store, machine.name)) or {"armed": False}
        except RgtError as exc:
            found[machine.name] = {"armed": None, "error": exc.message}
    return found


def profile_words(raw: dict[str, Any]) -> list[str]:
    """`rgt profiles NAME`: the platform's autostop stop (or why there is none), dated."""
    spec = raw.get("self_stop")
    if not spec:
        return ["autostop: no documented stop from inside; declare one: rgt up … --self-stop CMD"]
    stamp = f" ({spec['status']} {spec['verified']}, {spec['source']})"
    if spec["mode"] == "command":
        return [f"autostop stop: {spec['command']}{stamp}"]
    return [
        f"autostop: {'refused' if spec['mode'] == 'refused' else 'nothing to stop'}: "
        f"{spec['reason']}{stamp}"
    ]
