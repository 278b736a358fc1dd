"""What a run would cost, said before any meter starts (`rgt run … --dry-run`, MCP ``run``).

The forecast reads only this computer's state database: what would start (command, machine,
backend, profile, durable root, resources), the machine's price, and the durations of this same
command's earlier successful runs on machines of the same type (profile and expected GPUs). With
history, the expected duration is its p50 and p90 (nearest rank) and the cost is price × those;
without it, it says "no history" and shows no made-up number. A run that ended by failure or
cancel says nothing about how long a run takes, so only succeeded runs count.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from rgt.agent.jobfiles import parse_time
from rgt.models import JobRecord, JobState, Machine
from rgt.state.store import Store

NO_HISTORY = "no history"


@dataclass(frozen=True)
class Forecast:
    machine: str
    backend: str
    profile: str
    machine_type: str
    command: tuple[str, ...]
    durable_root: str
    price_per_hour: float | None
    currency: str
    runs: int
    p50_s: float | None
    p90_s: float | None
    cost_p50: float | None
    cost_p90: float | None
    resources: dict[str, Any] | None
    note: str

    def to_json(self) -> dict[str, Any]:
        return dict(asdict(self), command=list(self.command), dry_run=True, started=False)


def machine_type(machine: Machine) -> str:
    """The profile, and the GPUs the machine should have when they are recorded."""
    gpu = machine.connection.get("expect_gpu") or {}
    if gpu.get("gpu"):
        return f"{machine.profile} {gpu['gpu']}:{gpu.get('count', 1)}"
    return machine.profile


def durations(store: Store, command: tuple[str, ...], kind: str) -> list[float]:
    """Seconds from creation to end of every succeeded run of ``command`` on a ``kind``."""
    types = {m.name: machine_type(m) for m in store.machines()}
    found = []
    for job in store.jobs():
        if job.state is not JobState.SUCCEEDED or tuple(job.spec.command) != tuple(command):
            continue
        if types.get(job.machine) == kind and job.spec.smoke is False:
            seconds = _seconds(job)
            if seconds is not None:
                found.append(seconds)
    return sorted(found)


def _seconds(job: JobRecord) -> float | None:
    start, end = parse_time(job.created), parse_time(job.ended)
    if start is None or end is None:
        return None
    return max(0.0, (end - start).total_seconds())


def quantile(values: list[float], q: float) -> float:
    """Nearest-rank quantile of sorted ``values`` (a real observed duration, never a blend)."""
    return values[max(0, math.ceil(q * len(values)) - 1)]


def forecast(
    store: Store,
    name: str,
    command: tuple[str, ...],
    resources: dict[str, Any] | None = None,
    price: float | None = None,
) -> Forecast:
    """``price``: per hour, as the ledger has it (the caller reads it; None: the machine's
    ``--price``)."""
    from rgt.autostop.policy import currency_of
    from rgt.profiles import load_profile

    machine = store.machine(name)
    kind = machine_type(machine)
    price = machine.price_per_hour if price is None else price
    past = durations(store, command, kind)
    p50 = quantile(past, 0.5) if past else None
    p90 = quantile(past, 0.9) if past else None
    return Forecast(
        machine=name,
        backend=machine.backend,
        profile=machine.profile,
        machine_type=kind,
        command=command,
        durable_root=machine.durable_root,
        price_per_hour=price,
        currency=currency_of(load_profile(machine.profile)),
        runs=len(past),
        p50_s=p50,
        p90_s=p90,
        cost_p50=_cost(price, p50),
        cost_p90=_cost(price, p90),
        resources=resources,
        note=_note(past, price, kind),
    )


def _cost(price: float | None, seconds: float | None) -> float | None:
    if price is None or seconds is None:
        return None
    return round(price * seconds / 3600.0, 4)


def _note(past: list[float], price: float | None, kind: str) -> str:
    if not past:
        return f"{NO_HISTORY}: this command never succeeded on a {kind} machine"
    words = f"from {len(past)} earlier successful run(s) on {kind}"
    return words if price is not None else words + "; no price recorded (`rgt up … --price`)"


def lines(f: Forecast) -> list[str]:
    """The human form."""
    out = [
        f"dry run: nothing started, no meter running. Would start `{' '.join(f.command)}` on "
        f"{f.machine} ({f.backend}, {f.machine_type}), durable root {f.durable_root}"
    ]
    price = "no price" if f.price_per_hour is None else f"{f.price_per_hour:g} {f.currency}/h"
    if f.p50_s is None:
        out.append(f"expected duration and cost: {NO_HISTORY} ({price})")
        return out
    out.append(f"expected duration: p50 {_hms(f.p50_s)}, p90 {_hms(f.p90_s or 0)} ({f.note})")
    if f.cost_p50 is not None:
        out.append(
            f"expected cost: p50 {f.cost_p50:.2f} {f.currency}, p90 {f.cost_p90 or 0:.2f} "
            f"{f.currency} at {price}"
        )
    return out


def _hms(seconds: float) -> str:
    hours, rest = divmod(round(seconds), 3600)
    return f"{hours}h{rest // 60:02d}m" if hours else f"{rest // 60}m{rest % 60:02d}s"
