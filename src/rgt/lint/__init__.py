"""`rgt lint`: static checks for the silent bugs of training scripts, before a GPU is rented.

``lint_paths(["train.py"])`` reads each file (and the local modules a script imports), runs
every rule family over its syntax tree (stdlib ``ast`` only: nothing is imported or executed)
and returns a ``LintReport``. Rules: ``RULES`` (codes RGT1xx losses/optimizer, RGT2xx modes and
graphs, RGT3xx data pipeline, RGT4xx resilience, RGT5xx throughput). A finding is silenced by
``# rgt: noqa`` (all codes) or ``# rgt: noqa RGT101,RGT204`` on its line.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path

from rgt.errors import UsageError
from rgt.lint import data, losses, modes, resilience, throughput
from rgt.lint._facts import Facts
from rgt.lint._model import FileNote, Finding, Hit, LintReport, Rule, Severity
from rgt.lint._source import Source, expand, load, local_imports

__all__ = ["RULES", "FileNote", "Finding", "LintReport", "Rule", "Severity", "lint_paths"]

RULES: dict[str, Rule] = {
    r.code: r for family in (losses, modes, data, resilience, throughput) for r in family.RULES
}


def lint_paths(
    paths: Iterable[str], select: Iterable[str] = (), ignore: Iterable[str] = ()
) -> LintReport:
    """Lint files and folders; ``select``/``ignore`` take codes or prefixes (``RGT1``)."""
    wanted = _codes(select) or set(RULES)
    wanted -= _codes(ignore)
    sources, skipped = _read(expand(list(paths)))
    words: set[str] = set()
    facts = []
    for source in sources:
        one = Facts.build(source.tree)
        words |= one.words
        facts.append((source, one))
    findings: list[Finding] = []
    for source, one in facts:
        findings.extend(_findings(source, one, words, wanted))
    findings.sort(key=lambda f: (f.path, f.cell or 0, f.line, f.col, f.code))
    return LintReport(tuple(findings), tuple(skipped), len(sources) + len(skipped))


def _codes(given: Iterable[str]) -> set[str]:
    out: set[str] = set()
    for item in given:
        for code in filter(None, (c.strip().upper() for c in item.split(","))):
            match = {c for c in RULES if c.startswith(code)}
            if not match:
                raise UsageError(
                    f"unknown lint code {code!r}",
                    fix=f"use one of {', '.join(sorted(RULES))} (or a prefix such as RGT1)",
                )
            out |= match
    return out


def _read(paths: list[Path]) -> tuple[list[Source], list[FileNote]]:
    """The named files, then the local modules they import (each file once)."""
    seen: set[Path] = set()
    sources: list[Source] = []
    skipped: list[FileNote] = []
    queue = list(paths)
    while queue:
        path = queue.pop(0)
        key = path.resolve()
        if key in seen:
            continue
        seen.add(key)
        loaded = load(path)
        if isinstance(loaded, FileNote):
            skipped.append(loaded)
            continue
        sources.append(loaded)
        queue.extend(local_imports(loaded))
    return sources, skipped


def _findings(source: Source, facts: Facts, words: set[str], wanted: set[str]) -> Iterator[Finding]:
    seen: set[tuple[str, int]] = set()
    for hit in _hits(facts, words):
        line = getattr(hit.node, "lineno", 1)
        if hit.code not in wanted or (hit.code, line) in seen or _silenced(source, hit, line):
            continue
        seen.add((hit.code, line))
        col = getattr(hit.node, "col_offset", 0) + 1
        cell, where = source.locate(line)
        yield Finding(source.path, where, col, RULES[hit.code], hit.detail, cell)


def _hits(facts: Facts, words: set[str]) -> Iterator[Hit]:
    yield from losses.check(facts)
    yield from modes.check(facts, words)
    yield from data.check(facts, words)
    yield from resilience.check(facts, words)
    yield from throughput.check(facts, words)


def _silenced(source: Source, hit: Hit, line: int) -> bool:
    codes = source.noqa.get(line)
    return codes is not None and (not codes or hit.code in codes)
