"""The uncaught Python exception a log ends with, and where in the user's code it was raised.

A Python program that dies of an uncaught exception prints its traceback last: the frames
(``  File "train.py", line 12, in main``, each followed by the source line), then the exception
line (``ValueError: ...``) flush left. A traceback printed by a script that caught it and went
on is followed by more output, so only a traceback near the end of the log counts. The frame
named as evidence is the innermost one in the user's own files (not the standard library or an
installed package): that is the line to fix. Ships inside the agent: stdlib only, Python 3.8.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Tuple

TRACEBACK_LINE = "Traceback (most recent call last):"
# At most this many non-empty lines may follow the exception line (a logger's shutdown lines,
# wandb's "View run at" footer); more means the program went on after printing it.
MAX_LINES_AFTER = 20
MAX_CHARS = 300

Frame = Tuple[str, str, str, str]  # file, line, function, source line

_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+)(?:, in (?P<func>.+))?\s*$')
_LIBRARY = re.compile(r"(?:site-packages|dist-packages|/lib/python\d|<frozen |\\lib\\)")
_EXCEPTION = re.compile(r"^[A-Za-z_][\w.]*(?::|$)")
# Ctrl-C (SIGINT) and sys.exit(): someone chose to stop it, not a bug in the code.
_NOT_A_BUG = ("KeyboardInterrupt", "SystemExit")
_CHAIN = ("During handling of the above exception", "The above exception was the direct cause")


@dataclass(frozen=True)
class Uncaught:
    """Where the exception came from (``None`` when no frame was printed) and what it was."""

    where: str | None
    source: str
    exception: str

    def evidence(self) -> list[str]:
        head = f"{self.where}: {self.exception}" if self.where else self.exception
        lines = [head[:MAX_CHARS]]
        if self.source:
            lines.append(self.source[:MAX_CHARS])
        return lines


def uncaught_exception(text: str) -> Uncaught | None:
    """The uncaught exception the log ends with, or ``None``."""
    start = text.rfind(TRACEBACK_LINE)
    if start < 0:
        return None
    line_start = text.rfind("\n", 0, start) + 1
    prefix = text[line_start:start]  # "[rank0]: " and the like, repeated on every line
    lines = [_unprefix(line, prefix) for line in text[start:].splitlines()[1:]]
    frames: list[Frame] = []
    for index, line in enumerate(lines):
        if not line.strip():
            continue
        if line[:1].isspace():
            _add_frame(frames, line, lines[index + 1 : index + 2])
            continue
        if line.startswith(_CHAIN):
            return None  # a chained traceback follows; rfind would have found it
        rest = [ln for ln in lines[index + 1 :] if ln.strip()]
        if len(rest) > MAX_LINES_AFTER or not _EXCEPTION.match(line):
            return None
        if line.startswith(_NOT_A_BUG):
            return None
        return _describe(frames, line.strip())
    return None


def _unprefix(line: str, prefix: str) -> str:
    return line[len(prefix) :] if prefix.strip() and line.startswith(prefix) else line


def _add_frame(frames: list[Frame], line: str, following: list[str]) -> None:
    match = _FRAME.match(line)
    if match is None:
        return
    source = following[0].strip() if following and not _FRAME.match(following[0]) else ""
    frames.append((match.group("file"), match.group("line"), match.group("func") or "", source))


def _describe(frames: list[Frame], exception: str) -> Uncaught:
    own = [frame for frame in frames if not _LIBRARY.search(frame[0])]
    chosen = (own or frames)[-1:] if frames else []
    if not chosen:
        return Uncaught(None, "", exception)
    path, line, func, source = chosen[0]
    where = f"{path}:{line}" + (f" in {func}" if func else "")
    return Uncaught(where, source, exception)
