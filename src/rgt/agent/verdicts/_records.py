"""The records every verdict is told in, and the two ways a check ends early.

``ok``: loaded and its content checked. ``hash_only``: the bytes are what the manifest says,
but the format cannot be checked without running code from the machine (a pickle naming a
class), or there is no manifest hash to compare. ``bad``: truncated, corrupt, NaN/inf in
weights or optimizer moments, a wrong hash or size, an incomplete checkpoint folder. ``ok``
and ``hash_only`` both satisfy the teardown gate; ``hash_only`` is always disclosed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

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
    layout: str  # accelerate | hf-trainer | deepspeed | dcp | rgt-sharded | sharded
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


def say_counts(files: "list[Any]") -> str:
    """The one sentence the agent (``rgt watch``) and ``pull`` both print for a set of verdicts:
    ``66 artifact(s): 60 ok, 6 hash_only (pickles naming code: …TrainingArguments), 0 bad``.
    ``files``: FileVerdicts or their dicts (a manifest's entries, a pull report's files)."""
    counts = dict.fromkeys(VERDICTS, 0)
    code: List[str] = []
    for f in files:
        verdict = f.get("verdict") if isinstance(f, dict) else getattr(f, "verdict", None)
        detail = f.get("detail") if isinstance(f, dict) else getattr(f, "detail", "")
        counts[verdict if verdict in counts else OK] += 1
        if verdict == HASH_ONLY:
            code.append(_named_code(str(detail or "")))
    said = "%d artifact(s): %d ok, %d hash_only" % (len(files), counts[OK], counts[HASH_ONLY])
    names = sorted(set(filter(None, code)))
    if names:
        said += " (pickles naming code: %s%s)" % (
            ", ".join(names[:3]),
            " …" if len(names) > 3 else "",
        )
    return "%s, %d bad" % (said, counts[BAD])


def _named_code(detail: str) -> str:
    marker = "the pickle names code: "
    if marker not in detail:
        return ""
    return detail.split(marker, 1)[1].split(" ", 1)[0].rstrip(";")
