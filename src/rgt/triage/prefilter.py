"""Literal prefilter: skip a regex over a log tail unless the text holds what every match needs.

Python's ``re`` scans a 256 KiB tail at tens of MB/s per pattern when a pattern does not start
with a literal, and the rule base has ~170 patterns. Most never match a healthy log, so for each
pattern we derive the literals any match must contain ("loss" and one of "nan"/"inf") from the
regex's parse tree, count them with ``str.count`` (C speed), and run the regex only on the lines
that hold the rarest required literal. Patterns are meant to match within one line.
"""

from __future__ import annotations

import re
from re import Pattern
from typing import Any, Tuple

try:  # Python 3.11 moved the parser and deprecated the old module name
    from re import _parser as sre_parse  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - Python < 3.11 (the agent's 3.8)
    import sre_parse  # type: ignore[no-redef]

MIN_LITERAL = 3
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


class Haystack:
    """A log tail with its lower-cased twin (for case-insensitive patterns) and line lookup."""

    def __init__(self, text: str) -> None:
        self.text = text
        lowered = text.lower()
        # Lower-casing can change the length of some non-ASCII text; then offsets would lie.
        self.lower = lowered if len(lowered) == len(text) else None
        self._counts: dict[tuple[bool, str], int] = {}

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
            self._counts[key] = hay.count(literal)
        return self._counts[key]

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
