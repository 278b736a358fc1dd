"""Classify a failed job from its log tail, exit status and system readings.

Every rule whose conditions hold "fires"; the fired rule with the highest priority names the root
cause (``label``), the labels of the others become ``secondary``. A log can be huge and only its
end matters, so callers hand in a tail (``read_tail``) and the engine searches it once per pattern.
Runs on the rented machine inside the agent: stdlib only, Python 3.8.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from re import Match, Pattern
from typing import Any

from rgt.triage.exception import Uncaught, uncaught_exception
from rgt.triage.launchers import focus
from rgt.triage.nearest import Nearest, nearest, suspects
from rgt.triage.prefilter import Haystack, anchors_for, required
from rgt.triage.rules import Rule, load_rules

DEFAULT_TAIL_BYTES = 256 * 1024
MAX_EVIDENCE = 6
MAX_EVIDENCE_CHARS = 300
AT_END_LINES = 3  # what an ``at_end`` rule reads: the last lines before the log fell silent
LEARNED_PREFIX = "learned."  # the family of the user's learned rules (``learned.py``)

# A Python traceback or an uncaught C++ exception means the program itself saw the failure; a
# process that died with neither was killed from outside (OOM killer, scheduler, platform).
_TRACEBACK = re.compile(
    r"^\s*Traceback \(most recent call last\):|terminate called after throwing an instance of",
    re.MULTILINE,
)


UNKNOWN_CAUSE = "no rule in the triage rule base matched this failure"
UNKNOWN_REMEDY = (
    "read the evidence (the last lines of the log); do not retry blindly - a failure nobody "
    "understands is a bug until shown otherwise"
)


@dataclass(frozen=True)
class Verdict:
    label: str
    secondary: list[str] = field(default_factory=list)
    retryable: bool = False
    cause: str = UNKNOWN_CAUSE
    remedy: str = UNKNOWN_REMEDY
    evidence: list[str] = field(default_factory=list)
    rule_id: str = "unknown"
    # Only an ``unknown`` verdict fills these (``nearest.py``): the lines that read most like the
    # failure, and the label whose rules came closest to firing, with its score.
    suspects: list[str] = field(default_factory=list)
    nearest: Nearest | None = None

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "label": self.label,
            "secondary": list(self.secondary),
            "retryable": self.retryable,
            "cause": self.cause,
            "remedy": self.remedy,
            "evidence": list(self.evidence),
            "rule_id": self.rule_id,
        }
        if self.label == "unknown":
            data["suspects"] = list(self.suspects)
            data["nearest"] = self.nearest.to_dict() if self.nearest else None
        return data


@lru_cache(maxsize=1)  # functools.cache is Python 3.9+; the agent runs on 3.8
def default_rules() -> tuple[Rule, ...]:
    """The packaged rule base plus the user's learned rules ($RGT_TRIAGE_RULES), loaded once."""
    from rgt.triage.learned import bundled_user_rules, load_user_rules, user_rule_dir

    directory = user_rule_dir()  # a directory named by the user wins over the copy in the agent
    learned = load_user_rules(directory) if directory else bundled_user_rules()
    rules = load_rules() + learned
    return tuple(sorted(rules, key=lambda rule: -rule.priority))


def classify(
    log_tail: str,
    exit_code: int | None = None,
    signal: int | None = None,
    context: dict[str, Any] | None = None,
    rules: Sequence[Rule] | None = None,
) -> Verdict:
    """One verdict for a failed job; ``label`` is ``unknown`` when no rule fires."""
    ranked = sorted(rules, key=lambda r: -r.priority) if rules is not None else default_rules()
    log_tail = focus(log_tail)  # a launcher's cascade (other ranks, its SIGTERMs) is no cause
    fired = fired_rules(log_tail, exit_code, signal, context or {}, ranked)
    exit_code, signal = normalize_status(exit_code, signal)
    silencing = silencing_labels(fired)
    fired = [(r, lines) for r, lines in fired if not silencing.intersection(r.yields_to)]
    fired = built_in_bugs_first(fired)
    if not fired:
        return unknown_verdict(log_tail, ranked)
    winner, lines = fired[0]
    return Verdict(
        label=winner.label,
        secondary=_secondary(winner.label, [rule.label for rule, _ in fired[1:]]),
        retryable=winner.retryable,
        cause=winner.cause,
        remedy=winner.remedy,
        evidence=lines or _status_evidence(exit_code, signal, context or {}),
        rule_id=winner.id,
    )


def fired_rules(
    log_tail: str,
    exit_code: int | None,
    signal: int | None,
    context: dict[str, Any],
    ranked: Sequence[Rule],
) -> list[tuple[Rule, list[str]]]:
    """Every rule whose conditions hold, highest priority first, with the lines it matched."""
    exit_code, signal = normalize_status(exit_code, signal)
    anchors = anchors_for([pattern for rule in ranked for pattern in rule.patterns])
    facts = _Facts(log_tail, exit_code, signal, context, anchors)
    found = ((rule, facts.fire(rule)) for rule in ranked)
    return [(rule, lines) for rule, lines in found if lines is not None]


