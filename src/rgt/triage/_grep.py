"""GNU grep as the whole-file scan's prefilter: the lines that may match, at grep's speed.

Python's ``re`` has no DFA and no multi-literal search, so ``scan.hit_lines`` pays one pass over
the data per anchor. GNU grep, present on every Linux image a job runs on, finds in one pass the
lines holding, for each pattern, one literal of each of its two most selective requirements
(``prefilter``), in either order: ``(?:a|b).*c|c.*(?:a|b)`` as ERE, case-folded, in the C
locale. Every line a pattern can match is among them (a superset: a pattern matches within one
line and every match holds those literals), so Python applies the exact rules to those lines
only. A pattern whose literals ERE cannot carry (none ASCII, a newline) stays with Python; no
GNU grep, or grep failing, and ``scan`` does it all in Python. Stdlib only, Python 3.8.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Sequence
from functools import lru_cache

_ENV = dict(os.environ, LC_ALL="C")
_ERE_SPECIAL = frozenset(".[]()*+?{}|^$\\")


@lru_cache(maxsize=1)
def gnu_grep() -> str | None:
    """The GNU grep on PATH (BSD and busybox greps differ in options and byte semantics)."""
    grep = shutil.which("grep")
    if grep is None:
        return None
    try:
        proc = subprocess.run([grep, "--version"], capture_output=True, env=_ENV, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return grep if proc.stdout.startswith(b"grep (GNU grep)") else None


def ere(options: Sequence[Sequence[bytes]]) -> bytes | None:
    """One ERE that every line a pattern matches also matches, or None if there is none here."""
    groups = []
    for literals in options[:2]:
        if not literals or any(not lit or b"\n" in lit or not lit.isascii() for lit in literals):
            return None
        groups.append(b"(" + b"|".join(_escaped(lit) for lit in literals) + b")")
    if len(groups) == 1:
        return groups[0]
    return groups[0] + b".*" + groups[1] + b"|" + groups[1] + b".*" + groups[0]


def _escaped(literal: bytes) -> bytes:
    return b"".join(
        (b"\\" if chr(byte) in _ERE_SPECIAL else b"") + bytes([byte]) for byte in literal
    )


def candidate_lines(
    grep: str, path: str, expressions: Sequence[bytes], limit: int
) -> list[tuple[int, str]]:
    """(byte offset, line) of each line before ``limit`` that some expression matches, or
    raises ``OSError`` when grep fails (exit 2); exit 1 is "no line", an empty list."""
    argv = [grep, "-a", "-b", "-i", "-E"]
    for expression in expressions:
        argv += ["-e", os.fsdecode(expression)]
    proc = subprocess.run([*argv, "--", path], capture_output=True, env=_ENV)
    if proc.returncode > 1:
        raise OSError(f"grep failed: {proc.stderr.decode(errors='replace')[:200]}")
    lines = []
    for raw in proc.stdout.split(b"\n")[:-1]:  # not splitlines: a \r stays in its line
        offset, _, line = raw.partition(b":")
        if int(offset) >= limit:
            break
        lines.append((int(offset), line.decode("utf-8", errors="replace")))
    return lines
