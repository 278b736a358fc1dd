"""Running the rule families over parsed files: one file at a time, or in worker processes.

A file's analysis needs only its own text and its project words (``_words``), so many
files are shared between this process and forked children (``_fork``): one process per core,
each claiming the next file when it is done with the last.
"""

from __future__ import annotations

import gc
import os
import re
from collections.abc import Callable, Iterator
from typing import TypeVar

from rgt.lint import _cross, _fork, data, losses, modes, resilience, throughput
from rgt.lint._facts import Facts
from rgt.lint._model import FileNote, Finding, Hit, Rule, lint_finding
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
Summaries = dict[str, _cross.Summary]
Result = tuple[list[Finding], list[FileNote], _cross.Summary | None]
R = TypeVar("R")
# What a module imported by another must mention for its summary to matter (``_join``): a
# model's softmax, a Dataset's RNG, a sampler or loader, an optimizer step, an evaluation.
CROSS_WORDS = ("oftmax", "igmoid", "random", "Generator", "DistributedSampler", "oader",
               "step", "train", "eval", "no_grad", "inference_mode", "__getitem__",
               "__iter__")  # fmt: skip


RNG_MAKER = re.compile(r"random\.(RandomState|default_rng|Generator|Random)\b")
# NumPy's global RNG in a module of transforms a Dataset of another file applies (``np.random.
# rand()``, ``from numpy import random``): such a module need not mention torch.
NUMPY_DRAWS = re.compile(r"\bnp\.random\.|\bnumpy\.random\b|from numpy import random\b")
# A running total kept on ``self`` from a name (``self.sum += val * n``): a method another
# file may hand a loss tensor to (``_kept_losses.accumulators``); counters (``+= 1``) are not.
ACCUMULATES = re.compile(r"self\.[\w.]+(?:\[[^\]\n]*\])?\s*\+=\s*[A-Za-z_]")


# A method named for the learning rate, called with no arguments (``model.update_learning_rate()``,
# ``trainer.adjust_lr()``): a script that drives its training through an object's methods may
# never mention torch, and the order of those calls is what ``_flow_order`` looks at.
LR_METHOD = re.compile(r"\.\w*(?:learning_rate|_lr|lr_|schedul)\w*\(\)")


def steps_a_scheduler(text: str) -> bool:
    """A helper that may step a scheduler handed to it (``adjust_lr(scheduler, epoch)``),
    torch or not: the order joins follow it (``_join_order``)."""
    return ".step()" in text and "sched" in text


def summarised(text: str, imported: bool, path: str = "") -> bool:
    """Is a summary of this code wanted (``_cross``): every file parsed anyway, a module
    another file imports that mentions what the cross-file rules follow, and a script calling
    a learning-rate method (``LR_METHOD``)."""
    if worth_parsing(text) or LR_METHOD.search(text):
        return True
    if not imported:
        return False
    if "sys.path" in text or path.endswith("__init__.py"):  # where imports lead (``_project``)
        return True
    if "class " in text and (RNG_MAKER.search(text) or NUMPY_DRAWS.search(text)):
        return True  # an RNG kept by a class, or NumPy's drawn from, torch or not
    if _cross.followed(text):  # a factory a join follows (``return Net(cfg)``)
        return True
    if steps_a_scheduler(text) or ACCUMULATES.search(text) is not None:  # a meter, torch or not
        return True
    return "torch" in text and (
        any(w in text for w in CROSS_WORDS)
        or modes.EVAL_DEF.search(text) is not None
        or ACCUMULATES.search(text) is not None
        or _passes_through(text)
    )


KEPT_ARG = re.compile(r"self\.(\w+)\s*=\s*(\w+)\s*$", re.M)
RETURNED_CALL = re.compile(r"return self\.(\w+)\(")


