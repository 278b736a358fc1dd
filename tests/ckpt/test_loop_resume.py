"""Exact resume of TrainLoop, plain and through HF accelerate, at five kill points: before the
first checkpoint, mid-epoch, at an epoch boundary, mid-accumulation and inside the writer while
a checkpoint is persisted. Per-micro-batch losses and the final state digest (model, optimizer,
scheduler, EMA, RNG, counters) must equal those of a run that was never killed."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.ckpt._fork_server import Client

pytestmark = pytest.mark.slow  # real training runs killed and resumed

ZYGOTE = Path(__file__).with_name("_loop_zygote.py")
# 12 batches per epoch, accumulation 2: optimizer steps 1-6 in epoch 0, 7-12 in epoch 1, ...;
# checkpoints every 4 steps.
KILL_POINTS = {
    "before the first checkpoint": "step:2",
    "mid-epoch": "step:9",
    "at an epoch boundary": "step:12",
    "mid-accumulation": "micro:29",
    "during persist": "persist:2",
}


class Zygote(Client):
    def __init__(self, kind: str) -> None:
        super().__init__(ZYGOTE, kind)

    def run(self, directory: Path, out: Path, kill: str = "-") -> int:
        return self.send(directory, out, kill)


def read(out: Path) -> tuple[list[tuple[int, str]], str | None]:
    micro, final = [], None
    for line in out.read_text().splitlines():
        kind, *fields = line.split()
        if kind == "micro":
            micro.append((int(fields[0]), fields[1]))
        else:
            final = " ".join(fields)
    return micro, final


@pytest.fixture(scope="module", params=["plain", "accelerate"])
def zygote(request: pytest.FixtureRequest) -> Iterator[Zygote]:
    if request.param == "accelerate":
        pytest.importorskip("accelerate")
    server = Zygote(request.param)
    yield server
    server.close()


def test_exact_resume_at_every_kill_point(zygote: Zygote, tmp_path: Path) -> None:
    reference_out = tmp_path / "reference.txt"
    assert zygote.run(tmp_path / "reference", reference_out) == 0
    reference, reference_final = read(reference_out)
    assert [n for n, _ in reference] == list(range(1, 37)) and reference_final is not None
    losses = dict(reference)
    for name, kill in KILL_POINTS.items():
        directory, out = tmp_path / f"ckpt {name}", tmp_path / f"{name}.txt"
        assert zygote.run(directory, out, kill) == -signal.SIGKILL, name
        killed_at = read(out)[0][-1][0]
        assert zygote.run(directory, out) == 0, name
        micro, final = read(out)
        assert all(losses[n] == loss for n, loss in micro), name  # every micro-batch, bit for bit
        assert {n for n, _ in micro} == set(range(1, 37)), name
        assert final == reference_final, name  # the whole state, hashed
        resumed_from = [n for n, _ in micro].count(killed_at)
        assert resumed_from >= 1
