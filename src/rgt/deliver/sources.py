"""Which text of a repository file can hold a printed number, line by line.

Prose (Markdown, LaTeX, reStructuredText, plain text) is read whole; code contributes only its
comments (``#`` or ``//`` and ``/* */`` styles); a notebook contributes its markdown cells,
reported at the line of the ``.ipynb`` file that holds each cell line. Only lines where an
anchor word occurs are returned, and a file without any anchor is dismissed after one regex
search (the fast path that lets reconcile keep up with grep).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path

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
        with open(path, "rb") as handle:
            raw = handle.read(MAX_BYTES)
    except OSError:
        return []
    text = raw.decode("utf-8", errors="replace")
    lower = text.lower()
    if len(lower) != len(text):  # a few characters (e.g. "İ") grow when lowered
        lower = "".join(c if len(c.lower()) != 1 else c.lower() for c in text)
    if suffix == NOTEBOOK:
        return _notebook_lines(text, anchors) if anchors.search(lower) else []
    lines = _hit_lines(text, lower, anchors, window)
    if suffix in PROSE:
        return lines
    cut = _hash_comment if suffix in HASH_COMMENTS else _slash_comment
    comments = [(number, cut(line)) for number, line in lines]
    return [(n, c) for n, c in comments if c and anchors.search(c.lower())]


def _hit_lines(
    text: str, lower: str, anchors: re.Pattern[str], window: int
) -> list[tuple[int, str]]:
    """Start from the numbers printed like measurements (rarer than metric names, and integers
    never count), keep the lines with an anchor word close to one."""
    found: list[tuple[int, str]] = []
    line_no, counted_to, last_start = 1, 0, -1
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