def built_in_bugs_first(
    fired: list[tuple[Rule, list[str]]],
) -> list[tuple[Rule, list[str]]]:
    """A learned rule never makes retryable what a built-in rule calls a bug.

    When a built-in rule that is not retryable fired (a host OOM kill, a code error), every
    learned retryable rule that fired ranks below all the built-in ones, whatever its priority:
    a rule learned from one log (or saved by an older rgt that did not vet it, such as the bare
    ``Killed`` -> preempted) cannot turn the agent's stop into a blind restart. Learned rules
    that stop retries keep their priority.
    """
    if not any(not rule.retryable and not _learned(rule) for rule, _ in fired):
        return fired
    widens = [_learned(rule) and rule.retryable for rule, _ in fired]
    return [p for p, w in zip(fired, widens) if not w] + [p for p, w in zip(fired, widens) if w]


def silencing_labels(fired: list[tuple[Rule, list[str]]]) -> set[str]:
    """The labels whose firing silences a rule that ``yields_to`` them: never the label of a
    learned retryable rule (a learned ``preempted`` must not silence the bare-``Killed`` rule)."""
    return {rule.label for rule, _ in fired if not (_learned(rule) and rule.retryable)}


def _learned(rule: Rule) -> bool:
    return rule.id.startswith(LEARNED_PREFIX)


def unknown_verdict(log_tail: str, ranked: Sequence[Rule]) -> Verdict:
    """No rule fired: say so, with the suspect lines first and the nearest label in the cause."""
    lines = suspects(log_tail)
    near = nearest(lines, ranked) if lines else None
    cause = unknown_cause(log_tail)
    if near is not None:
        cause += (
            f"; nearest label: {near.label} (score {near.score:.2f}, rule {near.rule_id}) - read "
            f"the suspect lines; if that is the cause, `rgt triage LOG --learn {near.label}`"
        )
    tail = last_lines(log_tail)
    evidence = [line for line in lines if line[:MAX_EVIDENCE_CHARS] not in tail] + tail
    return Verdict(label="unknown", cause=cause, evidence=evidence, suspects=lines, nearest=near)


def unknown_cause(log_tail: str) -> str:
    """Why no rule could match: an empty or binary log says so instead of a generic shrug."""
    if not log_tail.strip():
        return UNKNOWN_CAUSE + "; the log is empty (the job printed nothing it kept)"
    sample = log_tail[-65536:]
    odd = sum(1 for ch in sample if ch == "\ufffd" or (ch < " " and ch not in "\t\r\n"))
    if odd * 10 > len(sample):
        return UNKNOWN_CAUSE + "; the log is mostly binary or not UTF-8 text"
    return UNKNOWN_CAUSE


def normalize_status(exit_code: int | None, signal: int | None) -> tuple[int | None, int | None]:
    """Derive the signal from a shell-style status: 137 is SIGKILL, -9 (subprocess) too."""
    if signal is None and exit_code is not None:
        if exit_code < 0:
            signal = -exit_code
        elif 128 < exit_code < 128 + 65:
            signal = exit_code - 128
    return exit_code, signal


def _secondary(primary: str, labels: list[str]) -> list[str]:
    seen: list[str] = []
    for label in labels:
        if label != primary and label not in seen:
            seen.append(label)
    return seen


def _status_evidence(
    exit_code: int | None, signal: int | None, context: dict[str, Any]
) -> list[str]:
    parts = []
    if exit_code is not None:
        parts.append(f"exit code {exit_code}")
    if signal is not None:
        parts.append(f"signal {signal}")
    parts.extend(f"{key}={context[key]!r}" for key in sorted(context))
    return [", ".join(parts)] if parts else []


