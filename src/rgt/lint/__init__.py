"""`rgt lint`: static checks for the silent bugs of training scripts, before a GPU is rented.

``lint_paths(["train.py"])`` reads each file (and the local modules a script imports), runs
every rule family over its syntax tree (stdlib ``ast`` only: nothing is imported or executed)
and returns a ``LintReport``. Rules: ``RULES`` (codes RGT1xx losses/optimizer, RGT2xx modes and
graphs, RGT3xx data pipeline, RGT4xx resilience, RGT5xx throughput). A finding is silenced by
``# rgt: noqa`` (all codes) or ``# rgt: noqa RGT101,RGT204`` on its line.

Files that never mention torch, or none of what every rule needs (a loss, ``.backward()``, a
``DataLoader``...: ``_run.worth_parsing``), are read but not parsed. Questions about the rest of the
project ("is ``set_epoch`` called anywhere?", "does the model have dropout?") are answered from
the identifiers of the files read (``_words``), so each file is then analysed on its own, in
parallel when there are many.
"""

from __future__ import annotations

import gc
import os
from collections.abc import Iterable

from rgt.errors import UsageError
from rgt.lint import _join, _project, _run, _source, _words
from rgt.lint._model import FileNote, Finding, LintReport, Rule, Severity
from rgt.lint._run import RULES
from rgt.lint._source import Text, expand, read

__all__ = ["RULES", "FileNote", "Finding", "LintReport", "Rule", "Severity", "lint_paths"]


def lint_paths(
    paths: Iterable[str | os.PathLike[str]],
    select: Iterable[str] = (),
    ignore: Iterable[str] = (),
    cache: bool = True,
) -> LintReport:
    """Lint files and folders (``str`` or ``pathlib.Path``); ``select``/``ignore`` take codes
    or prefixes (``RGT1``); ``cache``: reuse per-file results from ``$RGT_HOME/cache/lint``
    (rgt.lint._cache). The cyclic garbage collector is off meanwhile: what a run builds is
    freed by reference counting, and the collector's passes over the texts, syntax trees and
    summaries held would cost more than all it could find (``_run._spread``)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _lint([os.fspath(p) for p in paths], select, ignore, cache)
    finally:
        if was_enabled:
            gc.enable()


def _lint(
    paths: list[str], select: Iterable[str], ignore: Iterable[str], cache: bool
) -> LintReport:
    wanted = (_codes(select) or set(RULES)) - _codes(ignore)
    tops = tuple(os.path.abspath(p) for p in paths if os.path.isdir(p))
    texts, skipped, links = _read(expand(paths), tops)
    words = _words.Words(texts, links)
    relevant = [t for t in texts if "torch" in t.text or _reexports(t) or _drives(t) or _meter(t)]
    imported = _project.linked(relevant)
    findings, notes, summaries = _run.analyse(relevant, words, frozenset(wanted), cache, imported)
    found = {t.path: t for t in relevant}
    reached: set[tuple[str, str]] = set()
    joined = _join.findings(found, summaries, words, RULES, frozenset(wanted), reached)
    findings = _join.withheld(findings, _project.Project(summaries, found), reached) + joined
    findings.sort(key=lambda f: (f.path, f.cell or 0, f.line, f.col, f.code))
    notes.sort(key=lambda n: n.path)  # workers and the cache finish in any order
    return LintReport(tuple(findings), tuple(skipped + notes), len(texts) + len(skipped))


def _meter(text: Text) -> bool:
    """A running total kept on ``self`` (an ``AverageMeter``), torch or not: a loss handed to
    it stays alive (``_kept_losses.accumulators``)."""
    return _run.ACCUMULATES.search(text.text) is not None


def _drives(text: Text) -> bool:
    """A script that trains through an object's learning-rate method (``_run.LR_METHOD``),
    torch or not (pytorch-CycleGAN-and-pix2pix's ``train.py``); other files without torch
    are not hashed; or a helper stepping a scheduler handed to it."""
    return _run.LR_METHOD.search(text.text) is not None or _run.steps_a_scheduler(text.text)


def _reexports(text: Text) -> bool:
    """A package's ``__init__.py`` that imports (it may re-export a model or a Dataset), or a
    module that puts folders on ``sys.path`` (CenterNet's ``_init_paths.py``)."""
    if text.path.endswith("__init__.py") and "import" in text.text:
        return True
    return "sys.path" in text.text or ("class " in text.text and "random." in text.text)


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


def _read(
    paths: list[str], tops: tuple[str, ...] = ()
) -> tuple[list[Text], list[FileNote], dict[str, list[str]]]:
    """The named files, then the local modules they import (each file once, however it is
    named: a link, ``..``), and for each file read the paths (as read) of those it imports."""
    _source.forget_folders()  # folder listings are remembered within one run only
    read_as: dict[object, str] = {}  # the file's identity → its path as read
    texts: list[Text] = []
    skipped: list[FileNote] = []
    imported: dict[str, list[object]] = {}
    queue = list(paths)
    while queue:
        path = queue.pop(0)
        key = _identity(path)
        if key in read_as:
            continue
        read_as[key] = str(path)
        text = read(path)
        if isinstance(text, FileNote):
            skipped.append(text)
            continue
        texts.append(text)
        modules, also = _source._imports(text, tops)
        imported[text.path] = [_identity(m) for m in modules]
        queue.extend(modules + also)
    links = {path: [read_as[k] for k in keys if k in read_as] for path, keys in imported.items()}
    return texts, skipped, links


def _identity(path: str) -> object:
    """One stat, not ``resolve()``'s one per folder of the path (~4x the time on a big tree)."""
    try:
        status = os.stat(path)
    except OSError:
        return os.path.abspath(path)  # read() says what is wrong with it
    return status.st_dev, status.st_ino
