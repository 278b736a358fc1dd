"""Download routes of a machine: direct (huggingface.co, pypi.org) against the profile's mirror,
timed from the machine by ``agent audit`` (time to first byte, a 256 KiB transfer rate).

A kind is probed only when the machine's network plan has a mirror for it: without one there
is no choice to make. With the profile's ``proxy_hook`` (AutoDL's ``network_turbo``) the direct
routes are also timed through the platform's accelerator (``accelerator``). A job never runs
under it: `rgt fetch` turns it on for its own process (hf), and pip in a job is pointed at the
accelerator's proxy alone (``PIP_PROXY``, the proxy the audit went through), so nothing else in
the job (localhost, the machine's services, the mirrors) meets it. The chosen route is the
fastest that answered; it is recorded for the machine (``$RGT_HOME/routes/<machine>.json``) and
jobs and fetches on it get it (``rgt.profiles.network``) unless ``rgt up --mirror KIND=URL`` or
``--no-mirrors`` says otherwise.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rgt._fs import atomic_write_json
from rgt.findings import Finding
from rgt.profiles.network import NetworkPlan, routes_file
from rgt.state.store import utcnow

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
        found = [("direct", direct), ("mirror", mirror)]
        if raw.get("proxy_hook"):
            found.append(("accelerator", direct))
        for label, base in found:
            out.append((f"{kind}:{label}", base.rstrip("/") + PROBE_PATH[kind]))
    return out


def record(machine: str, choices: Mapping[str, Any]) -> None:
    """Keep what the audit chose, per kind, for the machine's next jobs and fetches."""
    chosen = {}
    for kind, choice in choices.items():
        route = next((r for r in choice["routes"] if r["label"] == choice["chosen"]), None)
        if route and str(route.get("url", "")).endswith(PROBE_PATH[kind]):
            base = str(route["url"])[: -len(PROBE_PATH[kind])]
            chosen[kind] = {"chosen": choice["chosen"], "base": base}
            if choice["chosen"] == "accelerator" and route.get("proxy"):
                chosen[kind]["proxy"] = str(route["proxy"])
    path = routes_file(machine)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_json(str(path), {"recorded": utcnow(), "routes": chosen})


def choose(readings: Mapping[str, Any]) -> tuple[dict[str, Any], list[Finding]]:
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


def _findings(kind: str, routes: list[dict[str, Any]], chosen: str | None) -> list[Finding]:
    from rgt.watch.envgate import finding

    if chosen is None:
        return [
            finding(
                "warning",
                f"route {kind}",
                f"neither the direct route nor the mirror answered from the machine: "
                f"{_why(routes, [])}",
                f"downloads of {kind} will fail: fix the machine's network, or give a mirror "
                f"that works with `rgt up … --mirror {kind}=URL`",
            )
        ]
    if chosen != "mirror" and not any(r["label"] == "mirror" and r.get("ok") for r in routes):
        return [
            finding(
                "warning",
                f"route {kind}",
                f"the profile's {kind} mirror does not answer; the {chosen} route does "
                f"({_why(routes, [])}): jobs and fetches on this machine now use it",
                f"nothing to do; to pin a route instead: `rgt up … --no-mirrors`, or another "
                f"mirror with --mirror {kind}=URL",
            )
        ]
    return []
