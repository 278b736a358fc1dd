"""`rgt triage ... --learn LABEL` and `rgt triage --rules`: learned rules and how often rules fire.

Learned rules live in ``$RGT_HOME/rules/`` (format: ``rgt.triage.learned``); fire counts of the
verdicts ``rgt triage`` gave live in ``$RGT_HOME/triage-fired.json``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from rgt.cli._output import Output, escape
from rgt.errors import UsageError
from rgt.verbs.triage import fire_counts, rules_dir


def learn(
    log_tail: str, context: Any, label: str, remedy: str | None, yes: bool, out: Output
) -> None:
    from rgt.triage import LABELS, classify, default_rules
    from rgt.triage.learned import load_user_rules, propose, save

    if label not in LABELS or label == "unknown":
        raise UsageError(f"--learn {label!r} is not a label", fix=f"use one of {list(LABELS)[:-1]}")
    verdict = classify(log_tail, context.exit_code, context.signal, context.context)
    try:
        rule = propose(log_tail, label, verdict, list(default_rules()), remedy, _note(context))
    except ValueError as exc:
        raise UsageError(str(exc), fix="learn from a log that shows the failure") from None
    _vet(rule, log_tail, context)
    data = {"proposed": rule, "was": verdict.label, "was_rule": verdict.rule_id, "saved": None}
    if yes or (not out.json_mode and click.confirm(_describe(rule, verdict), default=False)):
        data["saved"] = save(str(rules_dir()), rule)
        load_user_rules(str(rules_dir()))  # the stored file loads, or this says why
    out.result(data, _learn_human(data))


def _vet(rule: dict[str, Any], log_tail: str, context: Any) -> None:
    """Refuse, with the reason and the fix, a rule that would widen retries (``vetting.py``)."""
    from rgt.triage.vetting import RuleRefused, vet

    try:
        vet(rule, log_tail, context.exit_code, context.signal, context.context)
    except RuleRefused as exc:
        raise UsageError(f"not learned: {exc}", fix=exc.fix) from None


def _note(context: Any) -> str:
    return f"learned from job {context.job_id}" if context.job_id else "learned from a log file"


def _describe(rule: dict[str, Any], verdict: Any) -> str:
    lines = [
        f"proposed rule {rule['id']} -> {rule['label']} (priority {rule['priority']}, "
        f"retryable {str(rule['retryable']).lower()})",
        *(f"  pattern: {p}" for p in rule["patterns"]),
        f"  today this log is {verdict.label} (rule {verdict.rule_id})",
        "Store it in " + str(rules_dir()) + "?",
    ]
    return "\n".join(lines)


def _learn_human(data: dict[str, Any]) -> Any:
    def render(o: Output) -> None:
        rule = data["proposed"]
        if data["saved"]:
            o.line(f"stored {rule['id']} -> {rule['label']} in {escape(str(data['saved']))}")
        else:
            o.line(
                f"not stored: rerun with --yes, or edit and save it as a JSON file in "
                f"{escape(str(rules_dir()))}"
            )
            o.out.print(json.dumps(rule, indent=2), markup=False)

    return render


def list_rules(out: Output) -> None:
    from rgt.triage import default_rules

    counts = fire_counts()
    rows: list[dict[str, Any]] = [
        {
            "rule_id": rule.id,
            "label": rule.label,
            "priority": rule.priority,
            "learned": rule.id.startswith("learned."),
            "retryable": rule.retryable,
            "fired": counts.get(rule.id, 0),
        }
        for rule in default_rules()
    ]
    refused = refused_today()
    for row in rows:
        if row["learned"]:
            row["refused_today"] = refused.get(row["rule_id"])
    data = {"rules": rows, "learned_dir": str(rules_dir())}

    def render(o: Output) -> None:
        for row in rows:
            origin = "learned" if row["learned"] else "bundled"
            o.line(
                f"{row['rule_id']:<34} {row['label']:<18} {origin:<8} "
                f"priority {row['priority']:>3}  fired {row['fired']}"
            )
            if row.get("refused_today"):
                o.line(f"  [yellow]would be refused today[/]: {escape(row['refused_today'])}")

    out.result(data, render)


def refused_today() -> dict[str, str]:
    """Learned rules stored by an older rgt that today's vetting refuses, with the reason (the
    engine already ranks them below built-in bugs; this tells the user to fix or delete them)."""
    from rgt.triage.learned import user_rule_dir
    from rgt.triage.vetting import RuleRefused, vet

    directory = Path(user_rule_dir() or rules_dir())
    found: dict[str, str] = {}
    for path in sorted(directory.glob("*.json")) if directory.is_dir() else []:
        for raw in json.loads(path.read_text(encoding="utf-8")).get("rules", []):
            try:
                vet(raw)
            except RuleRefused as exc:
                found[str(raw.get("id"))] = f"{exc} (fix: {exc.fix})"
    return found
