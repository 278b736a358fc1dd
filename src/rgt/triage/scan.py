"""Classify a whole log file, however big, in bounded memory and near ``grep`` speed.

``classify(read_tail(path))`` reads the last 256 KiB, which is what decides nearly every
failure. ``scan_file`` also looks at everything before: the lines of the whole file that any
rule's pattern matches, followed by the tail, go through the same ``classify``. Python's ``re``
has no DFA, so running ~200 patterns over 100 MB costs minutes. Where GNU grep is installed it
is the prefilter (``_grep``: one pass, the rules' literals as ERE) and Python runs the exact
rules on the lines it passes. Without it, each pattern is reduced to the literals every match
must contain (``prefilter``), the literals to short *anchors* (a substring shared by several
literals: finding no "emor" rules out "out of memory" and "outofmemoryerror" in one pass), and
the file is read as bytes, 8 MiB at a time, lower-cased once: ``bytes.count`` of an anchor runs
at memory speed, only an anchor that occurs sends its literals to be searched, and only a line
holding a pattern's literals is decoded and meets the regex. Ships inside the agent: stdlib
only, Python 3.8.
"""

from __future__ import annotations

import heapq
import os
from collections.abc import Iterator, Sequence
from functools import lru_cache
from re import Pattern
from typing import TYPE_CHECKING, Any, Dict, Tuple

from rgt.triage import _grep
from rgt.triage.engine import DEFAULT_TAIL_BYTES, Verdict, classify, default_rules, read_tail
from rgt.triage.prefilter import requirements
from rgt.triage.rules import Rule

CHUNK = 8 * 1024 * 1024
ANCHOR = 4  # anchor length: fewer, shorter anchors share more literals but occur more often
CROWDED = 2048  # an anchor seen more than once per this many bytes: search its literals instead
if TYPE_CHECKING:  # the patterns with their literals, and the anchors with theirs
    Options = Tuple[Tuple[bytes, ...], ...]
    Plan = Tuple[Tuple[Tuple[Pattern[str], Options], ...], Dict[bytes, Tuple[bytes, ...]]]


def scan_file(
    path: str,
    exit_code: int | None = None,
    signal: int | None = None,
    context: dict[str, Any] | None = None,
    rules: Sequence[Rule] | None = None,
) -> Verdict:
    """One verdict from the whole file: every matching line before the tail, then the tail."""
    ranked = tuple(rules) if rules is not None else default_rules()
    # A gated rule's lines are those its gate matches: the gate alone picks them up (a superset).
    plan = _plan(tuple(p for rule in ranked for p in _scan_patterns(rule)))
    size = os.path.getsize(path)  # a log still growing is read up to its size now
    tail_start = max(0, size - DEFAULT_TAIL_BYTES)
    early = _by_grep(path, plan, tail_start) if tail_start else []
    if early is None:
        early = []
        for _, chunk in _chunks(path, tail_start):
            early.extend(line for _at, line in hit_lines(plan, chunk))
    text = "\n".join([*early, read_tail(path)])
    return classify(text, exit_code, signal, context, ranked)


def _scan_patterns(rule: Rule) -> tuple[Pattern[str], ...]:
    return (rule.line_gate,) if rule.line_gate is not None else rule.patterns


def _by_grep(path: str, plan: Plan, limit: int) -> list[str] | None:
    """The matching lines before ``limit`` with GNU grep as the prefilter, or None to say
    Python must read the file itself (no GNU grep, a pattern grep cannot carry, grep failing)."""
    grep = _grep.gnu_grep()
    expressions = [_grep.ere(options) for _, options in plan[0]]
    if grep is None or None in expressions:
        return None
    try:
        lines = _grep.candidate_lines(grep, path, [e for e in expressions if e], limit)
    except OSError:
        return None
    by_literal: dict[str, list[Pattern[str]]] = {}
    for pattern, options in plan[0]:
        for lit in options[0]:
            by_literal.setdefault(lit.decode("ascii"), []).append(pattern)
    return [line for _, line in lines if _matches(by_literal, line)]


def _matches(by_literal: dict[str, list[Pattern[str]]], line: str) -> bool:
    """Some pattern matches the line. The literals are looked for first, in one comprehension
    (``in`` is far cheaper than a regex search, and a line grep let through usually holds the
    literals of few patterns)."""
    low = line.lower()
    present = [lit for lit in by_literal if lit in low]
    return any(p.search(line) for lit in present for p in by_literal[lit])


def _chunks(path: str, limit: int) -> Iterator[tuple[int, bytes]]:
    """Whole lines, about ``CHUNK`` bytes at a time, up to ``limit`` (where the tail begins);
    a line longer than four chunks is cut."""
    with open(path, "rb") as handle:
        offset, rest = 0, b""
        while True:
            want = min(CHUNK, limit - offset - len(rest))
            block = handle.read(want) if want > 0 else b""
            data = rest + block
            if not data:
                return
            cut = data.rfind(b"\n") + 1
            if not block or (cut == 0 and len(data) >= 4 * CHUNK):
                cut = len(data)
            rest = data[cut:]
            if cut:
                yield offset, data[:cut]
                offset += cut


