"""A rank that fails with a traceback: its own log decides the label, not the others' cascade.

Real torchrun (torch 2.13.0 CPU), two gloo ranks, under the real agent zipapp. Rank 1 raises a
ValueError at step 3; rank 0 then fails in ``all_reduce`` with gloo's "Connection closed by
peer", and torchrun SIGTERMs it. Read as one log, the loudest line is rank 0's gloo error
(``rgt triage`` on the merged log says ``nccl``); the agent reads rank 1's own log and says
``code_error`` at train.py's line, and keeps ``logs/attempt-1/rank-R.log`` and ``ranks.json``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from rgt import _fs
from rgt.agent._launch import recognise
from rgt.agent._ranklogs import RankLogs
from rgt.triage import classify
from tests.sshd import free_port

FAILING_JOB = """
    import torch, torch.distributed as dist

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    for step in range(8):
        value = torch.ones(1)
        dist.all_reduce(value)
        print("rank %d step %d" % (rank, step), flush=True)
        if rank == 1 and step == 3:
            raise ValueError("bad batch on rank 1")
    dist.destroy_process_group()
"""


# How torchrun reports a rank that raised: exit 1, or SIGABRT when gloo's threads abort in the
# interpreter's teardown; and the rank that only saw its peer go: SIGTERM, or its own exit 1.
RAISED = {(1, None), (-6, "SIGABRT")}
CASCADE = {(-15, "SIGTERM"), (1, None)}


@pytest.mark.parametrize(
    ("command", "launcher"),
    [
        (["torchrun", "--nproc_per_node=2", "train.py"], "torchrun"),
        (["/opt/venv/bin/python", "-m", "torch.distributed.run", "t.py"], "torchrun"),
        (["accelerate", "launch", "--num_processes", "2", "t.py"], "accelerate"),
        (["python", "-m", "accelerate.commands.launch", "t.py"], "accelerate"),
        (["deepspeed", "--num_gpus", "2", "t.py"], "deepspeed"),
        (["srun", "-n", "2", "python", "t.py"], "srun"),
        (["bash", "-c", "cd x && torchrun --standalone t.py"], "torchrun"),
        (["python", "train.py", "--launcher", "none"], None),
        (["python", "accelerate.py", "launch"], None),
    ],
)
def test_launchers_are_recognised_from_the_command(command: list[str], launcher: str) -> None:
    assert recognise(command) == launcher


def test_rank_logs_follow_the_merged_log_and_stop_at_their_cap(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("RGT_RANK_LOG_MAX_BYTES", "200")
    merged = tmp_path / "attempt-1.log"
    merged.write_bytes(b"before the attempt\n")
    logs = RankLogs(str(merged), str(tmp_path / "attempt-1"), "torchrun")
    with merged.open("ab") as out:
        out.write(b"[rank0]:step 1\ntorchrun's own line\n[rank1]:[rank1]: Traceback (most")
        out.flush()
        logs.follow()  # half a line: kept back until its end arrives
        out.write(b" recent call last):\n[rank1]: ValueError: x\n")
        out.write(b"[rank0]:" + b"y" * 300 + b"\n[rank0]:never copied\n")
    logs.close()
    assert (tmp_path / "attempt-1" / "rank-1.log").read_bytes() == (
        b"Traceback (most recent call last):\nValueError: x\n"
    )
    rank0 = (tmp_path / "attempt-1" / "rank-0.log").read_bytes()
    assert rank0.startswith(b"step 1\nrgt-agent: this copy stops at 200 bytes")
    assert len(rank0) <= 200 and b"never copied" not in rank0
    assert logs.ranks() == [0, 1]


@pytest.mark.slow
def test_the_first_failing_rank_is_classified_from_its_own_log(make_job) -> None:
    job = make_job().write(FAILING_JOB)
    spec = json.loads(Path(job.paths.spec).read_text())
    spec["command"] = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
    spec["command"] += ["--nproc_per_node=2", "train.py"]
    _fs.atomic_write_json(job.paths.spec, spec)
    job.start(OMP_NUM_THREADS="1")
    assert job.finish(timeout=120) == 1, job.agent_log()

    detail = job.events("attempt_ended")[0]["detail"]
    assert (detail["label"], detail["retryable"]) == ("code_error", False), detail
    assert detail["evidence"][0].startswith("torchrun: first failing rank 1, pid "), detail
    # The rank raised, so it exits 1 -- or, when gloo's threads are still up at interpreter
    # exit (no destroy_process_group on the error path), it aborts: both are what torchrun saw.
    first = detail["evidence"][0]
    assert first.endswith(
        ("exit code 1, read from its stderr", "killed by SIGABRT, read from its stderr")
    ), detail
    assert any("train.py" in line and ":11" in line for line in detail["evidence"]), detail
    assert detail["rank_logs"] == "logs/attempt-1"
    assert [(r["rank"], r["first"]) for r in detail["ranks"]] == [(1, True), (0, False)]
    assert job.status()["state"] == "failed" and job.status()["attempt"] == 1

    logs = job.dir / "logs"
    rank1 = (logs / "attempt-1" / "rank-1.log").read_text()
    assert "rank 1 step 3\n" in rank1 and "ValueError: bad batch on rank 1" in rank1
    assert "[rank" not in rank1.split("Traceback")[0]  # the prefix is taken off
    assert "Connection closed by peer" in (logs / "attempt-1" / "rank-0.log").read_text()
    merged = (logs / "attempt-1.log").read_text()
    assert "[rank1]:rank 1 step 3" in merged  # the merged log keeps every line, prefixed
    # Offline, the merged log is read like the agent reads it: the lines of ranks other than
    # the first failing one (rank 0's gloo "Connection closed by peer") and torchrun's own
    # ChildFailedError traceback are the cascade, so rank 1's traceback decides.
    verdict = classify(merged, exit_code=1)
    assert verdict.label == "code_error", verdict
    assert "train.py:11 in <module>: ValueError: bad batch on rank 1" in verdict.evidence[0]
    ranks = json.loads((logs / "attempt-1" / "ranks.json").read_text())
    assert ranks["launcher"] == "torchrun"
    assert [r["rank"] for r in ranks["ranks"]] == [1, 0]
    # rank 1 raised (exit 1, or SIGABRT in gloo's teardown as above); rank 0 is the cascade:
    # torchrun's SIGTERM, or its own exit 1 from gloo's error when it got there first.
    assert (ranks["ranks"][0]["exit_code"], ranks["ranks"][0]["signal"]) in RAISED, ranks
    assert (ranks["ranks"][1]["exit_code"], ranks["ranks"][1]["signal"]) in CASCADE, ranks


@pytest.mark.slow
@pytest.mark.early  # about 80 s: deepspeed's import, three times
def test_deepspeed_the_failing_rank_and_its_traceback(make_job) -> None:
    """deepspeed 0.19.8 (CPU accelerator, gloo): it prints no rank prefixes of its own; torch's
    ``[rank1]:`` before the traceback still gives rank 1 its log, and its launcher's "exits
    with return code" line names the failing child."""
    deepspeed = Path(sys.executable).with_name("deepspeed")
    if not deepspeed.exists():
        pytest.skip("deepspeed (test extra) not installed")
    job = make_job().write(FAILING_JOB)
    spec = json.loads(Path(job.paths.spec).read_text())
    # Its own port, not the launchers' shared 29500: another test's launcher may hold that one
    # (a clash is a rendezvous failure, distributed.port_in_use, not this test's traceback).
    spec["command"] = [str(deepspeed), "--num_gpus", "2", "--master_port", str(free_port())]
    spec["command"] += ["train.py"]
    _fs.atomic_write_json(job.paths.spec, spec)
    job.start(OMP_NUM_THREADS="1")
    assert job.finish(timeout=240) == 1, job.agent_log()

    detail = job.events("attempt_ended")[0]["detail"]
    assert (detail["label"], detail["retryable"]) == ("code_error", False), detail
    assert detail["evidence"][0].startswith("deepspeed: first failing rank 1, pid "), detail
    assert job.events("attempt_started")[0]["detail"]["launcher"] == "deepspeed"
    rank1 = (job.dir / "logs" / "attempt-1" / "rank-1.log").read_text()
    assert rank1.startswith("Traceback") and "ValueError: bad batch on rank 1" in rank1


