"""`rgt approve` and `rgt down`: human approval and the release behind the gate."""

from __future__ import annotations

import getpass
import sys
from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any

from rgt._tty import Terminal
from rgt.agent.jobfiles import parse_time
from rgt.backends import backend_for
from rgt.errors import Consent, GateRefused, UsageError, needs_human
from rgt.jobs.pulled import failure_reasons
from rgt.lifecycle.approvals import human_consent
from rgt.lifecycle.gate import GateVerdict, abandon_action, evaluate
from rgt.models import ACTION_DOWN, Machine
from rgt.state.store import Store


def record_approval(store: Store, name: str, tty: str) -> dict[str, Any]:
    store.add_approval(name, ACTION_DOWN, getpass.getuser(), tty)
    approval = store.pending_approval(name, ACTION_DOWN)
    assert approval is not None
    return approval


def approve_interactively(store: Store, name: str, abandon: Sequence[str] = ()) -> dict[str, Any]:
    """A human types the machine's name (and the approval PIN, once set) at the controlling
    terminal. ``abandon`` names jobs whose artifacts the human knowingly gives up."""
    machine = store.machine(name)
    foreign = [j for j in abandon if store.job(j).machine != name]
    if foreign:
        raise UsageError(f"jobs {foreign} are not on {name}", fix="name jobs of this machine")
    why = f"approving the release of {name} needs a human at a terminal"
    with Terminal.open(why, fix=f"run `rgt approve {name}` yourself in a terminal") as term:
        for job_id in abandon:
            term.say(abandon_words(store, job_id, name) + "\n")
        human_consent(term, f"Releasing {name} ({machine.backend}) stops its meter.", name)
        for job_id in abandon:
            store.add_approval(name, abandon_action(job_id), getpass.getuser(), term.name)
        return {**record_approval(store, name, term.name), "abandoned": list(abandon)}


def abandon_words(store: Store, job_id: str, name: str) -> str:
    """What abandoning ``job_id`` keeps and what it gives up: a pulled copy stays on this
    computer (the release takes only the machine's copy); what never landed here is lost."""
    pull = store.last_pull(job_id)
    if pull is None:
        return (
            f"{job_id}: nothing was pulled; its artifacts on {name} are lost when {name} is "
            "released."
        )
    kept = len(pull["files"])
    failed = failure_reasons(pull["report"])
    words = f"{job_id}: {kept} file(s) were pulled to {pull['dest']} and stay there (not lost)."
    if failed:
        shown = "; ".join(failed[:3]) + (f"; and {len(failed) - 3} more" if len(failed) > 3 else "")
        words += (
            f" Given up: the verification of {len(failed)} file(s) ({shown}); the copies on "
            f"{name} are lost when it is released, so these cannot be pulled again."
        )
    else:
        words += f" Given up: the machine's copies on {name}, lost when it is released."
    return words


def teardown(
    store: Store,
    name: str,
    *,
    yes: bool = False,
    check_only: bool = False,
    keep_volume: bool = False,
    rehash: bool = False,
    consent: Consent = needs_human,
) -> dict[str, Any]:
    """Release ``name`` through the gate. At a terminal, when only the approval is missing, the
    human is asked for it; ``yes`` never approves: it only means "do not ask" (scripts).
    ``consent`` asks for the release of a vendor instance no machine stands for (the CLI: at
    the terminal; by default it is refused with the command to run)."""
    from rgt.vendors.billing import after_release, gate_notes
    from rgt.vendors.release import release, release_unregistered

    unregistered = release_unregistered(store, name, keep_volume, check_only, consent)
    if unregistered is not None:
        return unregistered
    machine = store.machine(name)
    if not machine.active:
        raise UsageError(f"machine {name} was already released on {machine.released}")
    backend = backend_for(store, name)
    verdict = evaluate(store, backend, rehash=rehash)
    if verdict.only_approval_missing and not (check_only or yes) and _has_terminal():
        approve_interactively(store, name)
        verdict = evaluate(store, backend, rehash=rehash)
    notes = teardown_notes(machine) + gate_notes(store, name)
    if not verdict.ok:
        error = GateRefused(f"refusing to release {name}", verdict.reasons, fix=_fix(verdict, name))
        error.verdict = verdict.to_json()  # type: ignore[attr-defined]
        error.notes = notes  # type: ignore[attr-defined]
        raise error
    result: dict[str, Any] = {
        "machine": name,
        "gate": verdict.to_json(),
        "notes": notes,
        "released": False,
    }
    if check_only:
        return result
    vendor = release(store, name, keep_volume=keep_volume)  # a vendor API machine: really stop
    result["meter"] = vendor["meter"] if vendor else backend.stop_meter()
    result["still_bills"] = vendor["still_bills"] if vendor else None
    store.release_machine(name)
    result["danger_clocks"] = after_release(store, name)
    assert verdict.approval_id is not None
    store.consume_approval(verdict.approval_id)
    # --keep-volume: no job can run there now, but the instance and its volume remain
    result["kept"] = vendor["kept"] if vendor else None
    result["released"] = not result["kept"]
    return result


def _has_terminal() -> bool:
    try:
        return sys.stdin.isatty()
    except (OSError, ValueError):
        return False


def _fix(verdict: GateVerdict, name: str) -> str:
    if verdict.only_approval_missing:
        return f"everything is pulled and verified; a human must run `rgt approve {name}`"
    return "end or cancel running jobs, `rgt pull` each job, then approve"


def teardown_notes(machine: Machine) -> list[str]:
    notes = []
    if machine.price_per_hour:
        hours = _hours_since(machine.registered)
        notes.append(
            f"money clock: {hours:.2f} h × {machine.price_per_hour:g}/h ≈ "
            f"{hours * machine.price_per_hour:.2f} so far"
        )
    from rgt.profiles import load_profile

    try:
        notes += load_profile(machine.profile).teardown_notes()
    except UsageError as exc:  # the user's profile file was removed since `up`
        notes.append(
            f"profile {machine.profile!r} is unavailable ({exc.message}): check the "
            "platform's console for what keeps billing"
        )
    return notes


def _hours_since(stamp: str) -> float:
    start = parse_time(stamp)
    if start is None:
        return 0.0
    return max(0.0, (datetime.now(timezone.utc) - start).total_seconds() / 3600)
