"""Sharded checkpoints from real FSDP2 process groups (gloo, CPU): every rank writes its own
shard, rank 0 commits the step with one manifest once all are durable, a crash between shards
leaves the previous step as the latest, and a 2-rank save loads on 1 and 4 ranks through DCP's
resharding, tensor for tensor equal to what was saved."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow  # real process groups

torch = pytest.importorskip("torch")
mp = pytest.importorskip("torch.multiprocessing")

from rgt.ckpt import ShardedCheckpointer, _shards  # noqa: E402
from tests.ckpt import _sharded_worker as worker  # noqa: E402

HOSTILE = "shards ü 'q' $(touch PWNED)"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def spawn(fn: Any, world: int, *args: Any) -> list[int]:
    """Run ``fn`` on ``world`` ranks (1 process without a group for 0); their exit codes,
    each awaited on its own (a dead rank does not get the others terminated)."""
    context = mp.spawn(fn, args=(world, free_port(), *args), nprocs=max(world, 1), join=False)
    for process in context.processes:
        process.join(120)
    codes = [process.exitcode for process in context.processes]
    assert None not in codes, f"ranks still running after 120 s: {codes}"
    return codes


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("sharded")
    directory, out = base / HOSTILE / "ckpt", base / "out"
    out.mkdir()
    assert spawn(worker.save_run, 2, str(directory), str(out), 0) == [0, 0]
    return directory, out


def assert_same(got: dict[str, Any], want: dict[str, Any]) -> None:
    assert sorted(got) == sorted(want)
    for name, value in want.items():
        if isinstance(value, torch.Tensor):
            assert torch.equal(got[name], value), name
        else:
            assert got[name] == value, name


def test_every_rank_writes_its_shard_and_one_manifest_commits_the_step(
    saved: tuple[Path, Path],
) -> None:
    directory, _ = saved
    committed = _shards.list_committed(str(directory))
    assert [info.step for info in committed] == [3, 2]  # keep_last=2 rotated step 1 away
    assert len(_shards.step_folders(str(directory))) == 2
    newest = committed[0]
    assert newest.world_size == 2 and [s.rank for s in newest.shards] == [0, 1]
    manifest = json.loads(Path(newest.manifest).read_text())
    assert manifest["format"] == "rgt.ckpt.sharded/1" and len(manifest["shards"]) == 2
    for shard in newest.shards:  # both ranks wrote a different slice, each hashed
        assert Path(shard.path).stat().st_size == shard.bytes and shard.file_hash
    assert newest.shards[0].file_hash != newest.shards[1].file_hash
    assert ShardedCheckpointer(directory).latest_info() == newest


@pytest.mark.parametrize("world", [0, 4], ids=["world-1-plain", "world-4-fsdp2"])
def test_a_two_rank_save_loads_on_another_world_size(saved: tuple[Path, Path], world: int) -> None:
    directory, out = saved
    assert set(spawn(worker.load_run, world, str(directory), str(out))) == {0}
    got = torch.load(out / f"loaded-{max(world, 1)}.pt", weights_only=True)
    assert_same(got, torch.load(out / "full-3.pt", weights_only=True))
    assert json.loads((out / f"info-{max(world, 1)}.json").read_text()) == {"step": 3}


def test_a_crash_between_shards_leaves_the_previous_step_latest(tmp_path: Path) -> None:
    directory, out = tmp_path / "ckpt", tmp_path / "out"
    out.mkdir()
    assert spawn(worker.save_run, 2, str(directory), str(out), 1) == [0, -9]
    said = (out / "rank0-commit.txt").read_text()
    assert "step 3 not committed: rank(s) [1] of 2 never wrote their shard" in said
    folders = dict(_shards.step_folders(str(directory)))
    assert 3 in folders and not (Path(folders[3]) / _shards.MANIFEST).exists()
    assert [i.step for i in _shards.list_committed(str(directory))] == [2, 1]
    assert spawn(worker.load_run, 0, str(directory), str(out)) == [0]
    got = torch.load(out / "loaded-1.pt", weights_only=True)
    assert_same(got, torch.load(out / "full-2.pt", weights_only=True))
