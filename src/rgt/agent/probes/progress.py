"""Where a job is (step, loss) and whether its loss went NaN/Inf, from the job's own output.

Two sources: ``metrics.jsonl`` in ``RGT_OUTPUT_DIR`` (one JSON object per line, e.g.
``{"step": 120, "loss": 0.41}``, written by rgt.ckpt or the training script) and the log
itself (``step 120 loss 0.41``, ``loss=nan``, ``'loss': inf``). Python's json reads the
``NaN``/``Infinity`` tokens that ``json.dumps(float("nan"))`` writes, so both kinds of
non-finite value are seen.
"""

from __future__ import annotations

import json
import math
import os
import re
from typing import Any

TAIL_BYTES = 64 * 1024
METRICS_FILE = "metrics.jsonl"
_NUMBER = r"[-+]?(?:nan|inf(?:inity)?|\d+(?:\.\d*)?(?:e[-+]?\d+)?|\.\d+(?:e[-+]?\d+)?)"
LOSS_RE = re.compile(r"\b\w*loss\b['\"]?\s*[:=]?\s*(?:tensor\()?(" + _NUMBER + r")\b", re.I)
STEP_RE = re.compile(r"\b(?:step|iter|iteration|global_step)\b['\"]?\s*[:=]?\s*(\d+)", re.I)
EPOCH_RE = re.compile(r"\bepoch\b['\"]?\s*[:=]?\s*(\d+)", re.I)


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def scan_lines(text: str) -> dict[str, Any]:
    """Last step/epoch/loss named in ``text`` and every line whose loss is NaN or Inf."""
    found = {"step": None, "epoch": None, "loss": None, "nonfinite": []}  # type: dict[str, Any]
    for line in text.splitlines():
        for match in LOSS_RE.finditer(line):
            value = float(match.group(1))
            if math.isfinite(value):
                found["loss"] = value
            else:
                found["nonfinite"].append(line.strip()[:300])
                found["loss"] = match.group(1).lower()
        step, epoch = STEP_RE.search(line), EPOCH_RE.search(line)
        if step:
            found["step"] = int(step.group(1))
        if epoch:
            found["epoch"] = int(epoch.group(1))
    return found


def scan_records(lines: list[str]) -> dict[str, Any]:
    """The same for metrics.jsonl lines: any key containing ``loss`` is a loss."""
    found = {"step": None, "epoch": None, "loss": None, "nonfinite": []}  # type: dict[str, Any]
    for line in lines:
        try:
            record = json.loads(line)
        except ValueError:
            continue  # a line being written right now
        if not isinstance(record, dict):
            continue
        for key in ("step", "epoch"):
            if _finite(record.get(key)):
                found[key] = int(record[key])
        for key, value in record.items():
            if "loss" not in str(key).lower() or not isinstance(value, (int, float)):
                continue
            if math.isfinite(value):
                found["loss"] = value
            else:
                found["nonfinite"].append("%s=%s in %s" % (key, value, line.strip()[:200]))
                found["loss"] = str(value).lower()
    return found


def read_tail(path: str, size: int = TAIL_BYTES) -> str:
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            handle.seek(max(0, handle.tell() - size))
            return handle.read().decode("utf-8", "replace")
    except OSError:
        return ""


def read_new(path: str, offset: int) -> tuple[str, int]:
    """Bytes appended to ``path`` since ``offset``, cut at the last complete line."""
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            end = handle.tell()
            if end < offset:
                offset = 0  # truncated or replaced: start over
            handle.seek(offset)
            data = handle.read(max(0, end - offset))
    except OSError:
        return "", offset
    cut = data.rfind(b"\n") + 1
    return data[:cut].decode("utf-8", "replace"), offset + cut


def latest(log_path: str, output_dir: str) -> dict[str, Any]:
    """Step/epoch/loss for the patrol: metrics.jsonl when it exists, else the log tail."""
    metrics = os.path.join(output_dir, METRICS_FILE)
    if os.path.exists(metrics):
        found = scan_records(read_tail(metrics).splitlines())
        if found["step"] is not None or found["loss"] is not None:
            found["source"] = METRICS_FILE
            return _summary(found)
    found = scan_lines(read_tail(log_path))
    found["source"] = "log"
    return _summary(found)


def _summary(found: dict[str, Any]) -> dict[str, Any]:
    found["nonfinite"] = len(found["nonfinite"])
    return found
