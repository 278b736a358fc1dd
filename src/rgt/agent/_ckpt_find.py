"""Find the newest complete checkpoint a job wrote: for the agent's restarts and `rgt smoke`.

"Complete" is what can be told from outside the script:
* a non-empty file whose name is not a save in flight (``.tmp-*``, ``tmp-*``, ``*.part``,
  ``*.tmp``, ``*.partial``, nor inside such a folder); a zip (what torch.save writes) only with
  its end record (nanoGPT saves in place: a kill mid-write leaves a torn one);
* a folder (Hugging Face ``checkpoint-N``) holding a non-empty file and none in flight, and
  ``trainer_state.json`` when it is named ``checkpoint-N`` or a sibling has one (the Trainer
  writes it after the weights);
* in an rgt.ckpt directory, the data file the newest commit record names (the data file is
  written first: one without a record is a save that was cut short);
* a sharded rgt.ckpt step (``step-<12 digits>-<session>/``, one shard per rank) only once
  committed: its ``manifest.json`` (written by rank 0 after every rank's shard is durable)
  names every rank's shard and each is there with its recorded size. The newest such step is
  the one every rank committed; a folder without a manifest is a save some rank never finished.

Files in the job's working directory count only when they are newer than the job's start:
anything older came with the code snapshot and is not this job's checkpoint.
"""

from __future__ import annotations

import fnmatch
import glob
import json
import os
import re
import zipfile
from typing import List, Optional, Tuple

from rgt.agent import jobfiles

IN_FLIGHT = (".tmp-*", "tmp-*", "*.part", "*.tmp", "*.partial")
TRAINER_STATE = "trainer_state.json"
HF_NAME = re.compile(r"^checkpoint-\d+$")  # the Hugging Face Trainer's folder names
SHARDED_STEP = re.compile(r"^step-(\d{12})-[0-9a-f]{8,32}$")  # rgt.ckpt's sharded step folders
SHARDED_FORMAT = "rgt.ckpt.sharded/1"
MANIFEST = "manifest.json"
MAX_SKIPPED = 10
START_SLACK_S = 2.0


class Found(object):
    def __init__(self, path: Optional[str], where: Optional[str], skipped: List[str]) -> None:
        self.path = path
        self.where = where
        self.skipped = skipped


def epoch(stamp: Optional[str]) -> Optional[float]:
    """Seconds since the epoch of an agent timestamp (``2026-12-01T10:00:00.123Z``)."""
    parsed = jobfiles.parse_time(stamp)
    return None if parsed is None else parsed.timestamp() - START_SLACK_S


def newest(pattern: Optional[str], dirs: List[Tuple[str, str]], since: Optional[float]) -> Found:
    """The newest complete checkpoint matching ``pattern`` in ``dirs`` ((label, dir) pairs);
    without a pattern, the newest one in the ``ckpt_dir`` entry. ``since`` filters files of
    the ``work`` entry (and absolute patterns) by modification time."""
    skipped = []  # type: List[str]
    best = None  # type: Optional[Tuple[float, List[Tuple[int, int, str]], str, str]]
    for where, path, fresh in _candidates(pattern, dirs):
        why = incomplete(path) or (None if fresh or since is None else _stale(path, since))
        if why:
            skipped.append("%s: %s" % (path, why))
            continue
        key = (newest_mtime(path), natural_key(path), path, where)
        if best is None or key[:2] > best[:2]:
            best = key
    if best is None:
        return Found(None, None, skipped[:MAX_SKIPPED])
    return Found(os.path.abspath(best[2]), best[3], skipped[:MAX_SKIPPED])


def _candidates(pattern: Optional[str], dirs: List[Tuple[str, str]]) -> List[Tuple[str, str, bool]]:
    """(label, path, exempt from the age check) of every match."""
    if pattern and os.path.isabs(pattern):
        return [("path", p, False) for p in glob.glob(pattern, recursive=True)]
    found = []  # type: List[Tuple[str, str, bool]]
    for where, base in dirs:
        if not os.path.isdir(base):
            continue
        if pattern:  # a pattern ending in "/" matches folders only
            matches = glob.glob(os.path.join(glob.escape(base), pattern), recursive=True)
            matches = [m.rstrip(os.sep) or m for m in matches]
        elif where == "ckpt_dir":
            matches = _whole_ckpt_dir(base)
        else:
            matches = []
        found.extend((where, p, where != "work") for p in matches)
    return found


