"""Integrity probes: test samples seen in training, and collapsed model outputs.

Both return ``Finding`` records for DELIVER's disclosure gate; neither blocks anything.

Leakage is judged on content hashes, not file names: the same image saved as ``train/0001.png``
and ``test/cat_17.png`` is one sample. A LIST is a text file of one hash per line (what a data
pipeline can emit at a million lines a minute), or a directory whose files are hashed here.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rgt._fs import sha256_file
from rgt.errors import UsageError
from rgt.verify.findings import Finding

EXAMPLES = 5


@dataclass(frozen=True)
class HashList:
    source: str
    hashes: dict[str, str]  # content hash -> first sample (line number or file) that has it
    count: int  # samples read, duplicates included


def read_hash_list(path: Path) -> HashList:
    """Hashes from a file (one per line; blank lines and '#' comments skipped) or a directory."""
    if path.is_dir():
        return _hash_directory(path)
    if not path.is_file():
        raise UsageError(
            f"{path} is neither a hash list nor a directory",
            fix="pass a text file with one content hash per line, or a directory",
        )
    hashes: dict[str, str] = {}
    count = 0
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            value = line.split("#", 1)[0].strip().lower()
            if value:
                count += 1
                hashes.setdefault(value, f"line {number}")
    return HashList(str(path), hashes, count)


def _hash_directory(root: Path) -> HashList:
    hashes: dict[str, str] = {}
    count = 0
    for dirpath, _dirs, files in os.walk(root):
        for name in sorted(files):
            full = Path(dirpath) / name
            if full.is_file() and not full.is_symlink():
                count += 1
                hashes.setdefault(sha256_file(str(full)), full.relative_to(root).as_posix())
    return HashList(str(root), hashes, count)


def leakage(train: HashList, test: HashList, *, split: str = "test") -> list[Finding]:
    """Samples of ``test`` whose content also occurs in ``train``; plus duplicates inside test."""
    shared = train.hashes.keys() & test.hashes.keys()
    findings = []
    if shared:
        examples = [
            {"hash": h, "train": train.hashes[h], split: test.hashes[h]}
            for h in sorted(shared)[:EXAMPLES]
        ]
        findings.append(
            Finding(
                f"{split}_leakage",
                "bug",
                f"{len(shared)} of {len(test.hashes)} distinct {split} samples also occur in train "
                f"({100 * len(shared) / len(test.hashes):.2f} %)",
                evidence={
                    "overlap": len(shared),
                    "distinct": len(test.hashes),
                    "examples": examples,
                },
            )
        )
    repeats = test.count - len(test.hashes)
    if repeats:
        findings.append(
            Finding(
                f"{split}_duplicates",
                "warning",
                f"{repeats} {split} samples are exact copies of other {split} "
                "samples: they count twice in the metric",
                evidence={"duplicates": repeats},
            )
        )
    return findings


def collapse(predictions: Any, *, tolerance: float = 1e-6) -> list[Finding]:
    """Constant or near-constant model outputs, per output dimension.

    ``predictions`` has one row per sample (shape ``(samples,)`` or ``(samples, dims)``). A
    dimension whose spread across samples is below ``tolerance`` times the overall scale carries
    no information about the input: a collapsed embedding or a classifier stuck on one class.
    """
    import numpy as np

    array = np.asarray(predictions, dtype=float)
    if array.ndim == 1:
        array = array[:, None]
    array = array.reshape(array.shape[0], -1)
    if array.shape[0] < 2:
        raise UsageError(
            "collapse needs predictions for at least 2 samples",
            fix="pass the model outputs for the whole evaluation set",
        )
    spread = array.std(axis=0)
    scale = max(float(np.abs(array).mean()), 1e-12)
    dead = spread <= tolerance * scale
    evidence = {
        "samples": int(array.shape[0]),
        "dims": int(array.shape[1]),
        "dead_dims": int(dead.sum()),
        "median_spread": float(np.median(spread)),
    }
    if dead.all():
        return [
            Finding(
                "constant_output",
                "bug",
                "the model outputs the same value for every input: it has collapsed",
                evidence=evidence,
            )
        ]
    if dead.mean() > 0.5:
        return [
            Finding(
                "partial_collapse",
                "warning",
                f"{int(dead.sum())} of {array.shape[1]} "
                "output dimensions are constant across inputs",
                evidence=evidence,
            )
        ]
    return []


def shuffled_gap(real: float, shuffled: float, *, rel_tol: float = 0.02) -> list[Finding]:
    """A metric on real inputs about equal to the metric on shuffled inputs: the model ignores
    its input (collapse, or an evaluation that never fed it the input)."""
    gap = abs(real - shuffled)
    if gap > rel_tol * max(abs(real), abs(shuffled), 1e-12):
        return []
    return [
        Finding(
            "input_ignored",
            "bug",
            f"metric on real inputs ({real:g}) matches the metric "
            f"on shuffled inputs ({shuffled:g}): the model's output does not depend on "
            "its input",
            evidence={"real": real, "shuffled": shuffled},
        )
    ]


def load_predictions(path: Path, key: str | None = None) -> Any:
    """Model outputs from ``.npy`` or ``.npz`` (``key`` picks the array; default the first)."""
    import numpy as np

    try:
        data = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise UsageError(
            f"cannot read predictions {path}: {exc}", fix="save them with numpy.save / numpy.savez"
        ) from exc
    if not hasattr(data, "files"):
        return data
    with data:
        names = list(data.files)
        if not names or (key is not None and key not in names):
            raise UsageError(
                f"{path} has no array {key!r} (it has: {names})",
                fix="pass --key with one of the array names",
            )
        return data[key or names[0]]
