"""Checkpoint folders the frameworks write, recognised by their layout, each judged as one unit.

- accelerate ``save_state``: ``random_states_<rank>.pkl``, or an ``optimizer*.bin`` next to
  ``model*.safetensors``/``pytorch_model*.bin``; incomplete when an optimizer has no model;
- transformers ``Trainer``: ``checkpoint-<N>/`` holding ``trainer_state.json``; incomplete
  without weights (``model*.safetensors``, ``pytorch_model*.bin``, PEFT's ``adapter_model.*``,
  a DeepSpeed ``latest`` or a DCP subfolder);
- DeepSpeed: a ``latest`` file naming a tag folder that holds ``*model_states.pt``, with the
  ZeRO optimizer shards of every rank ``0..N-1``;
- torch DCP: ``.metadata`` + ``__<rank>_<n>.distcp``; complete when every shard the metadata
  names exists and is long enough;
- rgt.ckpt's sharded step (``step-<12 digits>-<session>/``: one ``ckpt-*.rgt`` shard and one
  ``ckpt-rank-R.json`` record per rank, and ``manifest.json``, rank 0's commit): complete only
  when committed, i.e. the manifest names a shard for every rank and each is there with its
  recorded size (each shard's hash is checked against its record like any rgt.ckpt file);
- a sharded model: ``*.index.json`` whose ``weight_map`` names shards that must all exist (also
  checked inside every unit above).

A unit is the outermost such folder; every file below it belongs to it.
"""

from __future__ import annotations

import json
import os
import re
from typing import Dict, List, Optional, Tuple

from rgt.agent.verdicts import _dcp
from rgt.agent.verdicts._records import BAD, FileVerdict, HashOnly, UnitVerdict, worst
from rgt.agent.verdicts._records import Bad as _Bad

_WEIGHTS = re.compile(r"^(model|pytorch_model|adapter_model)[^/]*\.(safetensors|bin)$")
_RANDOM = re.compile(r"^random_states_\d+\.pkl$")
_HF_DIR = re.compile(r"^checkpoint-\d+$")
_OPTIM_RANK = re.compile(r"zero_pp_rank_(\d+)_mp_rank_\d+_optim_states\.pt$")
_RGT_STEP = re.compile(r"^step-\d{12}-[0-9a-f]{8,32}$")
_RGT_RANK = re.compile(r"^ckpt-rank-(\d{5})\.json$")
_RGT_SHARDED = "rgt.ckpt.sharded/1"
_RGT_MANIFEST = "manifest.json"


def layout_of(names: List[str], dirname: str) -> Optional[str]:
    """The layout of a folder from the names directly in it, or None."""
    has = set(names)
    if _HF_DIR.match(dirname) and "trainer_state.json" in has:
        return "hf-trainer"
    if "latest" in has and any(n.startswith("global_step") or n == "checkpoint" for n in has):
        return "deepspeed"  # Lightning's DeepSpeed strategy names its tag "checkpoint"
    if any(_RGT_RANK.match(n) for n in has) or (_RGT_STEP.match(dirname) and _RGT_MANIFEST in has):
        return "rgt-sharded"
    if _dcp.METADATA in has and any(n.endswith(".distcp") for n in has):
        return "dcp"
    if any(_RANDOM.match(n) for n in has) or (
        any(n.startswith("optimizer") and n.endswith(".bin") for n in has)
        and any(_WEIGHTS.match(n) for n in has)
    ):
        return "accelerate"
    if any(n.endswith(".index.json") for n in has):
        return "sharded"
    return None


def find_units(root: str, rels: List[str]) -> Dict[str, Tuple[str, List[str]]]:
    """unit folder (relative, "." for the root) -> (layout, its files), outermost first."""
    children: Dict[str, List[str]] = {}
    for rel in rels:
        parts = rel.split("/")
        for depth in range(len(parts)):
            folder = "/".join(parts[:depth]) or "."
            children.setdefault(folder, []).append(parts[depth])
    units: Dict[str, Tuple[str, List[str]]] = {}
    for folder in sorted(children, key=lambda f: (f.count("/") + (f != "."), f)):
        if any(folder == u or folder.startswith(u + "/") or u == "." for u in units):
            continue
        layout = layout_of(sorted(set(children[folder])), os.path.basename(folder))
        if layout is not None:
            prefix = "" if folder == "." else folder + "/"
            units[folder] = (layout, [r for r in rels if r.startswith(prefix)])
    return units


def judge(root: str, folder: str, layout: str, files: List[FileVerdict]) -> UnitVerdict:
    full = os.path.join(root, folder)
    problems = _completeness(full, layout)
    verdicts = [f.verdict for f in files]
    counts = ", ".join(
        "%d %s" % (verdicts.count(v), v) for v in ("ok", "hash_only", "bad") if verdicts.count(v)
    )
    if problems:
        return UnitVerdict(folder, layout, BAD, len(files), "incomplete: " + "; ".join(problems))
    bad = [f.path for f in files if f.verdict == BAD]
    detail = "complete; %s" % counts + ("; bad: %s" % ", ".join(bad[:3]) if bad else "")
    return UnitVerdict(folder, layout, worst(verdicts), len(files), detail)


