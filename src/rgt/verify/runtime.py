"""What a run resolved at run time: batch size, gradient accumulation, DataLoader workers,
precision (and the world size), plus the seed and determinism flags it saw.

The job's own capture comes first: the sitecustomize hook (``rgt.agent._runtime_hook``) reads
them from the objects the job built and writes the job's ``runtime.json``; a sweep pull keeps
it beside each cell as ``rgt-runtime.json``. A run without one (not launched by rgt, or a job
that never imported torch) falls back to its ``results.json`` config, under the names the
common frameworks use, and says so (``source``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rgt.errors import UsageError
from rgt.results import RunResults
from rgt.verify.configdiff import flatten
from rgt.verify.findings import Finding

FILENAME = "rgt-runtime.json"  # in a pull's folder (and linked into a sweep's group folders)
KNOBS = ("batch_size", "grad_accum", "num_workers", "precision", "world_size")
MAX_BYTES = 1 << 20  # a capture is a few KiB; a bigger file is not one
# Config keys (the last part of a flattened key) that name each knob in common frameworks.
ALIASES = {
    "batch_size": ("batch_size", "per_device_train_batch_size", "train_batch_size", "bs"),
    "grad_accum": (
        "gradient_accumulation_steps",
        "grad_accum",
        "accumulate_grad_batches",
        "accum_steps",
        "grad_accum_steps",
    ),
    "num_workers": ("num_workers", "dataloader_num_workers", "workers"),
    "precision": ("precision", "mixed_precision", "amp_dtype", "dtype"),
    "world_size": ("world_size", "num_gpus", "gpus"),
}


@dataclass(frozen=True)
class Runtime:
    knobs: dict[str, Any]
    source: str  # "runtime" (the job's own objects), "config" (results.json), or "none"
    determinism: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"knobs": self.knobs, "source": self.source, "determinism": self.determinism}


def parse(raw: bytes) -> dict[str, Any] | None:
    """The best process capture of a ``runtime.json`` (the training process: a framework or a
    shuffling loader seen, then the most knobs, then the latest); None if it is not one."""
    if len(raw) > MAX_BYTES:
        return None
    try:
        doc = json.loads(raw)
        procs = [p for p in doc["processes"].values() if isinstance(p, dict)]
    except (ValueError, KeyError, TypeError, AttributeError):
        return None
    return max(procs, key=_score) if procs else None


def _score(capture: Mapping[str, Any]) -> tuple[int, int, int, float]:
    knobs = _dict(capture.get("knobs"))
    loaders = knobs.get("loaders")
    rows = loaders if isinstance(loaders, list) else []
    shuffled = any(isinstance(r, dict) and r.get("shuffle") for r in rows)
    known = len([k for k in KNOBS if knobs.get(k) is not None])
    stamp = capture.get("time")
    when = float(stamp) if isinstance(stamp, (int, float)) else 0.0
    return (int("framework" in knobs), int(shuffled), known, when)


def _dict(value: Any) -> dict[str, Any]:
    return dict(value) if isinstance(value, dict) else {}


def from_capture(capture: Mapping[str, Any]) -> Runtime:
    knobs = _dict(capture.get("knobs"))
    picked = {k: knobs[k] for k in KNOBS if knobs.get(k) is not None}
    return Runtime(picked, "runtime", _dict(capture.get("determinism")))


def from_config(config: Mapping[str, Any]) -> Runtime:
    flat = {key.rsplit(".", 1)[-1].lower(): value for key, value in flatten(config).items()}
    knobs: dict[str, Any] = {}
    for knob, names in ALIASES.items():
        for name in names:
            if name in flat:
                knobs[knob] = json.loads(flat[name])
                break
    if "precision" not in knobs:
        for flag in ("bf16", "fp16"):
            if flat.get(flag) == "true":
                knobs["precision"] = flag
    return Runtime(knobs, "config" if knobs else "none")


def of_run(run: RunResults) -> Runtime:
    """The run's capture (``rgt-runtime.json`` in its folder or up to two folders above), else
    what its config names."""
    if run.path:
        folder = Path(run.path).parent
        for place in (folder, folder.parent, folder.parent.parent):
            found = place / FILENAME
            if found.is_file():
                capture = parse(found.read_bytes())
                if capture is not None:
                    return from_capture(capture)
    return from_config(run.config)


def knob_findings(
    a: list[RunResults], b: list[RunResults], changed_keys: list[str]
) -> list[Finding]:
    """A knob that differs between the groups besides the swept variable (the comparison is
    not one variable changed), or between the runs of one group (not replications)."""
    got = {"A": [of_run(r) for r in a], "B": [of_run(r) for r in b]}
    swept = {key.rsplit(".", 1)[-1].lower() for key in changed_keys}
    findings = []
    for knob in KNOBS:
        if swept & set(ALIASES[knob]):
            continue  # this knob is what the comparison changes
        seen = {g: _values(runs, knob) for g, runs in got.items()}
        findings.extend(_knob(knob, seen, got, changed_keys))
    return findings


def _values(runs: list[Runtime], knob: str) -> list[str]:
    return sorted({json.dumps(r.knobs[knob], sort_keys=True) for r in runs if knob in r.knobs})


def _knob(
    knob: str, seen: dict[str, list[str]], got: dict[str, list[Runtime]], changed: list[str]
) -> list[Finding]:
    sources = {g: sorted({r.source for r in runs}) for g, runs in got.items()}
    evidence = {"knob": knob, "A": seen["A"], "B": seen["B"], "sources": sources}
    out = []
    if seen["A"] and seen["B"] and seen["A"] != seen["B"]:
        besides = f"besides the swept {', '.join(changed)}" if changed else "in an A/B comparison"
        out.append(
            Finding(
                "knob_differs",
                "warning",
                f"{knob} differs between the groups {besides} (A: {', '.join(seen['A'])}; "
                f"B: {', '.join(seen['B'])}): the delta is not one variable's",
                evidence=evidence,
            )
        )
    for group in ("A", "B"):
        if len(seen[group]) > 1:
            out.append(
                Finding(
                    "knob_varies_in_group",
                    "warning",
                    f"the runs of group {group} ran with different {knob} "
                    f"({', '.join(seen[group])}): they are not replications of one setting",
                    evidence=evidence,
                )
            )
    return out


def resolve_seed(
    env: Mapping[str, str], given: int | None, outer: Mapping[str, str] | None = None
) -> str:
    """The job's ``RGT_SEED``: ``--env RGT_SEED=…``, else ``--seed``, else the caller's own
    ``RGT_SEED``, else drawn (31 bits: every framework's seed setter takes it). Stated, so a
    number can be re-run with the seed that produced it."""
    import os
    import secrets

    outer = os.environ if outer is None else outer
    for value in (env.get("RGT_SEED"), given, outer.get("RGT_SEED")):
        if value is not None and str(value).strip():
            text = str(value).strip()
            if not text.isdigit() or int(text) >= 2**32:
                raise UsageError(
                    f"RGT_SEED must be a whole number below 2**32, not {text!r}",
                    fix="pass --seed N (or leave it out: rgt draws one and records it)",
                )
            return text
    return str(secrets.randbelow(2**31))
