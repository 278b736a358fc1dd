"""Which training step a checkpoint holds, and which step a log line names.

`rgt smoke` decides "the resumed run continued from the checkpoint" by comparing the two. The
checkpoint's step is read from the file where its format allows: an rgt.ckpt commit record, a
Hugging Face ``trainer_state.json`` (``global_step``), a torch file's ``iter_num`` / ``global_step``
/ ``step`` / ``epoch`` (loaded with ``weights_only=True``: a smoke run never unpickles code),
a JSON file's same keys. Anything else falls back to the last step the killed run logged.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rgt.agent import _ckpt_find

STEP_KEYS = ("iter_num", "global_step", "step", "epoch")
TORCH_SUFFIXES = (".pt", ".pth", ".bin", ".ckpt", ".tar")
# "iter 250: loss …" (nanoGPT), "step 250: train loss …", "Step 3/100", "global_step=40",
# "Continuing training from global step 40" (HF Trainer), "{'step': 12, …}".
STEP_RE = re.compile(
    r"""(?i)\b(global[ _]step|iter(?:ation)?(?:_num)?|step)\b["']?\s*[:=]?\s*(\d+)"""
)
EPOCH_RE = re.compile(r"""(?i)\bepoch\b["']?\s*[:=]?\s*(\d+)""")


@dataclass(frozen=True)
class StepReading:
    step: int
    source: str  # "rgt.ckpt record", "trainer_state.json", "torch:iter_num", "log", …

    @property
    def unit(self) -> str:
        return "epoch" if self.source.endswith(":epoch") else "step"


def checkpoint_step(path: str) -> StepReading | None:
    """The step the checkpoint at ``path`` holds, when its format says so."""
    target = Path(path)
    if target.is_dir():
        return _trainer_state(target / _ckpt_find.TRAINER_STATE)
    if target.name == _ckpt_find.TRAINER_STATE:
        return _trainer_state(target)
    record = _rgt_ckpt_record(target)
    if record is not None:
        return record
    if target.suffix == ".json":
        return _from_mapping(_read_json(target), "json")
    if target.suffix in TORCH_SUFFIXES:
        return _from_mapping(_torch_load(target), "torch")
    return None


def log_steps(text: str, unit: str = "step") -> list[int]:
    """Every step number the log names, in order."""
    pattern = EPOCH_RE if unit == "epoch" else STEP_RE
    return [int(m.group(m.lastindex or 1)) for m in pattern.finditer(text)]


def _trainer_state(path: Path) -> StepReading | None:
    data = _read_json(path)
    step = data.get("global_step") if isinstance(data, dict) else None
    return StepReading(int(step), "trainer_state.json") if isinstance(step, int) else None


def _rgt_ckpt_record(data_file: Path) -> StepReading | None:
    for record in data_file.parent.glob("ckpt-*.json"):
        data = _read_json(record)
        if isinstance(data, dict) and data.get("file") == data_file.name:
            return StepReading(int(data["step"]), "rgt.ckpt record")
    return None


def _from_mapping(data: Any, kind: str) -> StepReading | None:
    if not isinstance(data, dict):
        return None
    for key in STEP_KEYS:
        value: Any = data.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool):
            return StepReading(int(value), f"{kind}:{key}")
        if hasattr(value, "item"):  # a 0-d tensor
            return StepReading(int(value.item()), f"{kind}:{key}")
    return None


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _torch_load(path: Path) -> Any:
    try:
        import torch
    except ImportError:
        return None
    try:
        return torch.load(str(path), map_location="cpu", weights_only=True)
    except Exception:  # not a torch file, or one weights_only refuses: no step from it
        return None
