"""Rules learned from the user's own incidents: proposed from a log, stored as plain JSON.

Format: every ``*.json`` file in the user rule directory (``$RGT_HOME/rules/`` for the CLI, or
the directory named by ``$RGT_TRIAGE_RULES`` for any process, the agent included) is one family
document exactly like a bundled rule file, with family ``learned``::

    {"family": "learned", "rules": [{"id": "learned.1", "label": "host_oom", "priority": 31,
      "patterns": ["^torch\\\\.distributed .* exited with -9$"], "retryable": false,
      "cause": "...", "remedy": "...", "note": "learned from job 3f2a on 2026-12-01"}]}

A learned rule is validated like a bundled one, and one more way: it may not make a label that
is not retryable by default retryable unless its ``note`` says why (``retryable because ...``),
so a rule written in a hurry never turns a bug into an endless retry loop. Before it is stored it
is vetted (``vetting.py``): no bare one-word pattern, it matches its own log and no known log of
another label, and it never makes retryable a log a built-in rule calls a bug; at match time the
engine ranks built-in non-retryable verdicts above learned retryable ones, so a rule stored by an
older rgt cannot either.
Ships inside the agent: stdlib only, Python 3.8.
"""

from __future__ import annotations

import json
import os
import pkgutil
import re
from re import Match
from typing import Any

from rgt.triage.labels import LABEL_RETRYABLE
from rgt.triage.rules import Rule, RuleFileError, parse_family

ENV_DIR = "RGT_TRIAGE_RULES"
LEARNED_FILE = "learned.json"
BUNDLED_FILE = "user_rules.json"  # the learned rules the agent zipapp carries
FAMILY = "learned"
MIN_PRIORITY = 20
_ERRORISH = re.compile(
    r"error|fail|exception|killed|abort|fatal|denied|cannot|unable|timed? ?out|terminated|"
    r"signal|refused|invalid",
    re.IGNORECASE,
)
# What varies between two runs of the same failure (as it looks after re.escape): addresses, then
# numbers (a version or a float is one number). One pass, so no replacement is rewritten.
_VARYING = re.compile(r"(0x[0-9a-fA-F]+)|(\d+(?:\\\.\d+)*)")


def _general(match: Match[str]) -> str:
    return r"0x[0-9a-fA-F]+" if match.group(1) else r"\d+(?:\.\d+)*"


MAX_PATTERN_SOURCE = 160


def user_rule_dir() -> str | None:
    return os.environ.get(ENV_DIR) or None


def load_user_rules(directory: str | None) -> list[Rule]:
    """The learned rules in ``directory`` (none when it is unset or missing), validated."""
    if not directory or not os.path.isdir(directory):
        return []
    rules: list[Rule] = []
    for name in sorted(os.listdir(directory)):
        if not name.endswith(".json") or name.startswith("."):
            continue
        path = os.path.join(directory, name)
        try:
            with open(path, encoding="utf-8") as handle:
                doc = json.load(handle)
        except (OSError, ValueError) as exc:
            raise RuleFileError(f"{path}: not a readable JSON rule file ({exc})") from exc
        if isinstance(doc, dict) and doc.get("family") != FAMILY:
            raise RuleFileError(f"{path}: a user rule file must have family {FAMILY!r}")
        for rule in parse_family(doc, path):
            _check_retry(rule, path, doc)
            rules.append(rule)
    return rules


def merged_document(directory: str | None) -> str | None:
    """Every learned rule in ``directory`` as one family file (JSON text), or None if none."""
    rules = load_user_rules(directory)  # validated before anything is shipped
    if not rules or not directory:
        return None
    raw: list[Any] = []
    for name in sorted(os.listdir(directory)):
        if name.endswith(".json") and not name.startswith("."):
            with open(os.path.join(directory, name), encoding="utf-8") as handle:
                raw.extend(json.load(handle)["rules"])
    return json.dumps({"family": FAMILY, "rules": raw}, indent=2, sort_keys=True)


