"""Exact resume of a real two-rank DDP run (gloo on CPU): rank 0 writes the checkpoint, rank 1
keeps its own RNG in ``rank-1/``, and after a SIGKILL of both ranks the resumed run reproduces
every rank's per-batch losses and final state. Without rank 1's own state it does not."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # real DDP process groups

SCRIPT = Path(__file__).with_name("_ddp_train.py")
Runs = list[tuple[dict[int, str], str | None]]
HOSTILE = "ddp ü 'q' $(touch PWNED)"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def run(directory: Path, outs: list[Path], kill: int = 0) -> tuple[list[int], str]:
    """Both ranks in one new process group; their exit codes and rank 1's stderr."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RGT_")}
    env.update(WORLD_SIZE="2", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()))
    procs: list[subprocess.Popen[bytes]] = []
    for rank, out in enumerate(outs):
        procs.append(
            subprocess.Popen(
                [sys.executable, str(SCRIPT), str(directory), str(out), str(kill)],
                env={**env, "RANK": str(rank), "LOCAL_RANK": str(rank)},
                process_group=procs[0].pid if procs else 0,
                stderr=subprocess.PIPE,
            )
        )
    codes, errs = [], []
    for proc in procs:
        try:
            _, err = proc.communicate(timeout=180)
        except subprocess.TimeoutExpired:
            os.killpg(procs[0].pid, signal.SIGKILL)
            raise
        codes.append(proc.returncode)
        errs.append(err.decode(errors="replace"))
        if kill == 0:
            assert proc.returncode == 0, errs[-1][-3000:]
    return codes, errs[1]


def read(out: Path) -> tuple[dict[int, str], str | None]:
    losses, final = {}, None
    for line in out.read_text().splitlines():
        kind, *fields = line.split()
        if kind == "micro":
            losses[int(fields[0])] = fields[1]  # a batch trained twice keeps its last loss
        else:
            final = fields[0]
    return losses, final


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Runs:
    base = tmp_path_factory.mktemp("ddp-reference")
    outs = [base / "rank0.txt", base / "rank1.txt"]
    run(base / "ckpt", outs)
    return [read(out) for out in outs]


def kill_then_resume(tmp_path: Path, drop_rank_state: bool = False) -> tuple[Runs, str]:
    """Kill both ranks after step 7 (checkpoints at 3 and 6), resume; both ranks' output and
    rank 1's stderr of the resume."""
    directory = tmp_path / HOSTILE
    outs = [tmp_path / "rank0.txt", tmp_path / "rank1.txt"]
    codes, _ = run(directory, outs, kill=7)
    assert codes == [-signal.SIGKILL, -signal.SIGKILL]
    assert len(list((directory / "rank-1").glob("*.json"))) == 2  # rank 1's own, steps 3 and 6
    assert len(list(directory.glob("*.json"))) == 2  # rank 0's checkpoints
    if drop_rank_state:
        shutil.rmtree(directory / "rank-1")
    _, err = run(directory, outs)
    return [read(out) for out in outs], err


def test_both_ranks_resume_bit_identically(tmp_path: Path, reference: Runs) -> None:
    resumed, err = kill_then_resume(tmp_path)
    assert "no state of its own" not in err
    for rank, ((losses, final), (expected, expected_final)) in enumerate(
        zip(resumed, reference, strict=True)
    ):
        assert losses == expected, rank  # every micro-batch, the retrained ones included
        assert final == expected_final and final is not None, rank
    assert not (tmp_path / "PWNED").exists()


def test_without_rank_ones_own_state_the_resume_differs(tmp_path: Path, reference: Runs) -> None:
    """The near miss (rank 1 resumes with rank 0's RNG): warned, and no longer identical, which
    shows the comparison above can fail."""
    resumed, err = kill_then_resume(tmp_path, drop_rank_state=True)
    assert "rank 1: no state of its own for step 6" in err
    losses, final = resumed[1]
    expected, expected_final = reference[1]
    assert next(n for n in expected if losses[n] != expected[n]) == 13  # from the resume on
    assert final != expected_final