def hit_lines(plan: Plan, chunk: bytes) -> list[tuple[int, str]]:
    """(line number, line) of each line of ``chunk`` that some pattern matches, in order."""
    low = chunk.lower()
    patterns, anchors = plan
    counts = _Counts(low, anchors)
    by_bytes: dict[int, str] = {}  # byte offset of the line -> the line
    by_text: dict[int, str] = {}  # the same, as a character offset in the decoded chunk
    text = ""
    for pattern, options in patterns:
        found, literals = counts.rarest(options)
        if found == 0:
            continue
        if found * CROWDED <= len(low):
            for start, end in {span for lit in literals for span in counts.spans(lit)}:
                line = chunk[start:end].decode("utf-8", errors="replace")
                if start not in by_bytes and pattern.search(line):
                    by_bytes[start] = line
            continue
        text = text or chunk.decode("utf-8", errors="replace")  # crowded: one regex pass
        for match in pattern.finditer(text):
            start = text.rfind("\n", 0, match.start()) + 1
            end = text.find("\n", match.end())
            by_text.setdefault(start, text[start : len(text) if end < 0 else end])
    lines = _numbered(low, b"\n", by_bytes)
    lines.update(_numbered(text, "\n", by_text))
    return sorted(lines.items())


class _Counts:
    """How often literals occur in a chunk, counted on demand. A pattern's first requirement
    has an anchor; only when that requirement is crowded are the others counted too."""

    def __init__(self, low: bytes, anchors: dict[bytes, tuple[bytes, ...]]) -> None:
        self.low = low
        self.memo: dict[bytes, int] = {}
        self.lines: dict[bytes, list[tuple[int, int]]] = {}
        for anchor, literals in anchors.items():
            found = low.count(anchor)
            if found * CROWDED > len(low):
                continue  # crowded: each literal is counted on its own, if ever needed
            spans = _spans(low, anchor) if found else []
            for literal in literals:  # a sparse anchor's lines are all its literals' lines
                self.lines[literal] = [(s, e) for s, e in spans if literal in low[s:e]]
                self.memo[literal] = len(self.lines[literal])

    def count(self, literal: bytes) -> int:
        if literal not in self.memo:
            self.memo[literal] = self.low.count(literal)
        return self.memo[literal]

    def spans(self, literal: bytes) -> list[tuple[int, int]]:
        if literal not in self.lines:
            self.lines[literal] = _spans(self.low, literal)
        return self.lines[literal]

    def rarest(self, options: Options) -> tuple[int, tuple[bytes, ...]]:
        """The requirement holding the fewest occurrences, and that number."""
        best: tuple[int, tuple[bytes, ...]] = (-1, ())
        for literals in options:
            found = sum(self.count(lit) for lit in literals)
            if best[0] < 0 or found < best[0]:
                best = (found, literals)
            if found * CROWDED <= len(self.low):
                break  # sparse enough: the lines it names are cheap to check
        return best


def _numbered(data: Any, newline: Any, lines: dict[int, str]) -> dict[int, str]:
    """The lines keyed by their line number instead of their offset."""
    numbered, number, previous = {}, 0, 0
    for start in sorted(lines):
        number += data.count(newline, previous, start)
        numbered[number] = lines[start]
        previous = start
    return numbered


def _spans(low: bytes, needle: bytes) -> list[tuple[int, int]]:
    """The (start, end) of each distinct line holding ``needle``."""
    spans: list[tuple[int, int]] = []
    pos = low.find(needle)
    while pos >= 0:
        start = low.rfind(b"\n", 0, pos) + 1
        end = low.find(b"\n", pos)
        end = len(low) if end < 0 else end
        if not spans or spans[-1][0] != start:
            spans.append((start, end))
        pos = low.find(needle, end + 1)
    return spans


@lru_cache(maxsize=4)
def _plan(patterns: tuple[Pattern[str], ...]) -> Plan:
    """Per pattern the literals one of which each match holds (lower-cased bytes), and the
    anchors: substrings covering all those literals, found by a greedy set cover."""
    chosen = tuple((p, _options(p)) for p in patterns)
    literals = sorted({lit for _, options in chosen for lit in options[0]})
    return chosen, _anchors(literals)


def _options(pattern: Pattern[str]) -> tuple[tuple[bytes, ...], ...]:
    """Each requirement of the pattern as lower-cased bytes: a match holds one literal of each,
    so the rarest in the chunk at hand picks the lines to try. A literal that is not ASCII
    cannot be lower-cased byte-wise; a pattern with no ASCII requirement (none today) gets the
    empty literal, found on every line."""
    reqs = [r for r in requirements(pattern) if all(lit.isascii() for lit in r)]
    reqs.sort(key=lambda alts: -min(len(lit) for lit in alts))  # the most selective first
    return tuple(tuple(sorted({lit.lower().encode("ascii") for lit in r})) for r in reqs) or (
        (b"",),
    )


def _anchors(literals: list[bytes]) -> dict[bytes, tuple[bytes, ...]]:
    covers: dict[bytes, set[bytes]] = {}
    for lit in literals:
        subs = {lit[i : i + ANCHOR] for i in range(len(lit) - ANCHOR + 1)} or {lit}
        for sub in subs:
            covers.setdefault(sub, set()).add(lit)
    left = set(literals)
    heap = [(-len(lits), sub) for sub, lits in covers.items()]
    heapq.heapify(heap)
    anchors: dict[bytes, tuple[bytes, ...]] = {}
    while left and heap:
        size, sub = heapq.heappop(heap)
        now = covers[sub] & left
        if len(now) < -size:  # lazy greedy: re-queue with its current gain
            if now:
                heapq.heappush(heap, (-len(now), sub))
            continue
        anchors[sub] = tuple(sorted(now))
        left -= now
    return anchors
