"""Literal prefilter: skip a regex over a log tail unless the text holds what every match needs.

Python's ``re`` scans a 256 KiB tail at tens of MB/s per pattern when a pattern does not start
with a literal, and the rule base has ~170 patterns. Most never match a healthy log, so for each
pattern we derive the literals any match must contain ("loss" and one of "nan"/"inf") from the
regex's parse tree, count them with ``str.count`` (C speed), and run the regex only on the lines
that hold the rarest required literal. Patterns are meant to match within one line.
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Iterable, Sequence
from re import Pattern
from typing import Any, Tuple

try:  # Python 3.11 moved the parser and deprecated the old module name
    from re import _parser as sre_parse  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - Python < 3.11 (the agent's 3.8)
    import sre_parse  # type: ignore[no-redef]

MIN_LITERAL = 3
ANCHOR = 4  # anchor length: shorter anchors cover more literals but occur more often
# Any one of these literals must occur. typing.Tuple: builtin generics fail at runtime on 3.8.
Requirement = Tuple[str, ...]


def requirements(pattern: Pattern[str]) -> list[Requirement]:
    """Sets of literals, each of which a match must contain one of ([] when nothing is known)."""
    try:
        parsed = sre_parse.parse(pattern.pattern, pattern.flags)
    except Exception:  # pragma: no cover - compiled patterns always parse
        return []
    fold = bool(pattern.flags & re.IGNORECASE)
    found = _sequence(list(parsed))
    return [tuple(lit.lower() if fold else lit for lit in alts) for alts in found]


_REQUIRED: dict[Pattern[str], list[Requirement]] = {}


def required(pattern: Pattern[str]) -> list[Requirement]:
    """``requirements``, once per pattern: the engine and the anchors both need them."""
    if pattern not in _REQUIRED:
        _REQUIRED[pattern] = requirements(pattern)
    return _REQUIRED[pattern]


def _sequence(items: list[Any]) -> list[Requirement]:
    reqs: list[Requirement] = []
    run: list[str] = []
    for op, arg in items:
        name = str(op)
        if name == "LITERAL":
            run.append(chr(arg))
            continue
        _flush(run, reqs)
        reqs.extend(_node(name, arg))
    _flush(run, reqs)
    return reqs


def _node(name: str, arg: Any) -> list[Requirement]:
    if name == "SUBPATTERN":
        return _sequence(list(arg[-1]))
    if name in ("MAX_REPEAT", "MIN_REPEAT") and arg[0] >= 1:
        return _sequence(list(arg[2]))
    if name == "BRANCH":
        choices = [_best(_sequence(list(branch))) for branch in arg[1]]
        if all(choices):
            return [tuple(lit for choice in choices for lit in choice)]
    return []


def _flush(run: list[str], reqs: list[Requirement]) -> None:
    if len(run) >= MIN_LITERAL:
        reqs.append(("".join(run),))
    run.clear()


def _best(reqs: list[Requirement]) -> Requirement:
    """The most selective requirement of a branch: the one whose shortest literal is longest."""
    usable = [alts for alts in reqs if min(len(lit) for lit in alts) >= MIN_LITERAL]
    return max(usable, key=lambda alts: min(len(lit) for lit in alts), default=())


def anchor_map(literals: Iterable[str]) -> dict[str, str]:
    """Each ASCII literal (lower-cased) to an *anchor*: a substring of ``ANCHOR`` characters it
    shares with as many other literals as a greedy set cover finds. Most literals are absent
    from a log; one ``count`` of an anchor that is absent rules out every literal it covers,
    where each literal would cost a pass of its own."""
    left = sorted({lit.lower() for lit in literals if lit.isascii() and len(lit) >= ANCHOR})
    covers: dict[str, set[str]] = {}
    for lit in left:
        for i in range(len(lit) - ANCHOR + 1):
            covers.setdefault(lit[i : i + ANCHOR], set()).add(lit)
    heap = [(-len(lits), sub) for sub, lits in covers.items()]
    heapq.heapify(heap)
    chosen: dict[str, str] = {}
    todo = set(left)
    while todo and heap:
        size, sub = heapq.heappop(heap)
        now = covers[sub] & todo
        if len(now) < -size:  # lazy greedy: re-queue with its current gain
            if now:
                heapq.heappush(heap, (-len(now), sub))
            continue
        chosen.update((lit, sub) for lit in now)
        todo -= now
    return chosen


_ANCHORS: dict[tuple[int, ...], dict[str, str]] = {}
_SEEN: set[tuple[int, ...]] = set()


def anchors_for(patterns: Sequence[Pattern[str]], eager: bool = False) -> dict[str, str]:
    """``anchor_map`` of every literal these patterns require, once per rule set (the packaged
    one, and a few others: tests, --learn). Building them costs about one classification's
    savings, so a rule set gets them from its second log on (``eager``: at once): a one-shot
    ``rgt triage`` never pays for them. Patterns are keyed by identity; a stale entry could
    only cost speed, never a match: each literal maps to a substring of itself."""
    key = tuple(id(pattern) for pattern in patterns)
    if key not in _ANCHORS:
        if not eager and key not in _SEEN:
            _SEEN.add(key)
            return {}
        if len(_ANCHORS) >= 8:
            _ANCHORS.clear()
            _SEEN.clear()
        literals = [lit for p in patterns for alts in required(p) for lit in alts]
        _ANCHORS[key] = anchor_map(literals)
    return _ANCHORS[key]


class Haystack:
    """A log tail with its lower-cased twin (for case-insensitive patterns) and line lookup.

    ``anchors`` (``anchor_map``) lets a literal be ruled out by its anchor's absence from the
    lower-cased twin: an ASCII literal that occurs in the text occurs lower-cased in the twin,
    so does each of its substrings."""

    def __init__(self, text: str, anchors: dict[str, str] | None = None) -> None:
        self.text = text
        lowered = text.lower()
        # Lower-casing can change the length of some non-ASCII text; then offsets would lie.
        self.lower = lowered if len(lowered) == len(text) else None
        self._counts: dict[tuple[bool, str], int] = {}
        self._anchors = anchors if self.lower is not None else None
        self._anchor_counts: dict[str, int] = {}

    def candidate_lines(
        self, pattern: Pattern[str], reqs: list[Requirement]
    ) -> list[tuple[int, int]] | None:
        """Line spans worth searching, [] when a requirement is absent, None to scan everything."""
        hay = self.lower if pattern.flags & re.IGNORECASE else self.text
        if not reqs or hay is None:
            return None
        counts = []
        # Longest literals first: the rarest, so an absent one ends the search soonest.
        for alts in sorted(reqs, key=lambda a: -min(len(lit) for lit in a)):
            counts.append((sum(self._count(hay, lit) for lit in alts), alts))
            if counts[-1][0] == 0:
                return []
        rarest = min(counts, key=lambda pair: pair[0])[1]
        return sorted({self._line_span(pos) for lit in rarest for pos in _positions(hay, lit)})

    def _count(self, hay: str, literal: str) -> int:
        """``hay.count(literal)``, once per literal: many patterns share their literals."""
        key = (hay is self.text, literal)
        if key not in self._counts:
            self._counts[key] = 0 if self._ruled_out(literal) else hay.count(literal)
        return self._counts[key]

    def _ruled_out(self, literal: str) -> bool:
        """The literal's anchor is absent from the lower-cased twin, so the literal is too."""
        anchor = self._anchors.get(literal.lower()) if self._anchors else None
        if anchor is None or self.lower is None:
            return False
        if anchor not in self._anchor_counts:
            self._anchor_counts[anchor] = self.lower.count(anchor)
        return self._anchor_counts[anchor] == 0

    def _line_span(self, pos: int) -> tuple[int, int]:
        start = self.text.rfind("\n", 0, pos) + 1
        end = self.text.find("\n", pos)
        return start, len(self.text) if end < 0 else end


def _positions(hay: str, literal: str) -> list[int]:
    found, pos = [], hay.find(literal)
    while pos >= 0:
        found.append(pos)
        pos = hay.find(literal, pos + 1)
    return found
