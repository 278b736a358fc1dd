"""GNU grep as reconcile's prefilter: the lines of many files that hold an anchor word and a
measurement mark, found by grep processes running alongside the Python judge.

The prefilter must never drop a line the exact rules in ``sources`` would keep; where that cannot
be promised (no GNU grep, an anchor that is not printable ASCII, grep failing on a batch) a
batch comes back without grep's lines and Python reads its files itself.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections import deque
from collections.abc import Collection, Iterable, Iterator
from functools import cache

# A grep call takes at most this many paths or characters of paths: far below ARG_MAX (2 MiB on
# Linux, of which a path may use 4 bytes a character), and small enough that Python judges one
# batch's lines while grep reads the next.
GREP_BATCH = 1000
GREP_BATCH_CHARS = 100_000
GREP_JOBS = 2  # grep processes at once; with the Python reader, enough for two cores
# Where grep prints lines of more than this share of a batch's files (a metric name in every
# paragraph), it saves Python little: the later batches skip grep and Python reads them itself.
GREP_CROWDED = 0.5
# Bytes, in the C locale where every byte is a character and none is an encoding error, so that
# ".*" spans whatever Python decodes between two marks (U+FFFD, NUL, CR: only "\n" ends a line
# for both). Python's \d also matches non-ASCII digits (".٣"), whose first byte is >= 0x80.
_GREP_MEASURE = b"(%|\\.[0-9\x80-\xff])"
_ERE_SPECIAL = frozenset("\\.[]()*+?{}|^$")
_PRINTABLE_ASCII = re.compile(r"[ -~]+")
_GREP_OPTIONS = [
    "--line-number", "--byte-offset", "--with-filename", "--null", "--no-messages",
    "--ignore-case", "--extended-regexp", "--binary-files=text", "--directories=skip",
    "--devices=skip",
]  # fmt: skip
_GREP_ENV = {"LC_ALL": "C"}
Batch = list[tuple[str, str]]
Printed = tuple[int, int, bytes]  # a line grep printed: line number, byte offset, bytes


def grep_batches(
    files: Iterable[tuple[str, str]], words: Collection[str], skip_suffix: str = ".ipynb"
) -> Iterator[tuple[Batch, dict[str, list[Printed]] | None]]:
    """The walked files in batches, each with the lines grep printed by path, or None where
    Python must read every file of the batch. Files ending in ``skip_suffix`` are never sent:
    a notebook's markdown cell is a JSON string whose escapes (``\\u00e9``, ``\\"``) hide its
    text from grep."""
    pattern, grep = grep_pattern(words), gnu_grep()
    if pattern is None or grep is None:
        yield from unfiltered(files)
        return
    running: deque[tuple[Batch, subprocess.Popen[bytes] | None]] = deque()
    crowded = False
    try:
        for batch in _batches(files):
            running.append((batch, None if crowded else _start(grep, pattern, batch, skip_suffix)))
            if len(running) >= GREP_JOBS:
                done, printed = _finish(*running.popleft())
                crowded = crowded or len(printed or ()) > GREP_CROWDED * len(done)
                yield done, printed
        while running:
            yield _finish(*running.popleft())
    finally:
        for _, proc in running:  # the caller stopped early
            if proc is not None:
                proc.kill()
                proc.wait()


def grep_pattern(words: Collection[str]) -> bytes | None:
    """An extended regex (grep -i, C locale) true on every line where the exact rules could
    find an anchor word near a measurement: both on the line, in either order. None when no
    such promise can be made: no words, or a word that is not printable ASCII."""
    if not words or not all(_PRINTABLE_ASCII.fullmatch(w) for w in words):
        return None
    anchor = b"(" + b"|".join(_ere(w) for w in sorted(words)) + b")"
    either_order = [anchor + b".*" + _GREP_MEASURE, _GREP_MEASURE + b".*" + anchor]
    # A word holding "%" or "." or starting with a digit may itself hold the measurement mark
    # (the ".5" of "iou@0.5"): a line with such a word is kept whatever else it holds.
    marked = [_ere(w) for w in sorted(words) if "%" in w or "." in w or w[0].isdigit()]
    return b"|".join(either_order + marked)


def _ere(word: str) -> bytes:
    """``word`` as a literal of an extended regex. One non-ASCII character lowers to an ASCII
    letter in Python, the Kelvin sign to "k", so a "k" also stands for it."""
    pieces = []
    for char in word:
        if char in "kK":
            pieces.append(b"(k|\xe2\x84\xaa)")
        else:
            pieces.append((b"\\" if char in _ERE_SPECIAL else b"") + char.encode())
    return b"".join(pieces)


@cache
def _gnu_grep_at(grep: str | None) -> str | None:
    """``grep`` if it is GNU grep, whose options and C-locale byte semantics the prefilter
    relies on (BSD and busybox greps differ)."""
    if grep is None:
        return None
    try:
        proc = subprocess.run([grep, "--version"], capture_output=True, env=_GREP_ENV, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return grep if proc.stdout.startswith(b"grep (GNU grep)") else None


def gnu_grep() -> str | None:
    """The GNU grep on PATH, or None."""
    return _gnu_grep_at(shutil.which("grep"))


def unfiltered(files: Iterable[tuple[str, str]]) -> Iterator[tuple[Batch, None]]:
    return ((batch, None) for batch in _batches(files))


def _batches(files: Iterable[tuple[str, str]]) -> Iterator[Batch]:
    batch: Batch = []
    chars = 0
    for item in files:
        if len(batch) >= GREP_BATCH or chars >= GREP_BATCH_CHARS:
            yield batch
            batch, chars = [], 0
        batch.append(item)
        chars += len(item[0]) + 1
    if batch:
        yield batch


def _start(
    grep: str, pattern: bytes, batch: Batch, skip_suffix: str
) -> subprocess.Popen[bytes] | None:
    paths = [path for path, suffix in batch if suffix != skip_suffix]
    if not paths:
        return None
    # An argv list, no shell; "--" so that a path starting with "-" is not read as an option.
    command: list[str | bytes] = [grep, *_GREP_OPTIONS, b"--regexp=" + pattern, "--", *paths]
    try:
        return subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=_GREP_ENV
        )
    except OSError:
        return None


def _finish(
    batch: Batch, proc: subprocess.Popen[bytes] | None
) -> tuple[Batch, dict[str, list[Printed]] | None]:
    """grep exits 1 when no file matched and 2 on any error (a dangling link, a file removed
    since the walk): then the whole batch goes to Python, which skips what it cannot open."""
    if proc is None:
        return batch, None
    out, _ = proc.communicate()
    if proc.returncode not in (0, 1):
        return batch, None
    try:
        return batch, _parse(out)
    except ValueError:  # not the output format relied on
        return batch, None


def _parse(out: bytes) -> dict[str, list[Printed]]:
    """grep's ``path NUL line-number : byte-offset : line LF`` records, by path. A path may hold
    a newline and a line a NUL; neither holds the other's terminator."""
    printed: dict[str, list[Printed]] = {}
    pos = 0
    while pos < len(out):
        name_end = out.index(b"\0", pos)
        number_end = out.index(b":", name_end)
        offset_end = out.index(b":", number_end + 1)
        line_end = out.index(b"\n", offset_end)
        number, offset = int(out[name_end + 1 : number_end]), int(out[number_end + 1 : offset_end])
        record = (number, offset, out[offset_end + 1 : line_end])
        printed.setdefault(os.fsdecode(out[pos:name_end]), []).append(record)
        pos = line_end + 1
    return printed