def _passes_through(text: str) -> bool:
    """A model that returns what a module handed to its constructor returns
    (``self.head = head``, ``return self.head(x)``: ``_flow._returns_param``)."""
    if "return self." not in text:
        return False
    kept = {a for a, b in KEPT_ARG.findall(text) if a == b}
    return bool(kept) and any(n in kept for n in RETURNED_CALL.findall(text))


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
    imported: frozenset[str] = frozenset(),
) -> tuple[list[Finding], list[FileNote], Summaries]:
    """Findings, notes and summaries of every text (``words(path)``: a file's project words;
    ``imported``: absolute paths other files import, whose summaries the cross-file rules
    want): from the cache when it has them, else analysed and stored. A file's cache key needs
    its project words, so the lookups are shared out with the analysis, not made here first."""
    if not cache:
        return _flat(_spread(texts, lambda text: _fresh(text, words, wanted, imported)))
    from rgt.lint import _cache  # the cache's code and its hashing: not for --no-cache

    packs = _cache.Packs()
    packs.read(texts)  # before any fork: each process looks up its files in the same packs
    contexts: dict[frozenset[str], str] = {}

    def looked_up(text: Text) -> tuple[str | None, Result | None]:
        """The file's entry (None: nothing to keep, no rule can speak in it), and its result
        (None: found in the cache)."""
        if not summarised(text.text, _is_imported(text, imported), text.path):
            return None, ([], [], None)  # cheaper than its key: never stored nor looked up
        mine = words(text.path) if worth_parsing(text.text) else frozenset()
        if mine not in contexts:
            contexts[mine] = _cache.context(mine, wanted, QUERIED)
        linked = _is_imported(text, imported)  # the summary depends on it: part of the key
        entry = _cache.key(text, contexts[mine] + ("|linked" if linked else ""))
        if packs.load(text, entry, RULES) is not None:
            return entry, None
        return entry, _one(text, mine, wanted, linked)

    findings: list[Finding] = []
    notes: list[FileNote] = []
    summaries: Summaries = {}
    for text, (entry, result) in _spread(texts, looked_up):
        if entry is None:
            continue
        if result is None:  # a hit: loaded again here, where the packs were read
            result = packs.load(text, entry, RULES) or ([], [], None)
        else:
            packs.store(text, entry, result)
        findings += result[0]
        notes += result[1]
        if result[2] is not None:
            summaries[text.path] = result[2]
    packs.save()
    return findings, notes, summaries


def _is_imported(text: Text, imported: frozenset[str]) -> bool:
    return bool(imported) and os.path.abspath(text.path) in imported


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
    imported: frozenset[str],
) -> Result:
    """A text's result, worked out: none when no rule can speak in it and no other file
    needs its summary (then its project words are never asked for)."""
    linked = _is_imported(text, imported)
    if worth_parsing(text.text):
        return _one(text, words(text.path), wanted, linked, rules=True)
    if summarised(text.text, linked, text.path):
        return _one(text, frozenset(), wanted, linked, rules=False)
    return [], [], None


def _flat(outcomes: list[tuple[Text, Result]]) -> tuple[list[Finding], list[FileNote], Summaries]:
    findings: list[Finding] = []
    notes: list[FileNote] = []
    summaries: Summaries = {}
    for text, (found, skipped, summary) in outcomes:
        findings += found
        notes += skipped
        if summary is not None:
            summaries[text.path] = summary
    return findings, notes, summaries


def _one(
    text: Text,
    words: frozenset[str],
    wanted: frozenset[str],
    linked: bool = False,
    rules: bool | None = None,
) -> Result:
    """One text's findings (or the note that it was skipped) and its summary (``_cross``); no
    rule runs on a file parsed only for its summary (``worth_parsing`` says none could speak).
    Its syntax tree is freed as soon as this returns, in a forked child too: keeping every
    tree until the child's exit costs more in page faults than freeing saves. ``rules``:
    ``worth_parsing(text)``, when the caller knows it."""
    if rules is None:
        rules = worth_parsing(text.text)
    source = parse(text)
    if isinstance(source, FileNote):
        return [], [source] if rules else [], None
    facts = Facts.build(source.tree, source.path)
    found = list(_findings(source, facts, words, wanted)) if rules else []
    return found, [], _cross.summarize(facts, source.noqa, linked)


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
        yield lint_finding(source.path, where, col, RULES[hit.code], hit.detail, cell)


def _hits(facts: Facts, words: set[str]) -> Iterator[Hit]:
    yield from losses.check(facts)
    yield from modes.check(facts, words)
    yield from data.check(facts, words)
    yield from resilience.check(facts, words)
    yield from throughput.check(facts, words)


def _silenced(source: Source, hit: Hit, line: int) -> bool:
    codes = source.noqa.get(line)
    return codes is not None and (not codes or hit.code in codes)
