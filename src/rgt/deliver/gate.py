"""The disclosure gate: every claim, its evidence, and every integrity finding that touches it.

``gate`` writes DISCLOSURE.md and returns a ``GateReport``. It never refuses: a finding is
disclosed next to the number it affects ("disclose it, or don't claim it"). ``strict_failed``
is true when any claim carries an unresolved bug or warning (an ``info`` finding is context);
only ``rgt deliver gate --strict`` turns that into exit 1, for CI users who want it.

Findings are ``rgt.findings.Finding``, the records ``rgt verify … --json`` prints; a
finding's ``runs`` may name a stored run by id or by the directory it was recorded from.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from rgt._fs import atomic_write_bytes
from rgt.deliver.evidence import ClaimValue, claim_value, load_claims
from rgt.deliver.findings import Finding, load_findings
from rgt.deliver.reconcile import ReconcileReport, reconcile
from rgt.deliver.runs import check_store, load_stored, read_record, stored_run_ids
from rgt.deliver.workspace import Workspace


@dataclass
class ClaimDisclosure:
    value: ClaimValue
    data: dict[str, list[str]]  # split -> distinct content hashes across the claim's runs
    findings: list[Finding] = field(default_factory=list)

    @property
    def unresolved(self) -> list[Finding]:
        return [f for f in self.findings if f.outstanding]

    def to_json(self) -> dict[str, Any]:
        summary, claim = self.value.summary, self.value.claim
        return {
            "claim": claim.id,
            "text": claim.text,
            "metric": claim.metric,
            "value": summary.value,
            "printed": self.value.printed(),
            "aggregate": summary.aggregate,
            "n": summary.n,
            "ci95": None if summary.ci_low is None else [summary.ci_low, summary.ci_high],
            "runs": list(self.value.run_ids),
            "data": self.data,
            "figure": claim.figure,
            "findings": [f.to_json() for f in self.findings],
        }


@dataclass
class GateReport:
    path: Path
    claims: list[ClaimDisclosure]

    @property
    def strict_failed(self) -> bool:
        return any(c.unresolved for c in self.claims)

    def to_json(self) -> dict[str, Any]:
        return {
            "disclosure": str(self.path),
            "claims": [c.to_json() for c in self.claims],
            "unresolved": sum(len(c.unresolved) for c in self.claims),
            "strict_failed": self.strict_failed,
        }


def gate(ws: Workspace, *, scan_root: Path | None = None) -> GateReport:
    """Collect findings for every claim and write DISCLOSURE.md (never refuses)."""
    findings = load_findings(ws)
    findings.items.extend(_store_findings(ws))
    stale = reconcile(scan_root or ws.root, ws)
    findings.items.extend(_stale_findings(stale))
    disclosures = []
    for claim in load_claims(ws):
        value = claim_value(ws, claim)
        found = findings.for_claim(claim.id, _run_names(ws, value.run_ids))
        disclosures.append(ClaimDisclosure(value, _data_hashes(ws, value.run_ids), found))
    report = GateReport(ws.disclosure, disclosures)
    atomic_write_bytes(str(ws.disclosure), disclosure_markdown(report).encode("utf-8"))
    return report


def _store_findings(ws: Workspace) -> list[Finding]:
    found = []
    for tamper in check_store(ws).tampered:
        message = f"{tamper.file} was {tamper.problem} after the run was recorded"
        found.append(Finding("tampered", "bug", message, (tamper.run_id,)))
    for run_id in stored_run_ids(ws):
        verified = read_record(ws, run_id).get("verified")
        if verified is not True:
            why = "failed its hash check" if verified is False else "declared no artifact hashes"
            found.append(Finding("not_verified", "warning", f"run {why} when recorded", (run_id,)))
        if load_stored(ws, run_id).smoke:
            smoke = "a smoke run (1-2 batches) is cited"
            found.append(Finding("smoke_run", "warning", smoke, (run_id,)))
    return found


def _stale_findings(report: ReconcileReport) -> list[Finding]:
    return [
        Finding(
            "stale",
            "warning",
            f"{hit.file}:{hit.line} prints {hit.found}, the evidence says {hit.expected:.6g}",
            claims=(hit.claim,),
            source="rgt deliver reconcile",
        )
        for hit in report.drifts
    ] + [
        Finding(
            "possibly_stale",
            "info",
            f"{hit.file}:{hit.line} prints {hit.found} next to the metric's name, just outside "
            f"the tolerance of the evidence's {hit.expected:.6g}: an older run, or another number",
            claims=(hit.claim,),
            source="rgt deliver reconcile",
        )
        for hit in report.possible
    ]


def _run_names(ws: Workspace, run_ids: tuple[str, ...]) -> tuple[str, ...]:
    """Each run's id and the directory it was recorded from: VERIFY names runs by directory."""
    sources = (read_record(ws, run_id).get("source") for run_id in run_ids)
    return (*run_ids, *(str(s) for s in sources if s))


def _data_hashes(ws: Workspace, run_ids: tuple[str, ...]) -> dict[str, list[str]]:
    splits: dict[str, set[str]] = {}
    for run_id in run_ids:
        for split, digest in (load_stored(ws, run_id).raw.get("data") or {}).items():
            splits.setdefault(split, set()).add(str(digest))
    return {split: sorted(hashes) for split, hashes in sorted(splits.items())}


def disclosure_markdown(report: GateReport) -> str:
    now = datetime.now(timezone.utc).isoformat(timespec="seconds")
    lines = ["# Disclosure", "", f"Generated by `rgt deliver gate` at {now}.", ""]
    if not report.claims:
        lines.append("No claims in EVIDENCE.json.")
    for item in report.claims:
        lines.extend(_claim_section(item))
    return "\n".join(lines) + "\n"


def _claim_section(item: ClaimDisclosure) -> list[str]:
    claim, summary = item.value.claim, item.value.summary
    fmt = claim.format
    spread = "single run, no confidence interval"
    if summary.ci_low is not None and summary.ci_high is not None:
        spread = f"95 % CI {fmt.render(summary.ci_low)} to {fmt.render(summary.ci_high)}"
    lines = [
        f"## {claim.id}: {claim.text}",
        "",
        f"- value: **{item.value.printed()}** ({summary.aggregate} of `{claim.metric}` over "
        f"n={summary.n} runs; {spread})",
        f"- runs: {', '.join(f'`{r}`' for r in item.value.run_ids)}",
    ]
    for split, hashes in item.data.items():
        note = "" if len(hashes) == 1 else f" ({len(hashes)} different contents across the runs)"
        lines.append(f"- data `{split}`: {', '.join(h[:16] for h in hashes)}{note}")
    if claim.figure:
        lines.append(f"- figure: `{claim.figure}`")
    lines.append("- findings: none" if not item.findings else "- findings:")
    for finding in item.findings:
        lines.append(
            f"  - [{finding.kind}, {finding.severity}] {finding.message} ({_state(finding)})"
        )
    return [*lines, ""]


def _state(finding: Finding) -> str:
    if finding.resolved:
        return f"resolved: {finding.resolution or 'yes'}"
    return "context" if finding.severity == "info" else "UNRESOLVED"
