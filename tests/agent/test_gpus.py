"""GPU assignment on a multi-GPU box (``rgt.agent._gpus``), with real agents and real jobs.

``nvidia-smi`` is a fake on PATH that checks it was asked rgt's query and prints a recorded
answer (``tests/golden/nvidia-smi/query-*.csv``, from real captures: see query-gpus.source);
a busy card is that answer with one card's memory.used raised. Everything else is real: the
agents, the jobs' processes, the lock file, ``kill -9``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from rgt.agent import _gpus
from tests.agent.conftest import Job, process_gone
from tests.clirun import ok, rgt
from tests.sshd import SshServers

SMI = Path(__file__).resolve().parents[1] / "golden" / "nvidia-smi"
A100X8 = SMI / "query-8xa100-sxm4-80gb.csv"
RTX4090X2 = SMI / "query-2xrtx4090.csv"

FAKE_SMI = """#!/bin/sh
if [ "$1" != "--query-gpu=index,uuid,name,memory.used,memory.total" ] || \\
   [ "$2" != "--format=csv,noheader,nounits" ]; then
  echo "fake nvidia-smi: unexpected arguments: $*" >&2; exit 2
fi
cat "$FAKE_NVIDIA_SMI_OUTPUT"
exit "${FAKE_NVIDIA_SMI_RC:-0}"
"""

# Records what it was given, then holds its GPUs until the test writes STOP in the job dir.
HOLD = """
import os, time
out = os.path.join(os.environ["RGT_OUTPUT_DIR"], "cuda.txt")
with open(out + ".tmp", "w") as f:
    f.write("%s|%s" % (os.environ.get("CUDA_VISIBLE_DEVICES", "<unset>"),
                       os.environ.get("CUDA_DEVICE_ORDER", "")))
os.replace(out + ".tmp", out)
stop = os.path.join(os.environ["RGT_JOB_DIR"], "STOP")
deadline = time.time() + 120
while not os.path.exists(stop) and time.time() < deadline:
    time.sleep(0.05)
"""


@pytest.fixture
def box(tmp_path: Path) -> Callable[[Path], dict[str, str]]:
    """The agents' environment on a box whose nvidia-smi answers with ``answer``."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "nvidia-smi").write_text(FAKE_SMI)
    (bin_dir / "nvidia-smi").chmod(0o755)

    def env(answer: Path) -> dict[str, str]:
        return {
            "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
            "FAKE_NVIDIA_SMI_OUTPUT": str(answer),
            "RGT_GPU_LOCK_DIR": str(tmp_path / "locks"),
        }

    return env


def busy(tmp_path: Path, answer: Path, index: int, used_mib: int) -> Path:
    """``answer`` with GPU ``index`` showing ``used_mib`` in use by someone else."""
    lines = answer.read_text().splitlines()
    cells = lines[index].split(", ")
    cells[3] = str(used_mib)
    lines[index] = ", ".join(cells)
    path = tmp_path / f"busy-{index}.csv"
    path.write_text("\n".join(lines) + "\n")
    return path


def started(make_job: Callable[..., Job], job_id: str, gpus: str, env: dict[str, str]) -> Job:
    """A job in its own durable root (each writes its snapshot), on the one box: the GPU lock
    is the machine's (``RGT_GPU_LOCK_DIR``), not a durable root's."""
    durable = Path(env["RGT_GPU_LOCK_DIR"]).parent / "durable" / job_id
    job = make_job(job_id, durable=durable).write(HOLD, gpus=gpus)
    job.start(**env)
    return job


def cuda_of(job: Job) -> str:
    return job.wait_file("outputs/cuda.txt").read_text()


def refused(job: Job) -> str:
    status = job.wait_for(lambda s: s.get("state") == "failed")
    assert status.get("attempt") in (0, None, 1) and not (job.dir / "outputs" / "cuda.txt").exists()
    return str(status["reason"])


