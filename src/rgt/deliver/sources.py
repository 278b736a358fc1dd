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


def walk(root: Path, skip: set[Path]) -> Iterator[Path]:
    """Every scannable file under ``root`` (os.scandir: no stat per file beyond the dirent)."""
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
            elif os.path.splitext(entry.name)[1].lower() in KINDS:
                yield Path(entry.path)


def candidate_lines(path: Path, anchors: re.Pattern[str]) -> list[tuple[int, str]]:
    """(1-based line number, text) of each line that may cite a claim."""
    try:
        with open(path, "rb") as handle:
            raw = handle.read(MAX_BYTES)
    except OSError:
        return []
    text = raw.decode("utf-8", errors="replace")
    lower = text.lower()
    if anchors.search(lower) is None:
        return []
    suffix = path.suffix.lower()
    if suffix == NOTEBOOK:
        return _notebook_lines(text, anchors)
    lines = _hit_lines(text, lower, anchors)
    if suffix in PROSE:
        return lines
    cut = _hash_comment if suffix in HASH_COMMENTS else _slash_comment
    comments = [(number, cut(line)) for number, line in lines]
    return [(n, c) for n, c in comments if c and anchors.search(c.lower())]


def _hit_lines(text: str, lower: str, anchors: re.Pattern[str]) -> list[tuple[int, str]]:
    found: list[tuple[int, str]] = []
    line_no, counted_to, last_start = 1, 0, -1
    for match in anchors.finditer(lower):
        start = text.rfind("\n", 0, match.start()) + 1
        if start == last_start:
            continue
        line_no += text.count("\n", counted_to, start)
        counted_to, last_start = start, start
        end = text.find("\n", start)
        found.append((line_no, text[start : end if end >= 0 else len(text)]))
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
