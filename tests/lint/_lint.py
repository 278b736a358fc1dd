"""Helpers for the lint tests: write a snippet to a file and lint it."""

from __future__ import annotations

import textwrap
from pathlib import Path

from rgt.lint import lint_paths


def found(tmp_path: Path, source: str, name: str = "train.py") -> list[tuple[str, int]]:
    """(code, line) of every finding in ``source`` (dedented), linted as one file."""
    path = tmp_path / name
    path.write_text(textwrap.dedent(source).lstrip("\n"))
    return [(f.code, f.line) for f in lint_paths([str(path)]).findings]


def codes(tmp_path: Path, source: str) -> set[str]:
    return {code for code, _line in found(tmp_path, source)}