def stop(job: Job) -> None:
    (job.dir / "STOP").write_text("")
    job.wait_for(lambda s: s.get("state") == "succeeded")


def test_recorded_outputs_parse() -> None:
    a100 = _gpus.parse_smi(A100X8.read_text())
    assert [g.index for g in a100] == list(range(8))
    assert {(g.name, g.used_mib, g.total_mib) for g in a100} == {
        ("NVIDIA A100-SXM4-80GB", 1.0, 81920.0)
    }
    rtx = _gpus.parse_smi(RTX4090X2.read_text())
    assert [(g.name, g.uuid[:4]) for g in rtx] == [("NVIDIA GeForce RTX 4090", "GPU-")] * 2
    assert _gpus.parse_smi("0, GPU-x, NVIDIA H100, [N/A], 81559")[0].used_mib == float("inf")


@pytest.mark.slow
def test_two_jobs_on_one_box_never_share_a_gpu_and_a_third_is_told_who_holds_them(
    make_job: Callable[..., Job], box: Callable[[Path], dict[str, str]]
) -> None:
    env = box(A100X8)
    first = started(make_job, "job-a", "4", env)
    assert cuda_of(first) == "0,1,2,3|PCI_BUS_ID"
    second = started(make_job, "job-b", "A100:4", env)
    assert cuda_of(second) == "4,5,6,7|PCI_BUS_ID"
    third = started(make_job, "job-c", "1", env)
    reason = refused(third)
    assert "--gpus 1: 0 of this machine's 8 GPU(s) free" in reason
    assert "job job-a holds GPU 0,1,2,3" in reason and "job job-b holds GPU 4,5,6,7" in reason
    stop(first)  # its GPUs are released when it ends
    fourth = started(make_job, "job-d", "2", env)
    assert cuda_of(fourth) == "0,1|PCI_BUS_ID"
    stop(second)
    stop(fourth)


@pytest.mark.slow
def test_a_gpu_busy_with_someone_elses_process_is_skipped(
    make_job: Callable[..., Job], box: Callable[[Path], dict[str, str]], tmp_path: Path
) -> None:
    env = box(busy(tmp_path, RTX4090X2, 0, 18342))
    one = started(make_job, "job-a", "4090:1", env)
    assert cuda_of(one) == "1|PCI_BUS_ID"
    stop(one)
    reason = refused(started(make_job, "job-b", "2", env))
    assert "GPU 0 (NVIDIA GeForce RTX 4090): 18342 of 24564 MiB used by a process rgt did " in (
        reason
    )


@pytest.mark.slow
def test_a_type_the_box_lacks_is_refused_naming_what_it_has(
    make_job: Callable[..., Job], box: Callable[[Path], dict[str, str]]
) -> None:
    reason = refused(started(make_job, "job-a", "A100:1", box(RTX4090X2)))
    assert "0 of this machine's 0 A100 GPU(s) free (it has: NVIDIA GeForce RTX 4090)" in reason


@pytest.mark.slow
def test_gpus_zero_hides_every_gpu(
    make_job: Callable[..., Job], box: Callable[[Path], dict[str, str]]
) -> None:
    job = started(make_job, "job-a", "0", box(A100X8))
    assert cuda_of(job) == "|"  # CUDA_VISIBLE_DEVICES set and empty: no GPU at all
    stop(job)


@pytest.mark.slow
def test_a_kill9_agent_holds_while_its_job_runs_and_is_reclaimed_after(
    make_job: Callable[..., Job], box: Callable[[Path], dict[str, str]]
) -> None:
    env = box(RTX4090X2)
    first = started(make_job, "job-a", "2", env)
    assert cuda_of(first) == "0,1|PCI_BUS_ID"
    trainer = first.trainer_pid()
    os.killpg(first.agents[-1].pid, signal.SIGKILL)  # the agent, not the job (own session)
    first.agents[-1].wait()
    assert not process_gone(trainer)
    assert "job job-a holds GPU 0,1" in refused(started(make_job, "job-b", "1", env))
    os.killpg(trainer, signal.SIGKILL)  # now nothing of job-a runs: its lock is stale
    while not process_gone(trainer):
        time.sleep(0.02)
    third = started(make_job, "job-c", "2", env)
    assert cuda_of(third) == "0,1|PCI_BUS_ID"
    stop(third)


