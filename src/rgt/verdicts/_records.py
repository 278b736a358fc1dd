"""The records every verdict is told in, and the two ways a check ends early.

``ok``: loaded and its content checked. ``hash_only``: the bytes are what the manifest says,
but the format cannot be checked without running code from the machine (a pickle naming a
class), or there is no manifest hash to compare. ``bad``: truncated, corrupt, NaN/inf in
weights or optimizer moments, a wrong hash or size, an incomplete checkpoint folder. ``ok``
and ``hash_only`` both satisfy the teardown gate; ``hash_only`` is always disclosed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Optional, Tuple

OK = "ok"
HASH_ONLY = "hash_only"
BAD = "bad"
VERDICTS = (OK, HASH_ONLY, BAD)


class Bad(Exception):
    """The file is broken; the message is the reason shown to the user."""


class HashOnly(Exception):
    """The format cannot be checked here without running the machine's code; the message says
    why (it names the pickle global)."""


@dataclass(frozen=True)
class FileVerdict:
    path: str  # posix, relative to the tree's root (or as given to check_file)
    kind: str  # torch | pickle | safetensors | npy | npz | json | jsonl | csv | image | ...
    verdict: str  # ok | hash_only | bad
    bytes: int
    sha256: str
    detail: str  # what was found, or why not ok
    unit: Optional[str] = None  # the checkpoint folder this file belongs to, if any

    @property
    def ok(self) -> bool:
        """Satisfies the gate: ``ok`` or ``hash_only``."""
        return self.verdict != BAD


@dataclass(frozen=True)
class UnitVerdict:
    path: str  # the folder, relative to the root ("." for the root itself)
    layout: str  # accelerate | hf-trainer | deepspeed | dcp | sharded
    verdict: str
    files: int
    detail: str


@dataclass(frozen=True)
class TreeVerdict:
    files: Tuple[FileVerdict, ...]
    units: Tuple[UnitVerdict, ...]
    missing: Tuple[str, ...]  # declared by the manifest, absent on disk
    unexpected: Tuple[str, ...]  # on disk, not declared

    def counts(self) -> Dict[str, int]:
        out = dict.fromkeys(VERDICTS, 0)
        for f in self.files:
            out[f.verdict] += 1
        return out

    @property
    def ok(self) -> bool:
        return (
            all(f.ok for f in self.files)
            and all(u.verdict != BAD for u in self.units)
            and not self.missing
            and not self.unexpected
        )


def worst(verdicts: "list[str]") -> str:
    """A unit's verdict: bad if any is bad, else hash_only if any is, else ok."""
    if BAD in verdicts:
        return BAD
    return HASH_ONLY if HASH_ONLY in verdicts else OK
