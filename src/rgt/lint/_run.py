"""Running the rule families over parsed files: one file at a time, or in worker processes.

A file's analysis needs only its own text and its project words (``_words``), so many
files are shared between this process and forked children (``_fork``): one process per core,
each claiming the next file when it is done with the last.
"""

from __future__ import annotations

import gc
import os
from collections.abc import Callable, Iterator
from typing import TypeVar

from rgt.lint import _fork, data, losses, modes, resilience, throughput
from rgt.lint._facts import Facts
from rgt.lint._model import FileNote, Finding, Hit, Rule
from rgt.lint._source import Source, Text, parse
from rgt.lint._suite import in_suite_test

RULES: dict[str, Rule] = {
    r.code: r for family in (losses, modes, data, resilience, throughput) for r in family.RULES
}
# The identifiers the rules ask about of the rest of the project (``words & ...``): part of
# the cache key.
SPELLED = frozenset({"set_epoch"} | modes.LAYER_WORDS | resilience.LOADS | throughput.GPU)
QUERIED = SPELLED | {modes.BELOW + w for w in modes.LAYER_WORDS}
# Those whose presence lets a finding through: looked for in a file's own group of files only
# (``_words``); the others, whose presence holds one back, in every file read.
LOCAL = modes.LAYER_WORDS | throughput.GPU
FAMILIES = (losses, data, resilience, throughput, modes)  # the cheapest test first
PARALLEL_FROM = 16  # files; below this a fork costs more than it saves
Outcome = tuple[list[Finding], list[FileNote]]
R = TypeVar("R")


def worth_parsing(text: str) -> bool:
    """Can any rule find something in this code? Each family names what it cannot do without
    (``may_find``: a loss, ``.backward()``, a ``DataLoader``...), so a file without any of it
    is not parsed: in a real repository most files are models, configs and tools (a third of
    detectron2's and half of timm's). Identifiers outside ASCII are read normalised by the
    parser (NFKC: a full-width ``ｓｔｅｐ`` is ``step``), so such a file is always parsed."""
    if "torch" not in text:
        return False
    return not text.isascii() or any(family.may_find(text) for family in FAMILIES)


def analyse(
    texts: list[Text],
    words: Callable[[str], frozenset[str]],
    wanted: frozenset[str],
    cache: bool = True,
) -> Outcome:
    """Findings and notes of every text (``words(path)``: a file's project words): from the
    cache when it has them, else analysed and stored. A file's cache key needs its project
    words, so the lookups are shared out with the analysis, not made here first."""
    if not cache:
        return _flat(_spread(texts, lambda text: _fresh(text, words, wanted)))
    from rgt.lint import _cache  # the cache's code and its hashing: not for --no-cache

    packs = _cache.Packs()
    packs.read(texts)  # before any fork: each process looks up its files in the same packs
    contexts: dict[frozenset[str], str] = {}

    def looked_up(text: Text) -> tuple[str | None, Outcome | None]:
        """The file's entry (None: nothing to keep, no rule can speak in it), and its outcome
        (None: found in the cache)."""
        if not worth_parsing(text.text):  # cheaper than its key: never stored nor looked up
            return None, ([], [])
        mine = words(text.path)
        if mine not in contexts:
            contexts[mine] = _cache.context(mine, wanted, QUERIED)
        entry = _cache.key(text, contexts[mine])
        if packs.load(text, entry, RULES) is not None:
            return entry, None
        return entry, _one(text, mine, wanted)

    findings: list[Finding] = []
    notes: list[FileNote] = []
    for text, (entry, outcome) in _spread(texts, looked_up):
        if entry is None:
            continue
        if outcome is None:  # a hit: loaded again here, where the packs were read
            outcome = packs.load(text, entry, RULES) or ([], [])
        else:
            packs.store(text, entry, outcome)
        findings += outcome[0]
        notes += outcome[1]
    packs.save()
    return findings, notes


def _spread(texts: list[Text], work: Callable[[Text], R]) -> list[tuple[Text, R]]:
    """Every text with ``work(text)`` of it, done by this process and a forked child per
    other core when there are enough files; the cyclic garbage collector off meanwhile: syntax
    trees hold no cycles (reference counting frees each one when its file is done), and the
    collector's passes over every new node cost ~15 % of a serial run."""
    many = len(texts) >= PARALLEL_FROM and _fork.usable()
    processes = min(os.cpu_count() or 1, 8) if many else 1
    was_enabled = gc.isenabled()
    gc.disable()
    ordered = sorted(texts, key=lambda t: -len(t.text))  # no process then waits on a long one
    try:
        done = _fork.spread(ordered, lambda text, _in_child: work(text), processes)
        return list(zip(ordered, done, strict=True))
    finally:
        if was_enabled:
            gc.enable()


def _fresh(
    text: Text,
    words: Callable[[str], frozenset[str]],
    wanted: frozenset[str],
) -> Outcome:
    """A text's outcome, worked out: none when no rule can speak in it (``worth_parsing``:
    then its project words are never asked for)."""
    if not worth_parsing(text.text):
        return [], []
    return _one(text, words(text.path), wanted)


def _flat(outcomes: list[tuple[Text, Outcome]]) -> Outcome:
    findings: list[Finding] = []
    notes: list[FileNote] = []
    for _text, (found, skipped) in outcomes:
        findings += found
        notes += skipped
    return findings, notes


def _one(text: Text, words: frozenset[str], wanted: frozenset[str]) -> Outcome:
    """One text's findings (or the note that it was skipped). Its syntax tree is freed as
    soon as this returns, in a forked child too: keeping every tree until the child's exit
    costs more in page faults (fresh memory for each tree) than freeing saves."""
    source = parse(text)
    if isinstance(source, FileNote):
        return [], [source]
    return list(_findings(source, Facts.build(source.tree, source.path), words, wanted)), []


def _findings(
    source: Source, facts: Facts, words: frozenset[str], wanted: frozenset[str]
) -> Iterator[Finding]:
    seen: set[tuple[str, int]] = set()
    for hit in _hits(facts, set(words)):
        line = getattr(hit.node, "lineno", 1)
        if hit.code not in wanted or (hit.code, line) in seen or _silenced(source, hit, line):
            continue
        if in_suite_test(facts, hit.node):
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
