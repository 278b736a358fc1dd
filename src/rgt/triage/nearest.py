"""What an ``unknown`` verdict still knows: the lines that read most like the failure, and the
label whose rules came closest to firing.

No rule fired, so nothing is certain, but a user (or ``rgt triage LOG --learn LABEL``) needs a
place to start: the lines with the most failure words ("error", "killed", "timed out", "nan"),
and the nearest label with a score in [0, 1]. The score of a rule is the share of the words its
best pattern needs that occur in those lines (a pattern needs all of them to match, so 1.0 means
the words are there but not in the order or form the rule wants). A score is evidence to read, not
a verdict: the retry decision never uses it. Stdlib only, Python 3.8 (the agent bundles it).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from re import Pattern

from rgt.triage.prefilter import requirements
from rgt.triage.rules import Rule

MAX_SUSPECTS = 5
SUSPECT_CHARS = 300
WINDOW_CHARS = 32768  # the end of the tail: where the failure is, and a bounded cost
MIN_WORD = 4
# Words a failure line tends to hold, in any tool's phrasing; each distinct hit adds to the score.
_FAILURE = re.compile(
    r"\b(?:error|exception|fail(?:ed|ure|ing)?|fatal|killed|kill|abort(?:ed|ing)?|"
    r"terminat(?:ed|ing|e)|timed? ?out|timeout|cannot|can't|unable|denied|refused|nan|inf|"
    r"oom|out of memory|traceback|signal|cancel(?:l?ed)?|exceeded|lost|crash(?:ed)?|"
    r"segmentation fault|core dumped|panic|no such|not found|invalid|evicted|preempt\w*)\b",
    re.IGNORECASE,
)
_WORD = re.compile(r"[a-z][a-z0-9]+")


@dataclass(frozen=True)
class Nearest:
    label: str
    rule_id: str
    score: float

    def to_dict(self) -> dict[str, object]:
        return {"label": self.label, "rule_id": self.rule_id, "score": self.score}


def suspects(text: str, count: int = MAX_SUSPECTS) -> list[str]:
    """The lines with the most distinct failure words (later lines win ties), in log order."""
    window = text[-WINDOW_CHARS:]
    hits: dict[int, set[str]] = {}  # line start -> the distinct failure words on that line
    for match in _FAILURE.finditer(window):  # one pass over the window, not one per line
        start = window.rfind("\n", 0, match.start()) + 1
        hits.setdefault(start, set()).add(match.group().lower())
    best = sorted(hits, key=lambda start: (len(hits[start]), start), reverse=True)[:count]
    lines = [_line(window, start) for start in sorted(best)]
    return [line[:SUSPECT_CHARS] for line in lines if line]


def _line(text: str, start: int) -> str:
    end = text.find("\n", start)
    return text[start : len(text) if end < 0 else end].strip()


def nearest(lines: Sequence[str], rules: Sequence[Rule]) -> Nearest | None:
    """The rule whose best pattern scores highest on ``lines`` (None when no word is shared)."""
    present = {_stem(word) for word in _WORD.findall(" ".join(lines).lower())}
    weight = _weights(tuple(rules))
    best: Nearest | None = None
    for rule in rules:
        score = max((_score(p, present, weight) for p in rule.patterns), default=0.0)
        if score > 0 and (best is None or score > best.score):
            best = Nearest(rule.label, rule.id, round(score, 2))
    return best


def _score(pattern: Pattern[str], present: set[str], weight: dict[str, float]) -> float:
    words = _pattern_words(pattern)
    found = sum(weight[word] for word in words if word in present)
    return found / (sum(weight[word] for word in words) + 1.0) if found else 0.0


_WORDS: dict[Pattern[str], frozenset[str]] = {}
_WEIGHTS: dict[tuple[str, ...], dict[str, float]] = {}


def _pattern_words(pattern: Pattern[str]) -> frozenset[str]:
    """The stems every match of ``pattern`` holds (from its required literals), cached."""
    if pattern not in _WORDS:
        literals = [alts[0] for alts in requirements(pattern) if len(alts) == 1]
        words = (w for lit in literals for w in _WORD.findall(lit.lower()))
        _WORDS[pattern] = frozenset(_stem(w) for w in words if len(w) >= MIN_WORD)
    return _WORDS[pattern]


def _weights(rules: tuple[Rule, ...]) -> dict[str, float]:
    """1 / (how many rules need the word): rare words identify a label, common ones do not."""
    key = tuple(rule.id for rule in rules)
    if key not in _WEIGHTS:
        seen: dict[str, int] = {}
        for rule in rules:
            for word in {w for p in rule.patterns for w in _pattern_words(p)}:
                seen[word] = seen.get(word, 0) + 1
        _WEIGHTS[key] = {word: 1.0 / count for word, count in seen.items()}
    return _WEIGHTS[key]


def _stem(word: str) -> str:
    for suffix in ("ing", "ed", "es", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= MIN_WORD:
            return word[: -len(suffix)]
    return word
