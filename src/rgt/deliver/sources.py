"""Which text of a repository file can hold a printed number, line by line.

Prose (Markdown, LaTeX, reStructuredText, plain text) is read whole; code contributes only its
comments (``#`` or ``//`` and ``/* */`` styles); a notebook contributes its markdown cells,
reported at the line of the ``.ipynb`` file that holds each cell line. Only lines where an
anchor word occurs near a number printed like a measurement are returned.

Reading 10,000 files one by one in Python costs several times a grep of the same tree, so GNU
grep runs first as a prefilter (``candidate_files``): it prints the lines holding an anchor and
a measurement mark, and Python applies the exact rules to those lines only. The prefilter must
never drop a line the exact rules would keep; where that cannot be promised (no GNU grep, an
anchor that is not printable ASCII, grep failing on a batch) Python reads every file itself.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Collection, Iterable, Iterator
from pathlib import Path

from rgt.deliver._grep import Printed, grep_batches, unfiltered

PROSE = {".md", ".markdown", ".txt", ".rst", ".tex", ".ltx", ".org", ".adoc", ".html", ".htm"}
HASH_COMMENTS = {".py", ".sh", ".bash", ".r", ".jl", ".yaml", ".yml", ".toml", ".pl", ".rb"}
SLASH_COMMENTS = {".c", ".h", ".cc", ".cpp", ".hpp", ".cu", ".js", ".ts", ".java", ".go", ".rs"}
NOTEBOOK = ".ipynb"
SKIP_DIRS = {
    ".git", ".hg", ".svn", ".venv", "venv", "node_modules", "__pycache__", ".mypy_cache",
    ".ruff_cache", ".pytest_cache", ".tox", "site-packages", ".ipynb_checkpoints",
}  # fmt: skip
MAX_BYTES = 8 << 20
KINDS = PROSE | HASH_COMMENTS | SLASH_COMMENTS | {NOTEBOOK}
# A decimal point before a digit, or a percent sign: a literal-class prefix the regex engine
# scans for at memchr speed. Anything else is not printed like a measurement.
_MEASURE = re.compile(r"%|\.\d")


def walk(root: Path, skip: set[Path]) -> Iterator[tuple[str, str]]:
    """(path, suffix) of every scannable file under ``root`` (plain strings: pathlib costs more
    than the scan itself on a 10,000-file repository)."""
    stack = [str(root)]
    skipped = {str(p) for p in skip}
    while stack:
        directory = stack.pop()
        try:
            entries = list(os.scandir(directory))
        except OSError:
            continue
        for entry in entries:
            if entry.path in skipped:
                continue
            if entry.is_dir(follow_symlinks=False):
                if entry.name not in SKIP_DIRS:
                    stack.append(entry.path)
            else:
                suffix = os.path.splitext(entry.name)[1].lower()
                if suffix in KINDS:
                    yield entry.path, suffix


def candidate_lines(
    path: str, suffix: str, anchors: re.Pattern[str], window: int
) -> list[tuple[int, str]]:
    """(1-based line number, text) of each line with a digit within ``window`` characters of
    an anchor word: the only lines that can cite a claim."""
    try:
        raw = _head(path)
    except OSError:
        return []
    text = raw.decode("utf-8", errors="replace")
    if suffix == NOTEBOOK:
        return _notebook_lines(text, anchors) if anchors.search(_lowered(text)) else []
    return _cited(text, 1, suffix, anchors, window)


def _cited(
    text: str, first: int, suffix: str, anchors: re.Pattern[str], window: int
) -> list[tuple[int, str]]:
    lines = _hit_lines(text, _lowered(text), anchors, window, first)
    if suffix in PROSE:
        return lines
    cut = _hash_comment if suffix in HASH_COMMENTS else _slash_comment
    comments = [(number, cut(line)) for number, line in lines]
    return [(n, c) for n, c in comments if c and anchors.search(c.lower())]


def _lowered(text: str) -> str:
    lower = text.lower()
    if len(lower) != len(text):  # a few characters (e.g. "İ") grow when lowered
        lower = "".join(c if len(c.lower()) != 1 else c.lower() for c in text)
    return lower


def _head(path: str) -> bytes:
    """The first MAX_BYTES of a file, read in small steps: ``read(MAX_BYTES)`` allocates 8 MiB
    for every file, which cost more than the scan itself on a repository of small files."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        parts = [os.read(fd, 1 << 16)]
        total = len(parts[0])
        while parts[-1] and total < MAX_BYTES:
            parts.append(os.read(fd, min(1 << 20, MAX_BYTES - total)))
            total += len(parts[-1])
        return b"".join(parts)
    finally:
        os.close(fd)


