"""VERIFY and DELIVER results for the results page: `verify compare` verdicts, delivery claims.

Delivery workspaces (``rgt deliver init``) are found under ``$RGT_HOME/demo/*/delivery`` (what
`rgt demo` builds), the current directory's workspace, and every ``--results DIR`` given to `rgt
ui`. A verdict is a saved `rgt verify compare --json` document (``findings/*.json`` of a
workspace, as the demo writes it). Each claim's value and evidence come from ``rgt.deliver``'s
own readers and its status from ``reconcile``: ok · drift · possible_drift · missing. Re-read
at most every ``TTL_S``, in the background (reconcile scans files).
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rgt.errors import RgtError

TTL_S = 30.0
MAX_REPORT_CHARS = 20_000


@dataclass
class Findings:
    home: Path
    extra: tuple[Path, ...] = ()
    _cached: tuple[float, dict[str, Any]] | None = None
    _busy: bool = False
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def results(self) -> dict[str, Any]:
        """The last reading; a stale one is re-read in the background (a page never waits
        for reconcile's file scan, except the very first)."""
        with self._lock:
            cached = self._cached
            stale = cached is None or time.monotonic() - cached[0] >= TTL_S
            if cached is not None and stale and not self._busy:
                self._busy = True
                threading.Thread(target=self.refresh, daemon=True).start()
        return cached[1] if cached is not None else self.refresh()

    def refresh(self) -> dict[str, Any]:
        doc = self._read()
        with self._lock:
            self._cached, self._busy = (time.monotonic(), doc), False
        return doc

    def summary(self) -> dict[str, Any]:
        doc = self.results()
        claims = [c for d in doc["deliveries"] for c in d["claims"]]
        return {
            "comparisons": [
                {"name": c["name"], "verdict": c.get("verdict"), "metric": c.get("metric")}
                for c in doc["comparisons"]
            ],
            "deliveries": len(doc["deliveries"]),
            "claims": {s: sum(1 for c in claims if c["status"] == s) for s in STATUSES},
        }

    def workspaces(self) -> list[Path]:
        from rgt.deliver.workspace import find_workspace

        found = sorted(self.home.glob("demo/*/delivery/EVIDENCE.json"))
        roots = [p.parent for p in found] + [p.resolve() for p in self.extra]
        with contextlib.suppress(RgtError):  # no workspace at or above the current directory
            roots.append(find_workspace().root)
        return list(dict.fromkeys(r.resolve() for r in roots))

    def _read(self) -> dict[str, Any]:
        comparisons, deliveries = [], []
        for root in self.workspaces():
            comparisons += _comparisons(root)
            deliveries.append(delivery(root))
        return {"comparisons": comparisons, "deliveries": deliveries}


STATUSES = ("ok", "drift", "possible_drift", "missing")


def _comparisons(root: Path) -> list[dict[str, Any]]:
    out = []
    for path in sorted((root / "findings").glob("*.json")):
        try:
            doc = json.loads(path.read_text("utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(doc, dict) and "verdict" in doc:
            out.append({"name": f"{root.parent.name}/{path.stem}", "path": str(path), **doc})
    return out


def delivery(root: Path) -> dict[str, Any]:
    from rgt.deliver.evidence import claim_value, load_claims
    from rgt.deliver.reconcile import reconcile
    from rgt.deliver.workspace import Workspace

    ws = Workspace(root)
    doc: dict[str, Any] = {"name": f"{root.parent.name}/{root.name}", "path": str(root)}
    try:
        claims = load_claims(ws)
        report = reconcile(root, ws)
    except RgtError as exc:
        return {**doc, "claims": [], "drifts": [], "error": exc.message, "fix": exc.fix}
    status = _statuses(report)
    rows: list[dict[str, Any]] = []
    for claim in claims:
        try:
            value = claim_value(ws, claim)
        except RgtError as exc:
            rows.append(
                {
                    "id": claim.id,
                    "metric": claim.metric,
                    "status": "missing",
                    "value": None,
                    "evidence": {"error": exc.message},
                }
            )
            continue
        rows.append(
            {
                "id": claim.id,
                "text": claim.text,
                "metric": claim.metric,
                "value": value.summary.value,
                "printed": value.printed(),
                "status": status.get(claim.id, "missing"),
                "evidence": {
                    "runs": list(value.run_ids),
                    "aggregate": claim.aggregate,
                    "figure": claim.figure,
                    "appears_in": list(claim.appears_in),
                },
            }
        )
    drifts = report.to_json()
    return {
        **doc,
        "claims": rows,
        "drifts": drifts["drifts"] + drifts["possible_drifts"],
        "report": _report(root),
    }


def _statuses(report: Any) -> dict[str, str]:
    status: dict[str, str] = {c: "missing" for c in report.missing}
    for hit in report.ok:
        status.setdefault(hit.claim, "ok")
    for hit in report.possible:
        status[hit.claim] = "possible_drift"
    for hit in report.drifts:
        status[hit.claim] = "drift"
    return status


def _report(root: Path) -> dict[str, Any] | None:
    for name in ("REPORT.md", "DISCLOSURE.md"):
        path = root / name
        if path.is_file():
            text = path.read_text("utf-8", "replace")
            return {"name": name, "path": str(path), "text": text[:MAX_REPORT_CHARS]}
    return None