RECORDED_JOB = """
    import torch, torch.distributed as dist
    from torch.distributed.elastic.multiprocessing.errors import record

    @record
    def main():
        dist.init_process_group("gloo")
        value = torch.ones(1)
        dist.all_reduce(value)
        if dist.get_rank() == 1:
            raise ValueError("bad batch on rank 1")
        dist.barrier()

    main()
"""


@pytest.mark.slow
def test_torchruns_error_file_is_kept_for_a_script_wrapped_in_record(make_job) -> None:
    """With ``@record`` on the entry point, torchrun copies the first failing rank's error
    into the TORCHELASTIC_ERROR_FILE the agent set for the attempt; ranks.json carries it."""
    job = make_job().write(RECORDED_JOB)
    spec = json.loads(Path(job.paths.spec).read_text())
    spec["command"] = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
    spec["command"] += ["--nproc_per_node=2", "train.py"]
    _fs.atomic_write_json(job.paths.spec, spec)
    job.start(OMP_NUM_THREADS="1")
    assert job.finish(timeout=120) == 1, job.agent_log()

    attempt = job.dir / "logs" / "attempt-1"
    assert (attempt / "launcher-error.json").exists()
    ranks = json.loads((attempt / "ranks.json").read_text())
    assert ranks["error_file"]["message"] == "ValueError: bad batch on rank 1"
    assert 'raise ValueError("bad batch on rank 1")' in ranks["error_file"]["traceback"]
    first = ranks["ranks"][0]
    assert first["rank"] == 1 and (first["exit_code"], first["signal"]) in RAISED, first
    assert first["error_file"].endswith("/attempt_0/1/error.json")
    assert job.events("attempt_ended")[0]["detail"]["label"] == "code_error"