class _Facts:
    """What one classification knows; caches pattern searches shared by several rules."""

    def __init__(
        self,
        text: str,
        exit_code: int | None,
        signal: int | None,
        context: dict[str, Any],
        anchors: dict[str, str] | None = None,
    ) -> None:
        self.text = text
        self.exit_code = exit_code
        self.signal = signal
        self.context = context
        self.has_traceback = _TRACEBACK.search(text) is not None
        self.haystack = Haystack(text, anchors)
        self._uncaught: Uncaught | bool | None = False  # False: not looked for yet
        self._lines: dict[tuple[Pattern[str], Pattern[str] | None], list[tuple[int, str]]] = {}
        self._gates: dict[Pattern[str], list[tuple[int, int]]] = {}
        self.end_lines = last_lines(text[-16384:], AT_END_LINES)  # the end, not the whole tail

    def fire(self, rule: Rule) -> list[str] | None:
        """The evidence lines if the rule fires (none for a status-only rule), else None."""
        if self.exit_code == 0 and not rule.fires_on_success:
            return None
        if not self._status_holds(rule) or not rule.context_holds(self.context):
            return None
        if rule.requires_no_traceback and self.has_traceback:
            return None
        if rule.uncaught_exception:
            return self._uncaught_evidence(rule)
        return self._pattern_evidence(rule)

    def _gate_spans(self, gate: Pattern[str]) -> list[tuple[int, int]]:
        """The lines a rule's ``line_gate`` matches; a case-blind gate is run, case-sensitive
        and so several times faster, on the lower-cased twin (same offsets) when there is one."""
        if gate not in self._gates:
            hay, finder = self.text, gate
            if gate.flags & re.IGNORECASE and self.haystack.lower is not None:
                hay, finder = self.haystack.lower, _case_sensitive(gate.pattern, gate.flags)
            self._gates[gate] = _gated_lines(hay, finder)
        return self._gates[gate]

    def _uncaught_evidence(self, rule: Rule) -> list[str] | None:
        if self._uncaught is False:
            self._uncaught = uncaught_exception(self.text) if self.has_traceback else None
        if not isinstance(self._uncaught, Uncaught):
            return None
        if rule.patterns and self._pattern_evidence(rule) is None:
            return None
        return self._uncaught.evidence()

    def _status_holds(self, rule: Rule) -> bool:
        if rule.exit_codes and self.exit_code not in rule.exit_codes:
            return False
        return not rule.signals or self.signal in rule.signals

    def _pattern_evidence(self, rule: Rule) -> list[str] | None:
        if rule.at_end:
            return self._end_evidence(rule)
        found = [self._matches(pattern, rule.line_gate) for pattern in rule.patterns]
        if rule.patterns and (not all(found) if rule.match_all else not any(found)):
            return None
        merged = sorted({pos_line for lines in found for pos_line in lines})
        return [line for _, line in merged][-MAX_EVIDENCE:]

    def _end_evidence(self, rule: Rule) -> list[str] | None:
        hits = [[ln for ln in self.end_lines if p.search(ln)] for p in rule.patterns]
        if not (all(hits) if rule.match_all else any(hits)):
            return None
        return [ln for ln in self.end_lines if any(ln in h for h in hits)]

    def _matches(
        self, pattern: Pattern[str], gate: Pattern[str] | None = None
    ) -> list[tuple[int, str]]:
        key = (pattern, gate)
        if key not in self._lines:
            found = [_line_at(self.text, m) for m in self._search(pattern, gate)]
            self._lines[key] = found[-MAX_EVIDENCE:]
        return self._lines[key]

    def _search(self, pattern: Pattern[str], gate: Pattern[str] | None) -> list[Match[str]]:
        """Every match, on the lines the literal prefilter (or the rule's gate) lets through."""
        if gate is not None:
            spans: list[tuple[int, int]] | None = self._gate_spans(gate)
        else:
            spans = self.haystack.candidate_lines(pattern, required(pattern))
        if spans is None:
            return list(pattern.finditer(self.text))
        return [m for start, end in spans for m in pattern.finditer(self.text, start, end)]


@lru_cache(maxsize=32)
def _case_sensitive(source: str, flags: int) -> Pattern[str]:
    return re.compile(source, flags & ~re.IGNORECASE)


def _gated_lines(text: str, gate: Pattern[str]) -> list[tuple[int, int]]:
    """(start, end) of each line the gate matches, once per line."""
    spans: list[tuple[int, int]] = []
    for match in gate.finditer(text):
        start = text.rfind("\n", 0, match.start()) + 1
        if spans and spans[-1][0] == start:
            continue
        end = text.find("\n", match.end())
        spans.append((start, len(text) if end < 0 else end))
    return spans


def _line_at(text: str, match: Match[str]) -> tuple[int, str]:
    """The (offset, trimmed) line holding a match; progress-bar ``\\r`` segments are cut away."""
    start = text.rfind("\n", 0, match.start()) + 1
    end = text.find("\n", match.end())
    line = text[start : len(text) if end < 0 else end]
    first = match.start() + len(match.group()) - len(match.group().lstrip("\r"))
    seg_start = line.rfind("\r", 0, first - start) + 1
    seg_end = line.find("\r", match.end() - start)
    segment = line[seg_start : len(line) if seg_end < 0 else seg_end].strip()
    return start, segment.replace("\r", "\\r")[:MAX_EVIDENCE_CHARS]


def last_lines(text: str, count: int = 8) -> list[str]:
    """The last non-empty lines, the evidence an ``unknown`` verdict shows."""
    lines = [line.strip()[:MAX_EVIDENCE_CHARS] for line in text.splitlines() if line.strip()]
    return lines[-count:]


def read_tail(path: str, max_bytes: int = DEFAULT_TAIL_BYTES) -> str:
    """The last ``max_bytes`` of a log, decoded leniently, starting at a line boundary."""
    with open(path, "rb") as handle:
        size = handle.seek(0, os.SEEK_END)
        start = max(0, size - max_bytes)
        handle.seek(start)
        data = handle.read(max_bytes)  # a log still growing never makes this read unbounded
    if start > 0:
        cut = data.find(b"\n")
        data = data[cut + 1 :] if 0 <= cut < len(data) - 1 else data
    return data.decode("utf-8", errors="replace")
