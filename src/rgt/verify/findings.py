"""The structured record every VERIFY probe emits, and that DELIVER's disclosure gate prints.

Posture (DESIGN.md invariant 5): audit and disclose. A finding never blocks anything; it travels
with the conclusion it affects. ``severity`` says how much it undermines that conclusion:

    bug      the comparison or number is probably wrong (a smoke run, SSIM > 1, zero seed spread)
    warning  the conclusion needs a caveat (two config keys changed, a missing validation split)
    info     context a reader should see (accuracy recorded in percent)
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

SEVERITIES = ("bug", "warning", "info")


@dataclass(frozen=True)
class Finding:
    probe: str  # stable machine name: "zero_spread", "impossible_value", "test_leakage", ...
    severity: str  # bug | warning | info
    message: str  # one sentence a reader understands without the evidence
    runs: tuple[str, ...] = ()  # the runs (directories or names) it concerns
    evidence: dict[str, Any] = field(default_factory=dict)  # the numbers behind the message

    def __post_init__(self) -> None:
        if self.severity not in SEVERITIES:
            raise ValueError(f"severity must be one of {SEVERITIES}, not {self.severity!r}")

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["runs"] = list(self.runs)
        return data


def has_bug(findings: tuple[Finding, ...] | list[Finding]) -> bool:
    return any(f.severity == "bug" for f in findings)