def bundled_user_rules(package: str = "rgt.triage") -> list[Rule]:
    """The learned rules built into the agent (``user_rules.json`` in the package), if any."""
    try:
        data = pkgutil.get_data(package, BUNDLED_FILE)
    except OSError:
        return []
    if data is None:
        return []
    doc = json.loads(data.decode("utf-8"))
    rules = parse_family(doc, BUNDLED_FILE)
    for rule in rules:
        _check_retry(rule, BUNDLED_FILE, doc)
    return rules


def _check_retry(rule: Rule, path: str, doc: dict[str, Any]) -> None:
    if not rule.retryable or LABEL_RETRYABLE.get(rule.label, False):
        return
    raw: dict[str, Any] = next((r for r in doc["rules"] if r.get("id") == rule.id), {})
    if "retryable because" not in str(raw.get("note", "")):
        raise RuleFileError(
            f"{path} ({rule.id}): makes {rule.label!r} retryable, which it is not by default; "
            "set retryable to false, or say why in its note ('retryable because ...')"
        )


def distinctive_lines(log_tail: str, count: int = 1) -> list[str]:
    """The last lines that read like the failure itself (an error word), else the last line."""
    lines = [line.strip() for line in log_tail.splitlines() if line.strip()][-40:]
    errorish = [line for line in lines if _ERRORISH.search(line)]
    return (errorish or lines)[-count:]


def generalize(line: str) -> str:
    """A regex for the line that still matches when numbers, addresses and ids change."""
    keyword = _ERRORISH.search(line)
    if len(line) > MAX_PATTERN_SOURCE and keyword:  # keep the part around the error word
        start = max(0, keyword.start() - MAX_PATTERN_SOURCE // 2)
        line = line[start : start + MAX_PATTERN_SOURCE]
    return _VARYING.sub(_general, re.escape(line[:MAX_PATTERN_SOURCE]))


def propose(
    log_tail: str,
    label: str,
    current: Any,
    existing: list[Rule],
    remedy: str | None = None,
    note: str = "",
) -> dict[str, Any]:
    """A rule (as stored) that gives this log ``label``; ``current`` is today's verdict."""
    lines = distinctive_lines(log_tail)
    if not lines:
        raise ValueError("the log is empty: there is no line to learn from")
    winner = next((r for r in existing if r.id == current.rule_id), None)
    priority = MIN_PRIORITY
    if winner is not None and winner.label != label:
        priority = min(99, max(MIN_PRIORITY, winner.priority + 1))
    used = {rule.id for rule in existing}
    number = 1
    while f"{FAMILY}.{number}" in used:
        number += 1
    return {
        "id": f"{FAMILY}.{number}",
        "label": label,
        "priority": priority,
        "patterns": [generalize(line) for line in lines],
        "retryable": bool(LABEL_RETRYABLE.get(label, False)),
        "cause": f"learned: the same failure as before ({label})",
        "remedy": remedy or "the remedy recorded when this failure was first understood",
        "note": note,
    }


def save(directory: str, rule: dict[str, Any]) -> str:
    """Append ``rule`` to ``learned.json`` in ``directory``: validated and vetted first (no bare
    word, no known log of another label: ``vetting.py``), written atomically."""
    from rgt.triage.vetting import vet

    vet(rule)
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, LEARNED_FILE)
    doc: dict[str, Any] = {"family": FAMILY, "rules": []}
    if os.path.exists(path):
        with open(path, encoding="utf-8") as handle:
            doc = json.load(handle)
    doc["rules"] = [r for r in doc.get("rules", []) if r.get("id") != rule["id"]] + [rule]
    for parsed in parse_family(doc, path):  # a rule that would not load is never written
        _check_retry(parsed, path, doc)
    temp = f"{path}.tmp-{os.getpid()}"
    with open(temp, "w", encoding="utf-8") as handle:
        json.dump(doc, handle, indent=2, ensure_ascii=False)
        handle.write("\n")
    os.replace(temp, path)
    return path