def _completeness(folder: str, layout: str) -> List[str]:
    names = sorted(os.listdir(folder)) if os.path.isdir(folder) else []
    problems = _index_problems(folder, names)
    if layout == "hf-trainer" and not _has_weights(folder, names):
        problems.append("no model weights (model*.safetensors, pytorch_model*.bin, adapter)")
    optimizer = any(n.startswith("optimizer") for n in names)
    if layout == "accelerate" and optimizer and not _has_weights(folder, names):
        problems.append("an optimizer state but no model weights")
    if "latest" in names:
        problems += _deepspeed_problems(folder)
    if layout == "dcp":
        problems += _dcp_problems(folder)
    if layout == "rgt-sharded":
        problems += _rgt_sharded_problems(folder, names)
    for name in names:  # accelerate's FSDP state: a DCP folder inside the unit
        if os.path.isfile(os.path.join(folder, name, _dcp.METADATA)):
            problems += ["%s/%s" % (name, p) for p in _dcp_problems(os.path.join(folder, name))]
    return problems


def _has_weights(folder: str, names: List[str]) -> bool:
    return any(_WEIGHTS.match(n) for n in names) or any(
        n == "latest" or os.path.isfile(os.path.join(folder, n, _dcp.METADATA)) for n in names
    )


def _index_problems(folder: str, names: List[str]) -> List[str]:
    problems = []
    for name in names:
        if not name.endswith(".index.json"):
            continue
        try:
            with open(os.path.join(folder, name), "rb") as handle:
                weight_map = json.loads(handle.read().decode("utf-8")).get("weight_map")
        except (OSError, ValueError, AttributeError):
            problems.append("%s is unreadable" % name)
            continue
        shards = sorted(set(weight_map.values())) if isinstance(weight_map, dict) else []
        absent = [s for s in shards if not os.path.isfile(os.path.join(folder, str(s)))]
        if absent:
            problems.append(
                "%s names %d absent shard(s): %s"
                % (name, len(absent), ", ".join(map(str, absent[:3])))
            )
    return problems


def _deepspeed_problems(folder: str) -> List[str]:
    with open(os.path.join(folder, "latest"), "rb") as handle:
        tag = handle.read(256).decode("utf-8", "replace").strip()
    tag_dir = os.path.join(folder, tag)
    if "/" in tag or tag in ("", ".", "..") or not os.path.isdir(tag_dir):
        return ["'latest' names %r, which is not a folder here" % tag]
    names = os.listdir(tag_dir)
    if not any(n.endswith("model_states.pt") for n in names):
        return ["%s holds no *model_states.pt" % tag]
    ranks = sorted({int(m.group(1)) for m in map(_OPTIM_RANK.search, names) if m})
    if ranks and ranks != list(range(ranks[-1] + 1)):
        return ["%s lacks ZeRO optimizer shards of some ranks (has %s)" % (tag, ranks)]
    return []


def _rgt_sharded_problems(folder: str, names: List[str]) -> List[str]:
    """An rgt.ckpt sharded step counts only once committed: rank 0's manifest names one shard
    per rank, each present with its recorded size."""
    ranks = sorted(int(m.group(1)) for m in map(_RGT_RANK.match, names) if m)
    try:
        with open(os.path.join(folder, _RGT_MANIFEST), "rb") as handle:
            manifest = json.loads(handle.read().decode("utf-8"))
    except (OSError, ValueError):
        return ["not committed: no readable manifest.json (shard records of ranks %s)" % ranks]
    if not isinstance(manifest, dict) or manifest.get("format") != _RGT_SHARDED:
        return ["manifest.json is not an rgt.ckpt sharded manifest"]
    shards = manifest.get("shards")
    shards = shards if isinstance(shards, list) else []
    said = [shard.get("rank") if isinstance(shard, dict) else None for shard in shards]
    if not shards or said != list(range(len(shards))) or manifest.get("world_size") != len(said):
        return ["manifest.json does not name one shard per rank"]
    return [p for p in (_rgt_shard_problem(folder, shard) for shard in shards) if p]


def _rgt_shard_problem(folder: str, shard: Dict[str, object]) -> str:
    name = str(shard.get("file"))
    path = os.path.join(folder, name)
    if "/" in name or name in ("", ".", "..") or not os.path.isfile(path):
        return "rank %s's shard %s is missing" % (shard.get("rank"), name)
    if os.path.getsize(path) != shard.get("bytes"):
        return "rank %s's shard %s holds %d bytes, the manifest says %s" % (
            shard.get("rank"),
            name,
            os.path.getsize(path),
            shard.get("bytes"),
        )
    return ""


def _dcp_problems(folder: str) -> List[str]:
    try:
        shards = _dcp.shard_items(os.path.join(folder, _dcp.METADATA))
    except (_Bad, HashOnly, OSError) as exc:
        return [".metadata unreadable: %s" % exc]
    return _dcp.missing_shards(folder, shards)
