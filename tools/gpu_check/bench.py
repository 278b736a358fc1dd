"""How long a sharded save holds the training loop: rgt vs DCP, same model, same run (step 4).

Run by ``torchrun``. The model of ``_model.py`` after one training step; each repeat saves it
with rgt's ``ShardedCheckpointer`` (asynchronous: ``save`` returns once this rank's shard is
snapshotted into host memory), ``torch.distributed.checkpoint.async_save`` and the blocking
``dcp.save``, each into a fresh step. Times are the slowest rank's; the first repeat is a
warm-up. ``async_save`` gets a gloo group, as its tutorial and torchtitan give it: its planning
collectives run in a background thread. Writes ``bench.json`` to ``RGT_OUTPUT_DIR``.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import _model
import torch
import torch.distributed as dist
from torch.distributed.checkpoint.state_dict import get_optimizer_state_dict
from torch.distributed.checkpoint.state_dict_saver import async_save, save

from rgt.ckpt import ShardedCheckpointer

OUT = Path(os.environ["RGT_OUTPUT_DIR"])
BASE = Path(os.environ["RGT_CKPT_DIR"])


def sync() -> None:
    if _model.device().type == "cuda":
        torch.cuda.synchronize()


def timed(group: Any, start: Callable[[], Any], finish: Callable[[Any], Any]) -> list[float]:
    """[blocking, durable] seconds of one save, the slowest rank's."""
    sync()
    dist.barrier(group=group)
    started = time.perf_counter()
    handle = start()
    blocking = time.perf_counter() - started
    finish(handle)
    durable = time.perf_counter() - started
    both = torch.tensor([blocking, durable], dtype=torch.float64)
    dist.all_reduce(both, op=dist.ReduceOp.MAX, group=group)
    return [float(x) for x in both]


def staged(response: Any) -> Any:
    """``async_save`` returns a Future, or (with an asynchronous stager) a response whose
    ``staging_completion`` says when the state may change again: the loop waits for that."""
    staging = getattr(response, "staging_completion", None)
    if staging is not None:
        staging.result()
    return response


def settle(response: Any) -> None:
    getattr(response, "upload_completion", response).result()


def one_repeat(ckpt: ShardedCheckpointer, state: Any, group: Any, i: int) -> dict[str, Any]:
    where = {name: str(BASE / f"{name}-{i}") for name in ("dcp-async", "dcp-save")}
    row = {
        "rgt async": timed(group, lambda: ckpt.save(state, i + 1), lambda _: ckpt.wait()),
        "dcp.async_save": timed(
            group,
            lambda: staged(
                async_save(state, checkpoint_id=where["dcp-async"], process_group=group)
            ),
            settle,
        ),
        "dcp.save": timed(group, lambda: save(state, checkpoint_id=where["dcp-save"]), _none),
    }
    dist.barrier(group=group)
    if dist.get_rank() == 0:
        for path in where.values():
            shutil.rmtree(path, ignore_errors=True)
    return row


def _none(_: Any) -> None:
    return None


def main() -> None:
    here = _model.setup()
    group = dist.new_group(backend="gloo") if here.type == "cuda" else None
    model, opt = _model.build()
    _model.train_step(model, opt, 1)
    state = {"model": model.state_dict(), "optim": get_optimizer_state_dict(model, opt)}
    ckpt = ShardedCheckpointer(BASE / "rgt", asynchronous=True, keep_last=1)
    repeats = int(os.environ.get("GC_REPEATS", "3"))
    rows = [one_repeat(ckpt, state, group, i) for i in range(repeats + 1)]
    if dist.get_rank() == 0:
        report(rows, _model.state_bytes(_model.full_tensors(model, state["optim"])))
    else:
        _model.full_tensors(model, state["optim"])  # the gather is a collective
    dist.barrier()
    dist.destroy_process_group()


def report(rows: list[dict[str, Any]], nbytes: int) -> None:
    measured = rows[1:]
    doc: dict[str, Any] = {"state_mb": round(nbytes / 1e6, 1), "repeats": len(measured)}
    for method in rows[0]:
        for i, what in enumerate(("blocking", "durable")):
            values = [row[method][i] for row in measured]
            doc[f"{method} {what} s"] = {
                "median": statistics.median(values),
                "min": min(values),
                "max": max(values),
                "warm_up": rows[0][method][i],
            }
    ours, theirs = doc["rgt async blocking s"]["median"], doc["dcp.async_save blocking s"]["median"]
    doc["blocking rgt / async_save"] = ours / theirs if theirs else None
    (OUT / "bench.json").write_text(json.dumps(doc, indent=1))


if __name__ == "__main__":
    main()
