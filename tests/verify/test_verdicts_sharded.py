"""The stdlib verifier on rgt.ckpt's sharded step folders with hostile or broken manifests: a
manifest that names a file outside the folder, lies about a size, skips a rank, or is not a
sharded manifest makes the folder one bad unit, never an ok one (real files, no torch)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rgt.agent import _ckpt_find
from rgt.agent.verdicts import check_tree

STEP = "step-000000000007-0011223344556677"


def folder(tmp_path: Path, shards: list[dict[str, Any]], **manifest: Any) -> Path:
    step = tmp_path / "ckpt" / STEP
    step.mkdir(parents=True)
    for rank in range(2):
        (step / f"shard-{rank}.bin").write_bytes(b"x" * 10)
        (step / f"ckpt-rank-{rank:05d}.json").write_text(json.dumps({"rank": rank}))
    body = {"format": "rgt.ckpt.sharded/1", "step": 7, "world_size": 2, "shards": shards}
    (step / "manifest.json").write_text(json.dumps({**body, **manifest}))
    return step


def shard(rank: int, file: str | None = None, size: int = 10) -> dict[str, Any]:
    return {"rank": rank, "file": file or f"shard-{rank}.bin", "bytes": size, "hash": "x"}


@pytest.mark.parametrize(
    ("shards", "manifest", "says"),
    [
        ([shard(0), shard(1, "../../outside.bin")], {}, "missing"),
        ([shard(0), shard(1, size=11)], {}, "holds 10 bytes"),
        ([shard(0)], {}, "one shard per rank"),
        ([shard(1), shard(0)], {}, "one shard per rank"),
        ([shard(0), shard(1)], {"format": "something else"}, "not an rgt.ckpt sharded"),
    ],
    ids=["outside", "size-lie", "rank-missing", "ranks-out-of-order", "not-sharded"],
)
def test_a_broken_manifest_makes_the_step_one_bad_unit(
    tmp_path: Path, shards: list[dict[str, Any]], manifest: dict[str, Any], says: str
) -> None:
    step = folder(tmp_path, shards, **manifest)
    (tmp_path / "outside.bin").write_bytes(b"y" * 10)
    (unit,) = check_tree(step.parent).units
    assert (unit.layout, unit.verdict) == ("rgt-sharded", "bad"), unit
    assert says in unit.detail, unit.detail
    assert _ckpt_find.incomplete(str(step)) is not None  # nor would the agent resume from it
    assert _ckpt_find.newest(None, [("ckpt_dir", str(step.parent))], None).path != str(step)


def test_a_well_formed_manifest_is_a_committed_step_to_the_agent(tmp_path: Path) -> None:
    step = folder(tmp_path, [shard(0), shard(1)])
    assert _ckpt_find.incomplete(str(step)) is None
    assert _ckpt_find.newest(None, [("ckpt_dir", str(step.parent))], None).path == str(step)
    assert _ckpt_find.step_of(str(step)) == ("step", 7)