def candidate_files(
    files: Iterable[tuple[str, str]],
    anchors: re.Pattern[str],
    words: Collection[str],
    window: int,
    *,
    prefilter: bool = True,
) -> Iterator[tuple[str, list[tuple[int, str]]]]:
    """(path, candidate lines) of each walked file that has any, in walk order. ``words`` are
    the anchor words ``anchors`` matches; ``prefilter=False`` reads every file in Python.
    ``files`` may be the walk itself: grep starts on the first batch while the walk goes on."""
    batches = grep_batches(files, words, NOTEBOOK) if prefilter else unfiltered(files)
    for batch, printed in batches:
        for path, suffix in batch:
            if printed is None or suffix == NOTEBOOK:
                lines = candidate_lines(path, suffix, anchors, window)
            elif path in printed:
                lines = _printed_lines(printed[path], suffix, anchors, window)
            else:
                continue
            if lines:
                yield path, lines


def _printed_lines(
    records: list[Printed], suffix: str, anchors: re.Pattern[str], window: int
) -> list[tuple[int, str]]:
    """The exact rules on the lines grep printed, cut where Python stops reading a file.
    Decoding a line alone gives the text decoding the file gives it: a newline byte is never
    part of a UTF-8 sequence, so no replaced sequence spans two lines."""
    found = []
    for number, offset, raw in records:
        if offset < MAX_BYTES:
            text = raw[: MAX_BYTES - offset].decode("utf-8", errors="replace")
            found.extend(_cited(text, number, suffix, anchors, window))
    return found


def _hit_lines(
    text: str, lower: str, anchors: re.Pattern[str], window: int, first: int = 1
) -> list[tuple[int, str]]:
    """Start from the numbers printed like measurements (rarer than metric names, and integers
    never count), keep the lines with an anchor word close to one."""
    found: list[tuple[int, str]] = []
    line_no, counted_to, last_start = first, 0, -1
    for match in _MEASURE.finditer(text):
        start = text.rfind("\n", 0, match.start()) + 1
        if start == last_start:
            continue
        end = text.find("\n", match.end())
        end = len(text) if end < 0 else end
        low, high = max(start, match.start() - window - 8), min(end, match.end() + window + 8)
        if anchors.search(lower, low, high) is None:
            continue
        line_no += text.count("\n", counted_to, start)
        counted_to, last_start = start, start
        found.append((line_no, text[start:end]))
    return found


def _hash_comment(line: str) -> str:
    # A '#' inside a string is rare enough next to a metric name that we accept the noise.
    index = line.find("#")
    return line[index + 1 :] if index >= 0 else ""


def _slash_comment(line: str) -> str:
    for marker in ("//", "/*"):
        index = line.find(marker)
        if index >= 0:
            return line[index + 2 :]
    stripped = line.lstrip()
    return stripped[1:] if stripped.startswith("*") else ""


def _notebook_lines(text: str, anchors: re.Pattern[str]) -> list[tuple[int, str]]:
    try:
        cells = json.loads(text).get("cells", [])
    except (ValueError, AttributeError):
        return []
    raw_lines = text.splitlines()
    found, cursor = [], 0
    for cell in cells:
        if not isinstance(cell, dict) or cell.get("cell_type") != "markdown":
            continue
        source = cell.get("source", "")
        pieces = source if isinstance(source, list) else str(source).splitlines(keepends=True)
        for piece in pieces:
            cursor, number = _locate(raw_lines, str(piece), cursor)
            if anchors.search(str(piece).lower()):
                found.append((number, str(piece).rstrip("\n")))
    return found


def _locate(raw_lines: list[str], piece: str, cursor: int) -> tuple[int, int]:
    """The .ipynb line (1-based) holding this cell line, searching forward from ``cursor``."""
    needle = json.dumps(piece.rstrip("\n"), ensure_ascii=False)[1:-1]
    ascii_needle = json.dumps(piece.rstrip("\n"))[1:-1]
    for index in range(cursor, len(raw_lines)):
        if needle in raw_lines[index] or ascii_needle in raw_lines[index]:
            return index, index + 1
    return cursor, cursor + 1