def test_a_holder_from_another_boot_or_a_reused_pid_is_stale() -> None:
    boot = "b1"
    me = os.getpid()
    live = {"boot_id": boot, "agent": {"pid": me, "start": _gpus.process_start(me)}}
    assert not _gpus.stale(live, boot)
    assert _gpus.stale(live, "b2")  # the machine rebooted
    reused = {"boot_id": boot, "agent": {"pid": me, "start": "1"}, "job": {"pgid": me}}
    assert _gpus.stale(reused, boot)  # same pid, another process


@pytest.mark.slow
def test_rgt_run_gpus_reaches_the_agent_through_the_spec(
    box: Callable[[Path], dict[str, str]], tmp_path: Path
) -> None:
    """`rgt run box --gpus N` on a local machine: the CLI writes the count into spec.json,
    the agent there assigns the GPUs; two runs get disjoint cards."""
    env = box(A100X8)
    ok(rgt("up", "local", "--name", "box", "--root", str(tmp_path / "root"), "--json"))
    (tmp_path / "hold.py").write_text(HOLD)
    seen = []
    for gpus in ("4", "A100:4"):
        argv = ("run", "box", "--gpus", gpus, "--probe-seconds", "1", "--json")
        doc = ok(rgt(*argv, "--", "python3", "hold.py", cwd=tmp_path, env=env))
        job_dir = tmp_path / "root" / ".rgt" / "jobs" / str(doc["job_id"])
        assert json.loads((job_dir / "spec.json").read_text())["gpus"] == gpus
        out = job_dir / "outputs" / "cuda.txt"
        deadline = time.monotonic() + 30
        while not out.exists():
            assert time.monotonic() < deadline, "the job never wrote what it was given"
            time.sleep(0.05)
        seen.append((out.read_text(), job_dir))
    assert [text for text, _ in seen] == ["0,1,2,3|PCI_BUS_ID", "4,5,6,7|PCI_BUS_ID"]
    argv = ("run", "box", "--gpus", "1", "--probe-seconds", "5", "--json")
    third = rgt(*argv, "--", "python3", "hold.py", cwd=tmp_path, env=env)
    doc = json.loads(third.stdout)
    assert third.returncode == 1 and doc["state"] == "failed"
    assert "0 of this machine's 8 GPU(s) free (job box-" in doc["reason"]  # said by `rgt run`
    for _, job_dir in seen:
        (job_dir / "STOP").write_text("")


@pytest.mark.slow
def test_rgt_run_gpus_on_an_ssh_box(
    sshd_factory: SshServers, box: Callable[[Path], dict[str, str]], tmp_path: Path
) -> None:
    """The same over a real sshd whose sessions see the fake nvidia-smi (sshd's SetEnv): the
    agent that the ssh backend starts assigns the GPUs; `--gpus 0` hides them all."""
    env = box(RTX4090X2)
    server = sshd_factory()
    server.stop()
    setenv = " ".join(f"{k}={v}" for k, v in env.items())
    server.config.write_text(
        server.config.read_text().replace("SetEnv SHLVL=1", f"SetEnv SHLVL=1 {setenv}")
    )
    server.start()
    root = tmp_path / "remote"
    up = ("up", "generic-ssh", "--name", "rented", "--ssh", server.ssh_line, "--json")
    ok(rgt(*up, "--root", str(root)))
    (tmp_path / "hold.py").write_text(HOLD)
    given = []
    for gpus in ("4090:1", "0", "1"):
        argv = ("run", "rented", "--gpus", gpus, "--probe-seconds", "1", "--json")
        doc = ok(rgt(*argv, "--", "python3", "hold.py", cwd=tmp_path, timeout=180))
        job_dir = root / ".rgt" / "jobs" / str(doc["job_id"])
        out = job_dir / "outputs" / "cuda.txt"
        deadline = time.monotonic() + 60
        while not out.exists():
            assert time.monotonic() < deadline, "the job never wrote what it was given"
            time.sleep(0.05)
        given.append(out.read_text())
    assert given == ["0|PCI_BUS_ID", "|", "1|PCI_BUS_ID"]
    for job_dir in (root / ".rgt" / "jobs").iterdir():
        (job_dir / "STOP").write_text("")