def _whole_ckpt_dir(base: str) -> List[str]:
    sharded = rgt_sharded_newest(base)
    committed = rgt_ckpt_newest(base)
    if sharded and (not committed or (step_of(sharded) or ("", -1))[1] >= _step(committed)):
        return [sharded]
    if committed:
        return [committed]
    files = []  # type: List[str]
    for dirpath, dirnames, filenames in os.walk(base):
        dirnames[:] = [d for d in dirnames if not _in_flight(d)]
        files.extend(os.path.join(dirpath, name) for name in filenames)
    return files


def rgt_ckpt_newest(base: str) -> Optional[str]:
    """The data file of the newest rgt.ckpt commit record in ``base``, if any."""
    best = None  # type: Optional[Tuple[int, str]]
    for record in glob.glob(os.path.join(glob.escape(base), "ckpt-*.json")):
        try:
            with open(record, "rb") as handle:
                data = json.loads(handle.read().decode("utf-8"))
            step, name = int(data["step"]), str(data["file"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
        target = os.path.join(base, os.path.basename(name))
        if os.path.isfile(target) and (best is None or step > best[0]):
            best = (step, target)
    return best[1] if best else None


def _step(path: str) -> int:
    reading = step_of(path)
    return reading[1] if reading else -1


def rgt_sharded_newest(base: str) -> Optional[str]:
    """The newest sharded rgt.ckpt step in ``base`` that every rank committed, if any."""
    best = None  # type: Optional[Tuple[int, float, str]]
    for name in _listdir(base):
        match = SHARDED_STEP.match(name)
        folder = os.path.join(base, name)
        if match is None or sharded_problem(folder) is not None:
            continue
        key = (int(match.group(1)), newest_mtime(os.path.join(folder, MANIFEST)), folder)
        if best is None or key > best:
            best = key
    return best[2] if best else None


def sharded_problem(folder: str) -> Optional[str]:
    """Why a sharded step folder is not a committed step, or None when it is one."""
    data = _json(os.path.join(folder, MANIFEST))
    if not isinstance(data, dict) or data.get("format") != SHARDED_FORMAT:
        return "a sharded step not committed (no manifest.json: some rank never wrote its shard)"
    shards = data.get("shards")
    shards = [s for s in shards if isinstance(s, dict)] if isinstance(shards, list) else []
    ranks = [shard.get("rank") for shard in shards]
    if not shards or ranks != list(range(len(shards))) or len(shards) != data.get("world_size"):
        return "a sharded step whose manifest does not name one shard per rank"
    for shard in shards:
        name = str(shard.get("file"))
        full = os.path.join(folder, name)
        bad_name = os.path.basename(name) != name or name in ("", ".", "..")
        if bad_name or not os.path.isfile(full) or os.path.getsize(full) != shard.get("bytes"):
            return "a sharded step whose shard %s is missing or of the wrong size" % name
    return None


def _is_sharded_step(path: str) -> bool:
    """A sharded step folder: by its name, or (renamed) by the rank shard records inside."""
    if SHARDED_STEP.match(os.path.basename(path.rstrip(os.sep))):
        return True
    return any(n.startswith("ckpt-rank-") and n.endswith(".json") for n in _listdir(path))


def _listdir(path: str) -> List[str]:
    try:
        return os.listdir(path)
    except OSError:
        return []


def incomplete(path: str) -> Optional[str]:
    """Why ``path`` is not a complete checkpoint, or None when it is one."""
    if any(_in_flight(part) for part in path.split(os.sep)[-3:]):
        return "a save in flight (temp name)"
    if os.path.isfile(path):
        if os.path.getsize(path) == 0:
            return "empty file"
        return None if not _torn_zip(path) else "a zip (torch.save) cut short: no end record"
    if not os.path.isdir(path):
        return "not a file or folder"
    if _is_sharded_step(path):
        return sharded_problem(path)
    names = os.listdir(path)
    if any(_in_flight(name) for name in names):
        return "a save in flight inside"
    if not any(os.path.isfile(os.path.join(path, n)) and _size(path, n) > 0 for n in names):
        return "no non-empty file inside"
    if TRAINER_STATE not in names and (HF_NAME.match(os.path.basename(path)) or _hf_style(path)):
        return "no %s yet (the Trainer writes it last)" % TRAINER_STATE
    return None


def _torn_zip(path: str) -> bool:
    """torch.save writes a zip; one killed mid-write (nanoGPT saves in place) has no end."""
    try:
        with open(path, "rb") as handle:
            if handle.read(2) != b"PK":
                return False
        return not zipfile.is_zipfile(path)
    except OSError:
        return True


def _hf_style(path: str) -> bool:
    parent = os.path.dirname(path.rstrip(os.sep))
    try:
        siblings = os.listdir(parent)
    except OSError:
        return False
    return any(os.path.isfile(os.path.join(parent, s, TRAINER_STATE)) for s in siblings)


def _size(base: str, name: str) -> int:
    try:
        return os.path.getsize(os.path.join(base, name))
    except OSError:
        return 0


def _in_flight(name: str) -> bool:
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in IN_FLIGHT)


def _stale(path: str, since: float) -> Optional[str]:
    if newest_mtime(path) >= since:
        return None
    return "older than the job (came with the code, not written by this job)"


def newest_mtime(path: str) -> float:
    try:
        mtime = os.path.getmtime(path)
        if os.path.isdir(path):
            for name in os.listdir(path):
                mtime = max(mtime, os.path.getmtime(os.path.join(path, name)))
    except OSError:
        return 0.0
    return mtime


def natural_key(path: str) -> List[Tuple[int, int, str]]:
    """``checkpoint-10`` after ``checkpoint-9``: numbers compare as numbers."""
    parts = re.split(r"(\d+)", path)
    return [(0, int(p), "") if p.isdigit() else (1, 0, p) for p in parts]


# Where frameworks write checkpoints when the script names no place: Lightning's default
# ModelCheckpoint (under ``default_root_dir``, the working directory unless the script sets it),
# the HF Trainer's ``output_dir/checkpoint-N``, accelerate's ``save_state`` folders as its
# examples name them (``step_N``/``epoch_N``, or ``checkpoints/checkpoint_N`` with automatic
# naming). Folders count only as folders, and only files newer than the run.
FRAMEWORK_GLOBS = (
    ("lightning", "**/lightning_logs/version_*/checkpoints/*.ckpt", False),
    ("lightning", "**/checkpoints/*.ckpt", False),
    ("hf_trainer", "**/checkpoint-*/", True),
    ("accelerate", "**/step_*/", True),
    ("accelerate", "**/epoch_*/", True),
    ("accelerate", "**/checkpoints/checkpoint_*/", True),
)


def framework_newest(work: str, since: Optional[float]) -> Tuple[Found, Optional[str]]:
    """The newest complete checkpoint a framework wrote by default under ``work``, and which
    framework's layout it has (None when there is none)."""
    best = Found(None, None, [])  # type: Found
    kind = None  # type: Optional[str]
    for name, pattern, folder in FRAMEWORK_GLOBS:
        found = newest(pattern, [("work", work)], since)
        path = found.path
        if path is None or os.path.isdir(path) != folder:
            continue
        if best.path is None or newest_mtime(path) > newest_mtime(best.path):
            best, kind = found, name
    return best, kind


# The step a checkpoint holds, by what its writer puts in names and side files: rgt.ckpt's
# commit record, the Trainer's trainer_state.json, Lightning's ``epoch=0-step=60.ckpt``,
# accelerate's ``step_60``/``epoch_2``, DeepSpeed's ``global_step60``, ``checkpoint-60``.
STEP_IN_NAME = re.compile(r"(?:^|[^a-z])(?:global_)?(step|epoch|checkpoint|iter)[=_-]?(\d+)", re.I)


def step_of(path: str) -> Optional[Tuple[str, int]]:
    """(unit, number) of the checkpoint at ``path`` ("step" or "epoch"), when it says."""
    recorded = _recorded_step(path)
    if recorded is not None:
        return ("step", recorded)
    name = os.path.basename(path.rstrip(os.sep))
    found = [(m.group(1).lower(), int(m.group(2))) for m in STEP_IN_NAME.finditer(name)]
    steps = [n for unit, n in found if unit != "epoch"]
    if steps:
        return ("step", steps[-1])
    return ("epoch", found[-1][1]) if found else None


def _recorded_step(path: str) -> Optional[int]:
    """rgt.ckpt's commit record of a data file, or a Trainer folder's global_step."""
    if os.path.isdir(path) and _is_sharded_step(path):
        data = _json(os.path.join(path, MANIFEST))
        step = data.get("step") if isinstance(data, dict) else None
        return step if isinstance(step, int) else None
    if os.path.isdir(path):
        data = _json(os.path.join(path, TRAINER_STATE))
        step = data.get("global_step") if isinstance(data, dict) else None
        return step if isinstance(step, int) else None
    for record in glob.glob(os.path.join(glob.escape(os.path.dirname(path)), "ckpt-*.json")):
        data = _json(record)
        if isinstance(data, dict) and data.get("file") == os.path.basename(path):
            step = data.get("step")
            return step if isinstance(step, int) else None
    return None


def _json(path: str) -> object:
    try:
        with open(path, "rb") as handle:
            return json.loads(handle.read().decode("utf-8"))
    except (OSError, ValueError):
        return None
