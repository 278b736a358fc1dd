"""Helpers for the lint tests: write a snippet to a file and lint it."""

from __future__ import annotations

import ast
import textwrap
from collections.abc import Iterator
from pathlib import Path
from unittest import mock

from rgt.lint import _run, lint_paths


def found(tmp_path: Path, source: str, name: str = "train.py") -> list[tuple[str, int]]:
    """(code, line) of every finding in ``source`` (dedented), linted as one file."""
    path = tmp_path / name
    path.write_text(textwrap.dedent(source).lstrip("\n"))
    findings = [(f.code, f.line) for f in lint_paths([str(path)]).findings]
    assert findings == every_file_parsed(path), "worth_parsing() left out a file with findings"
    return findings


def every_file_parsed(path: Path) -> list[tuple[str, int]]:
    """(code, line) of the findings with every file that mentions torch parsed, as before the
    rule families said what they need (``_run.worth_parsing``)."""
    with mock.patch.object(_run, "worth_parsing", lambda text: "torch" in text):
        return [(f.code, f.line) for f in lint_paths([str(path)], cache=False).findings]


def codes(tmp_path: Path, source: str) -> set[str]:
    return {code for code, _line in found(tmp_path, source)}


def project(root: Path, files: dict[str, str]) -> Path:
    """Write a small project (relative path -> dedented source) under ``root``."""
    for name, code in files.items():
        target = root / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(textwrap.dedent(code).lstrip("\n"))
    return root


def project_found(root: Path) -> list[tuple[str, str, int]]:
    """(relative path, code, line) of every finding of the project at ``root``, uncached."""
    report = lint_paths([str(root)], cache=False)
    return [(str(Path(f.path).relative_to(root)), f.code, f.line) for f in report.findings]


def corpus_trees(half: str) -> Iterator[tuple[Path, ast.Module]]:
    """Each script of one half of the single-file corpus (tests/lint/corpus) that parses, with
    its syntax tree."""
    from tests.lint.measure import CORPUS

    for script in sorted((CORPUS / half).glob("*.py.txt")):
        try:
            yield script, ast.parse(script.read_text())
        except SyntaxError:
            continue
