"""The sharded step folder as one unit, in one process: two ranks' ``ShardedCheckpointer``s
(``rank=``/``world_size=``/``session=`` instead of a process group) write real shards. Rank 0
commits only after rank 1's shard is durable; the agent's resume finder and the stdlib verifier
see a step only once committed; a corrupt shard makes ``load_latest`` fall back a step."""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path
from typing import Any

import pytest

from rgt.agent import _ckpt_find
from rgt.agent.verdicts import check_tree
from rgt.ckpt import CheckpointFallbackWarning, ShardedCheckpointer, _persist, _shards
from rgt.errors import DiskBudgetError

torch = pytest.importorskip("torch")

SESSION = "0123abcd0123abcd"


def ranks(directory: Path) -> list[ShardedCheckpointer]:
    return [
        ShardedCheckpointer(directory, rank=r, world_size=2, session=SESSION, asynchronous=r == 0)
        for r in (0, 1)
    ]


def state(rank: int, step: int) -> dict[str, object]:
    weights = torch.arange(6, dtype=torch.float32) + 10 * step + rank
    return {"model": {"w": weights}, "step": step, "name": f"rank {rank}"}


def save(ckpts: list[ShardedCheckpointer], step: int, both: bool = True) -> None:
    ckpts[0].save(state(0, step), step)  # asynchronous: rank 0 now waits for rank 1's shard
    if both:
        ckpts[1].save(state(1, step), step)
        ckpts[0].wait()


@pytest.fixture
def written(tmp_path: Path) -> Path:
    directory = tmp_path / "ckpt dir ü"
    ckpts = ranks(directory)
    save(ckpts, 1)
    save(ckpts, 2)
    ckpts[0].commit_timeout_s = 0.3
    save(ckpts, 3, both=False)  # rank 1 never writes step 3
    with pytest.raises(Exception, match=r"step 3 not committed: rank\(s\) \[1\] of 2"):
        ckpts[0].wait()
    return directory


def folder_of(directory: Path, step: int) -> Path:
    return Path(dict(_shards.step_folders(str(directory)))[step])


def test_the_agent_resumes_from_the_newest_step_every_rank_committed(written: Path) -> None:
    found = _ckpt_find.newest(None, [("ckpt_dir", str(written))], None)
    assert found.path == str(folder_of(written, 2))
    assert _ckpt_find.step_of(str(found.path)) == ("step", 2)
    why = _ckpt_find.incomplete(str(folder_of(written, 3)))
    assert why is not None and "not committed" in why
    matched = _ckpt_find.newest("step-*/", [("ckpt_dir", str(written))], None)
    assert matched.path == str(folder_of(written, 2))


def test_each_step_folder_is_one_verdict_complete_only_when_committed(written: Path) -> None:
    tree = check_tree(written)
    units = {Path(u.path).name: u for u in tree.units}
    assert {u.layout for u in units.values()} == {"rgt-sharded"} and len(units) == 3
    assert units[folder_of(written, 2).name].verdict == "ok", units
    step3 = units[folder_of(written, 3).name]
    assert step3.verdict == "bad" and "not committed" in step3.detail


def damage(data: bytearray, where: str) -> bytearray:
    """One flipped byte in a tensor, in the framing before it, or in the skeleton; or a cut."""
    if where == "truncated":
        return data[: len(data) // 2]
    at = {"tensor": len(data) // 3, "framing": len(b"rgt.state_digest/1") + 2}.get(where, -30)
    data[at] ^= 0xFF
    return data


@pytest.mark.parametrize("where", ["tensor", "framing", "skeleton", "truncated"])
def test_a_corrupt_shard_is_bad_and_load_latest_falls_back(written: Path, where: str) -> None:
    shard = _shards.read_manifest(str(folder_of(written, 2)))
    assert shard is not None
    data = bytearray(Path(shard.shards[1].path).read_bytes())
    Path(shard.shards[1].path).write_bytes(bytes(damage(data, where)))
    units = {Path(u.path).name: u for u in check_tree(written).units}
    assert units[folder_of(written, 2).name].verdict == "bad"
    target = state(1, 0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        info = ShardedCheckpointer(written, rank=1, world_size=2).load_latest(target)
    assert info is not None and info.step == 1
    assert any(issubclass(w.category, CheckpointFallbackWarning) for w in caught)
    assert torch.equal(target["model"]["w"], state(1, 1)["model"]["w"])  # type: ignore[index]
    assert target["step"] == 1 and target["name"] == "rank 1"


def test_a_fresh_directory_loads_nothing(tmp_path: Path) -> None:
    target = state(0, 0)
    assert ShardedCheckpointer(tmp_path / "none", rank=0, world_size=1).load_latest(target) is None
    assert target["step"] == 0


def test_a_shard_with_the_earlier_nested_chunk_table_still_loads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rgt.ckpt import _reshard

    made = _reshard.shard_state

    def nested(*args: Any) -> dict[str, Any]:  # how shards were written before the JSON table
        shard = made(*args)
        shard[_reshard.SHARD_KEY]["chunks"] = json.loads(shard[_reshard.SHARD_KEY]["chunks"])
        return shard

    monkeypatch.setattr(_reshard, "shard_state", nested)
    ShardedCheckpointer(tmp_path, rank=0, world_size=1, session=SESSION).save(state(0, 4), 4)
    monkeypatch.undo()
    target = state(0, 0)
    assert ShardedCheckpointer(tmp_path, rank=0, world_size=1).load_latest(target) is not None
    assert torch.equal(target["model"]["w"], state(0, 4)["model"]["w"])  # type: ignore[index]


def test_inodes_running_out_before_the_shard_record_leave_the_previous_step(
    small_tmpfs: Any,
) -> None:
    point = small_tmpfs("16m", 64)
    ckpt = ShardedCheckpointer(point / "ckpt", rank=0, world_size=1, session=SESSION)
    ckpt.save(state(0, 1), 1)
    (point / "others").mkdir()

    def use_every_inode(at: str) -> None:
        index = 0
        while at == "written":
            try:
                (point / "others" / str(index)).touch()
            except OSError:
                return
            index += 1

    _persist.hold = use_every_inode
    try:
        with pytest.raises(DiskBudgetError, match="No space left"):
            ckpt.save(state(0, 2), 2)
    finally:
        _persist.hold = None
    step2 = folder_of(point / "ckpt", 2)
    assert not [n for n in os.listdir(step2) if n.endswith(".rgt") or n.startswith(".tmp-")]
    target = state(0, 0)
    assert ShardedCheckpointer(point / "ckpt", rank=0, world_size=1).load_latest(target)
    assert target["step"] == 1
