"""Overlapped staging (``ShardedCheckpointer(overlap=True)``): the large CPU tensors are copied on
the writer thread after ``save()`` returns, and every optimizer step waits for that copy.

Real torch on CPU throughout: a model with 1024-wide layers (its weights and Adam moments over
``_overlap.SMALL``, so they are left to the writer) and a BatchNorm (its buffers under it, so
staged in ``save()``). ``_persist.hold("overlap-copy")`` freezes the writer just before it
copies, which opens the window between ``save()`` and the copy as wide as a test needs. The
protocol across ranks runs on two real gloo ranks with FSDP2 DTensors.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rgt.ckpt import ShardedCheckpointer, _overlap, _persist, _shards
from rgt.errors import CheckpointError, UsageError

torch = pytest.importorskip("torch")
nn = torch.nn

SESSION = "0123abcd0123abcd"


def model_and_adam(seed: int = 0) -> tuple[Any, Any]:
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(1024, 512), nn.BatchNorm1d(512), nn.Linear(512, 256))
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    backward(model, 0)
    opt.step()
    return model, opt


def backward(model: Any, seed: int) -> None:
    batch = torch.randn(16, 1024, generator=torch.Generator().manual_seed(seed))
    model(batch).square().mean().backward()


def state_of(model: Any, opt: Any, step: int) -> dict[str, Any]:
    return {"model": model.state_dict(), "optim": opt.state_dict(), "step": step}


def snapshot(state: dict[str, Any]) -> dict[str, Any]:
    return {
        "model": {k: v.clone() for k, v in state["model"].items()},
        "optim": {
            i: {k: v.clone() for k, v in slots.items()}
            for i, slots in state["optim"]["state"].items()
        },
    }


def assert_equal(got: dict[str, Any], want: dict[str, Any]) -> None:
    for name, value in want["model"].items():
        assert torch.equal(got["model"][name], value), name
    for index, slots in want["optim"].items():
        for slot, value in slots.items():
            assert torch.equal(got["optim"]["state"][index][slot], value), (index, slot)


def loaded(directory: Path) -> tuple[int, dict[str, Any]]:
    """The newest committed step, loaded into a fresh model and optimizer."""
    model, opt = model_and_adam(seed=99)
    state = state_of(model, opt, -1)
    info = ShardedCheckpointer(directory, rank=0, world_size=1).load_latest(state)
    assert info is not None
    return info.step, state


def checkpointer(directory: Path, overlap: bool = True, **options: Any) -> ShardedCheckpointer:
    return ShardedCheckpointer(
        directory, session=SESSION, asynchronous=True, overlap=overlap, **options
    )


@contextlib.contextmanager
def copy_held(release_after: float | None = None) -> Iterator[tuple[Any, Any]]:
    """Freeze every overlapped copy before it starts until ``release`` is set (by the test, or
    by a timer ``release_after`` seconds after the writer got there)."""
    reached, release = threading.Event(), threading.Event()

    def hold(stage: str) -> None:
        if stage == "overlap-copy":
            reached.set()
            if release_after is not None:
                threading.Timer(release_after, release.set).start()
            release.wait(30)

    _persist.hold = hold
    try:
        yield reached, release
    finally:
        release.set()
        _persist.hold = None


def test_overlap_writes_the_same_shard_as_a_save_inside_the_call(tmp_path: Path) -> None:
    model, opt = model_and_adam()
    state = state_of(model, opt, 1)
    plain = checkpointer(tmp_path / "plain", overlap=False, rank=0, world_size=1)
    over = checkpointer(tmp_path / "overlap", rank=0, world_size=1)
    plain.save(state, 1)
    over.save(state, 1)
    left = set(over._copy.names)  # type: ignore[union-attr]
    assert {"model.0.weight", "optim.state.0.exp_avg", "optim.state.0.exp_avg_sq"} <= left
    assert not left & {"model.1.running_mean", "model.1.num_batches_tracked"}
    a, b = plain.wait(), over.wait()
    assert a is not None and b is not None
    assert [s.file_hash for s in a.shards] == [s.file_hash for s in b.shards]
    assert [s.state_digest for s in a.shards] == [s.state_digest for s in b.shards]
    _, from_plain = loaded(tmp_path / "plain")
    _, from_overlap = loaded(tmp_path / "overlap")
    assert_equal(from_overlap, snapshot(from_plain))


def test_an_optimizer_step_right_after_save_waits_for_the_copy(tmp_path: Path) -> None:
    model, opt = model_and_adam()
    backward(model, 1)  # the gradients of the next step, before the save
    state = state_of(model, opt, 1)
    before = snapshot(state)
    ckpt = checkpointer(tmp_path, rank=0, world_size=1)
    with copy_held(release_after=0.4) as (reached, _):
        ckpt.save(state, 1)
        assert reached.wait(10)
        started = time.perf_counter()
        opt.step()  # without the pre-hook this would change the tensors under the copy
        stepped = time.perf_counter() - started
    assert ckpt.wait() is not None  # no torn tensor
    assert ckpt.last_copy_wait_seconds >= 0.3 and stepped >= 0.3
    step, got = loaded(tmp_path)
    assert step == 1
    assert_equal(got, before)
    assert not torch.equal(got["model"]["0.weight"], model[0].weight.detach())  # it did step


def test_an_in_place_change_during_the_copy_commits_nothing(tmp_path: Path) -> None:
    model, opt = model_and_adam()
    ckpt = checkpointer(tmp_path, rank=0, world_size=1)
    ckpt.save(state_of(model, opt, 1), 1)
    ckpt.wait()
    first = snapshot(state_of(model, opt, 1))
    with copy_held() as (reached, release):
        ckpt.save(state_of(model, opt, 2), 2)
        assert reached.wait(10)
        with torch.no_grad():
            model[0].weight.mul_(2)  # outside an optimizer step: nothing waits for the copy
        release.set()
        with pytest.raises(CheckpointError, match=r"model\.0\.weight") as caught:
            ckpt.wait()
    assert caught.value.fix is not None and "overlap=False" in caught.value.fix
    assert [info.step for info in _shards.list_committed(str(tmp_path))] == [1]
    folder = Path(dict(_shards.step_folders(str(tmp_path)))[2])
    assert not list(folder.glob("*.rgt")) and (folder / "abandoned-rank-00000.json").exists()
    step, got = loaded(tmp_path)
    assert step == 1
    assert_equal(got, first)
    ckpt.save(state_of(model, opt, 3), 3)  # the error was raised once; saving goes on
    assert ckpt.wait() is not None and loaded(tmp_path)[0] == 3
    assert not folder.exists()  # the abandoned step went with the next commit's rotation


def test_a_batchnorm_forward_between_save_and_step_does_not_fail_the_save(tmp_path: Path) -> None:
    model, opt = model_and_adam()
    state = state_of(model, opt, 1)
    before = snapshot(state)
    ckpt = checkpointer(tmp_path, rank=0, world_size=1)
    with copy_held() as (reached, release):
        ckpt.save(state, 1)
        assert reached.wait(10)
        opt.zero_grad()
        backward(model, 2)  # updates BatchNorm's running statistics in place
        release.set()
        opt.step()
    assert ckpt.wait() is not None
    assert not torch.equal(model[1].running_mean, before["model"]["1.running_mean"])
    step, got = loaded(tmp_path)
    assert step == 1
    assert_equal(got, before)


def test_a_rank_that_abandons_its_shard_fails_the_commit_at_once(tmp_path: Path) -> None:
    """Two ranks in one process (``rank=``): rank 0 waits for rank 1's shard and learns from
    its abandoned record, long before ``commit_timeout_s``."""
    models = [model_and_adam(seed=rank) for rank in (0, 1)]
    ckpts = [
        checkpointer(tmp_path, rank=rank, world_size=2, commit_timeout_s=120, overlap=rank == 1)
        for rank in (0, 1)
    ]
    for rank in (0, 1):
        ckpts[rank].save(state_of(*models[rank], 1), 1)
    assert ckpts[1].wait() is not None and ckpts[0].wait() is not None
    with copy_held() as (reached, release):
        ckpts[0].save(state_of(*models[0], 2), 2)
        ckpts[1].save(state_of(*models[1], 2), 2)
        assert reached.wait(10)
        models[1][1].state[models[1][0][0].weight]["exp_avg"].add_(1)  # not in a step
        release.set()
        started = time.perf_counter()
        with pytest.raises(CheckpointError, match=r"optim\.state\.0\.exp_avg"):
            ckpts[1].wait()
        with pytest.raises(CheckpointError, match=r"step 2 not committed: rank 1 abandoned"):
            ckpts[0].wait()
    assert time.perf_counter() - started < 30
    assert [info.step for info in _shards.list_committed(str(tmp_path))] == [1]


def test_overlap_needs_an_asynchronous_save_and_reads_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(UsageError, match="asynchronous"):
        ShardedCheckpointer(tmp_path, overlap=True)
    monkeypatch.setenv("RGT_CKPT_ASYNC", "1")
    monkeypatch.setenv("RGT_CKPT_OVERLAP", "1")
    assert ShardedCheckpointer.from_env(tmp_path).overlap
    monkeypatch.setenv("RGT_CKPT_OVERLAP", "0")
    assert not ShardedCheckpointer.from_env(tmp_path).overlap
    assert _overlap.SMALL <= 4 << 20  # BatchNorm-sized buffers stay under it


# --- two real gloo ranks, FSDP2 DTensors ------------------------------------------------------


def gloo_rank(rank: int, world: int, port: int, out: str) -> None:
    """Step 1 saved with and without overlap (the next step issued right after the overlapped
    save); step 2 torn on rank 1 by an in-place DTensor op; then both ranks load the latest."""
    import torch.distributed as dist
    from torch.distributed.checkpoint.state_dict import get_optimizer_state_dict
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    from tests.ckpt import _sharded_worker as worker

    worker.init(rank, world, port)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(1024, 1024), nn.Tanh(), nn.Linear(1024, 8))
    mesh = init_device_mesh("cpu", (world,))
    for layer in (model[0], model[2], model):
        fully_shard(layer, mesh=mesh)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)

    def state(step: int) -> dict[str, Any]:
        return {
            "model": model.state_dict(),
            "optim": get_optimizer_state_dict(model, opt),
            "step": step,
        }

    def train() -> None:
        opt.zero_grad()
        model(torch.randn(4, 1024, generator=torch.Generator().manual_seed(7))).sum().backward()

    train()
    opt.step()
    plain = ShardedCheckpointer(f"{out}/plain", asynchronous=True)
    over = ShardedCheckpointer(
        f"{out}/overlap", asynchronous=True, overlap=True, commit_timeout_s=120
    )
    plain.save(state(1), 1)
    plain.wait()
    over.save(state(1), 1)
    train()
    opt.step()  # waits for the copy of step 1
    done, before = over.wait(), plain.latest_info()
    assert done is not None and before is not None
    results: dict[str, Any] = {"hashes": [s.file_hash for s in done.shards]}
    results["plain"] = [s.file_hash for s in before.shards]
    dist.barrier()
    with copy_held() as (reached, release):
        over.save(state(2), 2)
        assert reached.wait(10)
        if rank == 1:
            with torch.no_grad():
                model[0].weight.mul_(2)  # a DTensor op: its local tensor's counter stays put
        release.set()
        started = time.perf_counter()
        try:
            over.wait()
            results["error"] = None
        except CheckpointError as exc:
            results["error"] = str(exc)
        results["seconds"] = time.perf_counter() - started
    dist.barrier()
    fresh = state(0)
    info = ShardedCheckpointer(f"{out}/overlap").load_latest(fresh)
    results["loaded"] = None if info is None else info.step
    Path(out, f"rank{rank}.json").write_text(json.dumps(results))
    dist.destroy_process_group()


@pytest.mark.slow  # two real process groups
def test_two_gloo_ranks_overlap_saves_alike_and_a_torn_rank_commits_nothing(tmp_path: Path) -> None:
    from tests.ckpt.test_sharded import spawn

    assert spawn(gloo_rank, 2, str(tmp_path)) == [0, 0]
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert ranks[0]["hashes"] == ranks[0]["plain"] and len(ranks[0]["hashes"]) == 2
    assert "model.0.weight" in ranks[1]["error"]
    assert "step 2 not committed: rank 1 abandoned" in ranks[0]["error"]
    assert ranks[0]["seconds"] < 60  # the abandoned record, not the 120 s commit timeout
    assert [r["loaded"] for r in ranks] == [1, 1]
    committed = _shards.list_committed(str(tmp_path / "overlap"))
    assert [info.step for info in committed] == [1]
