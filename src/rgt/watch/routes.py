"""Download routes of a machine: direct (huggingface.co, pypi.org) against the profile's mirror,
timed from the machine by ``agent audit`` (time to first byte, a 256 KiB transfer rate).

A kind is probed only when the machine's network plan has a mirror for it: without one there
is no choice to make. The chosen route is the fastest that answered; the plan is never changed
behind the user's back: when it points at a route that does not answer while another does, the
finding names the ``rgt up`` flag that switches.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rgt.profiles.network import NetworkPlan

DIRECT = {"hf": "https://huggingface.co", "pip": "https://pypi.org/simple"}
PROBE_PATH = {"hf": "/openai-community/gpt2/resolve/main/vocab.json", "pip": "/pip/"}


def candidates(raw: Mapping[str, Any], plan: NetworkPlan) -> list[tuple[str, str]]:
    """``(KIND:LABEL, URL)`` for the agent; the profile's ``hf_direct``/``pip_direct`` name a
    direct route other than the public one (an internal gateway)."""
    out = []
    for kind, mirror in sorted(plan.mirrors.items()):
        if kind not in DIRECT:
            continue
        direct = str(raw.get(f"{kind}_direct") or DIRECT[kind])
        for label, base in (("direct", direct), ("mirror", mirror)):
            out.append((f"{kind}:{label}", base.rstrip("/") + PROBE_PATH[kind]))
    return out


def choose(readings: Mapping[str, Any]) -> tuple[dict[str, Any], list[dict[str, str]]]:
    """``({kind: {"chosen", "why", "routes"}}, findings)`` from the agent's route readings."""
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for r in readings.get("routes") or []:
        by_kind.setdefault(r["kind"], []).append(r)
    choices, findings = {}, []
    for kind, routes in sorted(by_kind.items()):
        answered = sorted((r for r in routes if r.get("ok")), key=_cost)
        chosen = answered[0]["label"] if answered else None
        choices[kind] = {"chosen": chosen, "why": _why(routes, answered), "routes": routes}
        findings.extend(_findings(kind, routes, chosen))
    return choices, findings


def _cost(r: Mapping[str, Any]) -> float:
    """Seconds to fetch 100 MiB: first byte plus the transfer at the measured rate."""
    rate = max(float(r.get("rate_kib_s") or 0.0), 1e-3)
    return float(r.get("ttfb_ms") or 0.0) / 1000 + 100 * 1024 / rate


def _why(routes: list[dict[str, Any]], answered: list[dict[str, Any]]) -> str:
    parts = [
        f"{r['label']}: {r['ttfb_ms']:.0f} ms to first byte, {r['rate_kib_s']:.0f} KiB/s"
        if r.get("ok")
        else f"{r['label']}: failed ({r.get('error')})"
        for r in routes
    ]
    head = f"{answered[0]['label']} is fastest" if answered else "no route answered"
    return f"{head} ({'; '.join(parts)})"


def _findings(kind: str, routes: list[dict[str, Any]], chosen: str | None) -> list[dict[str, str]]:
    from rgt.watch.envgate import finding

    if chosen is None:
        return [
            finding(
                "warn",
                f"route {kind}",
                f"neither the direct route nor the mirror answered from the machine: "
                f"{_why(routes, [])}",
                f"downloads of {kind} will fail: fix the machine's network, or give a mirror "
                f"that works with `rgt up … --mirror {kind}=URL`",
            )
        ]
    if chosen == "direct" and not any(r["label"] == "mirror" and r.get("ok") for r in routes):
        return [
            finding(
                "warn",
                f"route {kind}",
                f"the {kind} mirror jobs are given does not answer; the direct route does "
                f"({_why(routes, [])})",
                f"drop it: `rgt up … --no-mirrors`, or set another with --mirror {kind}=URL",
            )
        ]
    return []
