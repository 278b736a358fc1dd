"""Vet a learned rule before it is stored: a learned rule may narrow retries, never widen them.

A rule learned from one log is a regex over that log's failure line, and the agent on the rented
machine ships it (``rgt.agent.build``): a rule that is too broad decides every later failure it
matches, and a retryable one restarts them with the same config. So a proposed rule is refused,
with the reason and the fix, when

- a pattern is a bare one-word literal (``Killed``, ``Error``): it matches every log that says the
  word, whatever the cause. ``Killed`` alone is what the shell prints for an OOM kill and for a
  preemption alike;
- it does not match the log it was learned from (it would never have decided that log);
- it matches a labelled log of another label among rgt's known logs (``known/logs.json``: the tails
  of the triage corpus the built-in rules are tested on, shipped because ``tests/`` is not);
- it is retryable and a built-in rule that is not retryable fires on its own log (a host OOM kill
  stays a bug; the engine keeps the same promise at match time for rules stored before this check).

Runs on the CLI side only: the known logs are not bundled into the agent.
"""

from __future__ import annotations

import json
import pkgutil
import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from rgt.triage.engine import fired_rules
from rgt.triage.rules import Rule, RuleFileError, load_rules, parse_rule

KNOWN_LOGS = "known/logs.json"
MIN_WORDS = 2
_CLASS = re.compile(r"\[(?:\\.|[^\]\\])*\]")  # [0-9a-fA-F]: no word of the failure
_SYNTAX = re.compile(r"\\[A-Za-z]|\(\?P?<?[A-Za-z_]*>?|\(\?[:=!]")  # \d \b (?: (?P<x>
_WORD = re.compile(r"[A-Za-z]{2,}")


class RuleRefused(RuleFileError):
    """A proposed learned rule that may not be stored; ``fix`` says what to do instead."""

    def __init__(self, message: str, fix: str) -> None:
        super().__init__(message)
        self.fix = fix


@dataclass(frozen=True)
class KnownLog:
    name: str
    label: str
    tail: str
    exit_code: int | None = None
    signal: int | None = None
    context: dict[str, Any] = field(default_factory=dict)


@lru_cache(maxsize=1)
def known_logs() -> tuple[KnownLog, ...]:
    """The labelled log tails rgt ships to test learned rules against."""
    data = pkgutil.get_data("rgt.triage", KNOWN_LOGS)
    if data is None:
        raise RuleFileError(f"{KNOWN_LOGS}: not found in package rgt.triage")
    return tuple(KnownLog(**entry) for entry in json.loads(data.decode("utf-8"))["logs"])


def vet(
    raw: dict[str, Any],
    log: str | None = None,
    exit_code: int | None = None,
    signal: int | None = None,
    context: dict[str, Any] | None = None,
) -> Rule:
    """The parsed rule, or ``RuleRefused``; ``log`` is the log it was learned from, if known."""
    rule = parse_rule(raw, f"learned rule {raw.get('id')}", "learned")
    for pattern in raw.get("patterns", []):
        _not_bare(str(pattern))
    if log is not None:
        _matches_own(rule, log, exit_code, signal, context or {})
        _not_widening(rule, log, exit_code, signal, context or {})
    _no_other_label(rule)
    return rule


def words(pattern: str) -> list[str]:
    """The words a pattern asks the log to say (classes, escapes and group syntax left out)."""
    return _WORD.findall(_SYNTAX.sub(" ", _CLASS.sub(" ", pattern)))


def _not_bare(pattern: str) -> None:
    said = words(pattern)
    if len(said) >= MIN_WORDS:
        return
    word = said[0] if said else pattern
    raise RuleRefused(
        f"pattern {pattern!r} is a bare one-word literal: it matches every log that says "
        f"{word!r}, whatever the cause (an OOM kill and a preemption both end in 'Killed')",
        fix="learn from a log whose failure line says more (the platform's own notice, the "
        "message with its context), or write the rule by hand with a pattern of several words",
    )


def _matches_own(
    rule: Rule, log: str, exit_code: int | None, signal: int | None, context: dict[str, Any]
) -> None:
    if not fired_rules(log, exit_code, signal, context, [rule]):
        raise RuleRefused(
            f"rule {rule.id} does not match the log it was learned from",
            fix="edit its pattern until it matches a line of that log "
            "(`rgt triage LOG --explain` shows the lines rules read)",
        )


def _not_widening(
    rule: Rule, log: str, exit_code: int | None, signal: int | None, context: dict[str, Any]
) -> None:
    if not rule.retryable:
        return  # a rule that stops retries can only make the agent more careful
    fired = [rule for rule, _ in fired_rules(log, exit_code, signal, context, load_rules())]
    labels = {built_in.label for built_in in fired}
    for built_in in fired:  # as the engine ranks them: a rule silenced by yields_to decides nothing
        if not built_in.retryable and not labels.intersection(built_in.yields_to):
            raise RuleRefused(
                f"built-in rule {built_in.id} labels this log {built_in.label}, which is not "
                f"retryable; a learned rule may never make it retryable ({rule.label}), or the "
                "agent would restart the same failure with the same config",
                fix=f"learn it under a label that is not retryable (such as {built_in.label}) "
                f"with your remedy; if rule {built_in.id} is wrong for this log, report it",
            )


def _no_other_label(rule: Rule) -> None:
    hits = [
        known
        for known in known_logs()
        if known.label not in (rule.label, "unknown")
        and fired_rules(known.tail, known.exit_code, known.signal, known.context, [rule])
    ]
    if hits:
        named = ", ".join(f"{k.name} ({k.label})" for k in hits[:3])
        more = f" and {len(hits) - 3} more" if len(hits) > 3 else ""
        raise RuleRefused(
            f"rule {rule.id} ({rule.label}) also matches known logs of another label: "
            f"{named}{more}; it would call those failures {rule.label}",
            fix="make the pattern more specific (more of the failure line, fewer wildcards), "
            "so it matches this failure and not the others",
        )