@pytest.mark.slow
def test_a_lock_that_cannot_be_written_is_a_refusal_not_a_crash(
    make_job: Callable[..., Job], box: Callable[[Path], dict[str, str]], tmp_path: Path
) -> None:
    env = box(A100X8)
    (tmp_path / "not-a-dir").write_text("")
    env["RGT_GPU_LOCK_DIR"] = str(tmp_path / "not-a-dir")
    job = make_job("job-a", durable=tmp_path / "d").write(HOLD, gpus="1")
    job.start(**env)
    reason = refused(job)
    assert "--gpus 1: cannot write the GPU lock in" in reason
    assert job.finish() == 1  # the agent ended the job as failed; it did not crash


@pytest.mark.slow
def test_rgt_run_refuses_gpus_the_box_does_not_have_before_anything_starts(
    box: Callable[[Path], dict[str, str]], tmp_path: Path
) -> None:
    ok(rgt("up", "local", "--name", "box", "--root", str(tmp_path / "root"), "--json"))
    (tmp_path / "hold.py").write_text(HOLD)
    # nvidia-smi's exit codes: 9 the driver is not loaded, 6 no device (recorded messages).
    no_driver = {**box(SMI / "no-driver.txt"), "FAKE_NVIDIA_SMI_RC": "9"}
    no_device = {**box(SMI / "no-devices.txt"), "FAKE_NVIDIA_SMI_RC": "6"}
    cases = [
        (no_driver, "1", "--gpus 1: nvidia-smi lists no GPU on box", "drop --gpus"),
        (no_device, "2", "--gpus 2: nvidia-smi lists no GPU on box", "check the driver"),
        (box(RTX4090X2), "4", "--gpus 4: box has 2 such GPU(s)", "ask for at most 2"),
        (
            box(RTX4090X2),
            "A100:1",
            "--gpus A100:1: box has 0 such GPU(s) (2 in all: NVIDIA GeForce RTX 4090)",
            "e.g. --gpus 4090:1",
        ),
    ]
    for env, gpus, message, fix in cases:
        argv = ("run", "box", "--gpus", gpus, "--json", "--", "python3", "hold.py")
        proc = rgt(*argv, cwd=tmp_path, env=env)
        assert proc.returncode == 2, proc.stderr
        error = json.loads(proc.stdout)
        assert message in error["message"] and fix in error["fix"]
    assert ok(rgt("status", "--json"))["jobs"] == []


def test_a_zombie_agent_holds_nothing() -> None:
    """A kill -9'd agent nobody reaps (PID 1 of a container that never waits) is no holder."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    start = _gpus.process_start(child.pid)
    holder = {"boot_id": "b", "agent": {"pid": child.pid, "start": start}, "job": {}}
    assert start is not None and not _gpus.stale(holder, "b")
    os.kill(child.pid, signal.SIGKILL)
    while _gpus.process_start(child.pid) is not None:  # a zombie until we wait for it
        time.sleep(0.01)
    assert os.path.exists(f"/proc/{child.pid}") and _gpus.stale(holder, "b")
    child.wait()
