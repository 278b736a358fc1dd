"""Why a verdict: every rule that fired, the lines it matched, and the runner-up label.

``classify`` answers with one label; ``explain`` shows its working, the way ``rgt triage
--explain`` prints it: the rule that decided, the lines that decided, which other rules fired
(and which were silenced because a rule they ``yields_to`` fired too), and the runner-up: the
best-ranked label other than the winner, the second hypothesis worth checking.
Ships inside the agent: stdlib only, Python 3.8.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from rgt.triage.engine import Verdict, classify, default_rules, fired_rules, silencing_labels
from rgt.triage.rules import Rule


@dataclass(frozen=True)
class Firing:
    rule_id: str
    label: str
    priority: int
    lines: list[str] = field(default_factory=list)
    silenced_by: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "rule_id": self.rule_id,
            "label": self.label,
            "priority": self.priority,
            "lines": list(self.lines),
            "silenced_by": list(self.silenced_by),
        }


@dataclass(frozen=True)
class Explanation:
    verdict: Verdict
    fired: list[Firing] = field(default_factory=list)
    runner_up: str | None = None
    runner_up_rule: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "decided_by": self.verdict.rule_id,
            "lines": list(self.verdict.evidence),
            "runner_up": self.runner_up,
            "runner_up_rule": self.runner_up_rule,
            "fired": [firing.to_dict() for firing in self.fired],
        }


def explain(
    log_tail: str,
    exit_code: int | None = None,
    signal: int | None = None,
    context: dict[str, Any] | None = None,
    rules: Sequence[Rule] | None = None,
) -> Explanation:
    ranked = sorted(rules, key=lambda r: -r.priority) if rules is not None else default_rules()
    verdict = classify(log_tail, exit_code, signal, context, ranked)
    fired = fired_rules(log_tail, exit_code, signal, context or {}, ranked)
    labels = silencing_labels(fired)
    firings = [
        Firing(
            rule.id,
            rule.label,
            rule.priority,
            lines or [],
            sorted(labels.intersection(rule.yields_to)),
        )
        for rule, lines in fired
    ]
    # A rule that fired and was not silenced is a stronger second hypothesis than one that was.
    others = sorted(
        (f for f in firings if f.label != verdict.label), key=lambda f: bool(f.silenced_by)
    )
    runner = others[0] if others else None
    return Explanation(
        verdict,
        firings,
        runner.label if runner else None,
        runner.rule_id if runner else None,
    )
