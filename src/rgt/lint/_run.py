"""Running the rule families over parsed files: one file at a time, or in worker processes.

A file's analysis needs only its own text and the project's identifiers (``words``), so many
files are spread over ``os.cpu_count()`` processes (forked, so nothing is re-imported).
"""

from __future__ import annotations

import gc
import multiprocessing
import os
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor

from rgt.lint import _cache, data, losses, modes, resilience, throughput
from rgt.lint._facts import Facts
from rgt.lint._model import FileNote, Finding, Hit, Rule
from rgt.lint._source import Source, Text, parse

RULES: dict[str, Rule] = {
    r.code: r for family in (losses, modes, data, resilience, throughput) for r in family.RULES
}
# The project-wide identifiers the rules ask about (``words & ...``): part of the cache key.
QUERIED = frozenset({"set_epoch"} | modes.LAYER_WORDS | resilience.LOADS | throughput.GPU)
PARALLEL_FROM = 16  # files; below this a process pool costs more than it saves
Outcome = tuple[list[Finding], list[FileNote]]


def analyse(
    texts: list[Text], words: frozenset[str], wanted: frozenset[str], cache: bool = True
) -> Outcome:
    """Findings and notes of every text: from the cache when it has them, else analysed and
    stored."""
    if not cache:
        return _spread(texts, words, wanted)
    context = _cache.context(words, wanted, QUERIED)
    findings: list[Finding] = []
    notes: list[FileNote] = []
    missing: dict[str, str] = {}  # path → entry
    for text in texts:
        entry = _cache.key(text, context)
        hit = _cache.load(text, entry, RULES)
        if hit is None:
            missing[text.path] = entry
        else:
            findings += hit[0]
            notes += hit[1]
    fresh = _spread([t for t in texts if t.path in missing], words, wanted)
    by_path: dict[str, Outcome] = {path: ([], []) for path in missing}
    for finding in fresh[0]:
        by_path[finding.path][0].append(finding)
    for note in fresh[1]:
        by_path[note.path][1].append(note)
    for path, entry in missing.items():
        _cache.store(entry, by_path[path])
    return findings + fresh[0], notes + fresh[1]


def _spread(texts: list[Text], words: frozenset[str], wanted: frozenset[str]) -> Outcome:
    workers = min(os.cpu_count() or 1, 8)
    if len(texts) < PARALLEL_FROM or workers < 2 or "fork" not in _methods():
        return _many(texts, words, wanted)
    chunks = [texts[i::workers] for i in range(workers)]
    context = multiprocessing.get_context("fork")
    findings: list[Finding] = []
    notes: list[FileNote] = []
    with ProcessPoolExecutor(workers, mp_context=context) as pool:
        for found, skipped in pool.map(_many, chunks, [words] * workers, [wanted] * workers):
            findings += found
            notes += skipped
    return findings, notes


def _methods() -> list[str]:
    return multiprocessing.get_all_start_methods()


def _many(texts: list[Text], words: frozenset[str], wanted: frozenset[str]) -> Outcome:
    """Each text parsed and checked, the cyclic garbage collector off meanwhile: syntax trees
    hold no cycles (reference counting frees them), and the collector's passes over every
    new node cost ~15 % of a serial run."""
    findings: list[Finding] = []
    notes: list[FileNote] = []
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        for text in texts:
            source = parse(text)
            if isinstance(source, FileNote):
                notes.append(source)
            else:
                findings.extend(_findings(source, Facts.build(source.tree), words, wanted))
    finally:
        if was_enabled:
            gc.enable()
    return findings, notes


def _findings(
    source: Source, facts: Facts, words: frozenset[str], wanted: frozenset[str]
) -> Iterator[Finding]:
    seen: set[tuple[str, int]] = set()
    for hit in _hits(facts, set(words)):
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
