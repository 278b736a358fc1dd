"""The agent end to end: success, DONE after verification, surviving the CLI, resume."""

from __future__ import annotations

import hashlib
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.agent.conftest import process_gone

# Writes what the job saw, one checkpoint, one declared artifact, an in-flight temp file and a
# symlink; then exits 0.
SUCCESS_JOB = """
    import json, os
    out, ckpt = os.environ["RGT_OUTPUT_DIR"], os.environ["RGT_CKPT_DIR"]
    seen = {k: v for k, v in os.environ.items() if k.startswith("RGT_") or k in ("PYTHONUNBUFFERED", "LR")}
    seen["cwd"] = os.getcwd()
    json.dump(seen, open(os.path.join(out, "env.json"), "w"))
    open(os.path.join(ckpt, "step-10.pt"), "wb").write(os.urandom(4096))
    open(os.path.join(ckpt, ".tmp-step-20.pt.part"), "wb").write(b"half")
    os.symlink("step-10.pt", os.path.join(ckpt, "latest"))
    os.makedirs("results", exist_ok=True)  # relative: lands in the job's own work/
    open(os.path.join("results", "metrics.json"), "w").write('{"psnr": 31.2}')
    print("training done")
"""  # noqa: E501


def test_success_writes_verified_manifest_then_done(make_job, hostile_dir: Path) -> None:
    job = make_job(durable=hostile_dir).write(
        SUCCESS_JOB, env={"LR": "0.1"}, artifacts=("results/*.json",)
    )
    job.start()
    assert job.finish() == 0, job.agent_log()

    status = job.status()
    assert status["state"] == "succeeded" and status["attempt"] == 1 and status["exit_code"] == 0
    manifest_bytes = Path(job.paths.manifest).read_bytes()
    assert Path(job.paths.done).read_text().strip() == hashlib.sha256(manifest_bytes).hexdigest()
    manifest = json.loads(manifest_bytes)
    paths = [entry["path"] for entry in manifest["files"]]
    assert paths == ["ckpt/step-10.pt", "outputs/env.json", "work/results/metrics.json"]
    for entry in manifest["files"]:
        data = (job.dir / entry["path"]).read_bytes()
        assert entry["sha256"] == hashlib.sha256(data).hexdigest() and entry["bytes"] == len(data)
    assert manifest["totals"] == {"files": 3, "bytes": sum(e["bytes"] for e in manifest["files"])}
    assert manifest["skipped"][0]["path"] == "ckpt/latest"
    assert "not followed" in manifest["skipped"][0]["reason"]

    seen = json.loads((job.dir / "outputs" / "env.json").read_text())
    assert seen["RGT_JOB_ID"] == "job-1" and seen["RGT_ATTEMPT"] == "1" and seen["LR"] == "0.1"
    assert seen["RGT_CKPT_DIR"] == str(job.dir / "ckpt") and seen["RGT_SMOKE"] == "0"
    assert seen["RGT_OUTPUT_DIR"] == str(job.dir / "outputs") and seen["PYTHONUNBUFFERED"] == "1"
    assert seen["cwd"] == job.paths.work == seen["RGT_WORK_DIR"]
    assert "training done" in Path(job.paths.log(1)).read_text()
    kinds = [e["kind"] for e in job.events()]
    assert kinds == [
        "agent_started",
        "workdir_ready",
        "attempt_started",
        "attempt_ended",
        "manifest_written",
        "succeeded",
    ]


def test_artifact_changed_after_hashing_fails_verification_and_writes_no_done(make_job) -> None:
    job = make_job().write(SUCCESS_JOB)
    hook = job.dir.parent / "mutate.py"
    hook.write_text(
        "import os\n"
        "p = os.path.join(os.environ['RGT_JOB_DIR'], 'ckpt', 'step-10.pt')\n"
        "open(p, 'ab').write(b'bit rot')\n"
    )
    job.start(RGT_AGENT_TESTING="1", RGT_AGENT_TEST_HOOK_AFTER_HASH=f"{sys.executable} {hook}")
    assert job.finish() == 1

    status = job.status()
    assert status["state"] == "failed"
    assert "ckpt/step-10.pt" in status["reason"] and "verification failed" in status["reason"]
    assert not Path(job.paths.done).exists()
    assert not Path(job.paths.manifest).exists()
    assert job.events("failed") and not job.events("succeeded")


def test_test_hook_is_ignored_without_the_testing_switch(make_job) -> None:
    job = make_job().write(SUCCESS_JOB)
    marker = job.dir.parent / "hook-ran"
    job.start(RGT_AGENT_TEST_HOOK_AFTER_HASH=f"touch {marker}")
    assert job.finish() == 0
    assert not marker.exists() and Path(job.paths.done).exists()


def test_declared_artifact_missing_is_not_a_success(make_job) -> None:
    job = make_job().write("print('forgot to save')\n", artifacts=("model/*.safetensors",))
    job.start()
    assert job.finish() == 1
    status = job.status()
    assert status["state"] == "failed" and "model/*.safetensors" in status["reason"]
    assert not Path(job.paths.done).exists()


# Runs until the test drops a `go` file into the job directory (no timing guesses).
SLOW_JOB = """
    import os, sys, time
    out, job_dir = os.environ["RGT_OUTPUT_DIR"], os.environ["RGT_JOB_DIR"]
    open(os.path.join(out, "started-%s" % os.environ["RGT_ATTEMPT"]), "w").close()
    deadline = time.time() + 120
    while not os.path.exists(os.path.join(job_dir, "go")) and time.time() < deadline:
        time.sleep(0.05)
    open(os.path.join(out, "finished"), "w").write("ok")
"""


def release(job) -> None:
    (job.dir / "go").touch()


def test_job_survives_death_of_the_cli_that_started_it(make_job, tmp_path: Path) -> None:
    job = make_job().write(SLOW_JOB)
    # The CLI side: a process that launches the agent in its own session, then dies hard
    # (laptop closed, ssh dropped) while the job is still running.
    cli = tmp_path / "fake_cli.py"
    cli.write_text(
        "import subprocess, sys, time\n"
        "subprocess.Popen([sys.executable, sys.argv[1], 'run', sys.argv[2]],\n"
        "                 start_new_session=True, stdin=subprocess.DEVNULL,\n"
        "                 stdout=subprocess.PIPE, stderr=subprocess.PIPE)\n"
        "time.sleep(600)\n"
    )
    parent = subprocess.Popen([sys.executable, str(cli), str(job.pyz), str(job.dir)], env=job.env())
    try:
        job.wait_file("outputs/started-1")
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        release(job)
        status = job.wait_for(lambda s: s["state"] in ("succeeded", "failed", "cancelled"))
    finally:
        job.agents.clear()
    assert status["state"] == "succeeded", job.agent_log()
    assert status["attempt"] == 1
    assert (job.dir / "outputs" / "finished").read_text() == "ok"
    assert Path(job.paths.done).exists()
    deadline = time.monotonic() + 30
    while not process_gone(status["agent_pid"]):  # the agent exits once the job is settled
        assert time.monotonic() < deadline
        time.sleep(0.05)


def test_second_agent_on_the_same_job_refuses(make_job) -> None:
    job = make_job().write(SLOW_JOB)
    first = job.start()
    job.wait_file("outputs/started-1")
    second = job.start()
    assert second.wait(timeout=30) == 0
    assert b"already running" in second.stderr.read()
    release(job)
    assert first.wait(timeout=60) == 0
    assert len(job.events("agent_started")) == 1
    assert len(job.events("attempt_started")) == 1


def test_status_reports_liveness(make_job) -> None:
    job = make_job().write(SLOW_JOB)
    job.dir.mkdir(parents=True, exist_ok=True)
    before = json.loads(job.agent_cmd("status").stdout)
    # The job directory exists (its spec is there); no agent has written status.json yet.
    assert before["exists"] is True and before["status_file"] == "missing"
    assert before["state"] == "queued"
    assert before["agent_alive"] is False
    job.start()
    job.wait_file("outputs/started-1")
    running = json.loads(job.agent_cmd("status").stdout)
    assert running["state"] == "running" and running["agent_alive"] is True
    assert running["boot_id_now"] == running["boot_id"]
    job.wait_for(lambda s: s["heartbeat"] != running["heartbeat"])  # the heart beats
    release(job)
    job.finish()
    after = json.loads(job.agent_cmd("status").stdout)
    assert after["state"] == "succeeded" and after["agent_alive"] is False and after["done"]


SECRET = "tok-Ü-42-$(whoami)-s3cr3t"
SECRET_JOB = """
    import hashlib, os
    token = os.environ["HF_TOKEN"]
    digest = hashlib.sha256(token.encode()).hexdigest()
    open(os.path.join(os.environ["RGT_OUTPUT_DIR"], "token.sha256"), "w").write(digest)
"""


def test_secrets_from_stdin_reach_the_job_and_never_touch_the_disk(make_job) -> None:
    job = make_job().write(SECRET_JOB, secret_env=("HF_TOKEN",))
    job.start(secrets={"HF_TOKEN": SECRET})
    assert job.finish() == 0, job.agent_log()
    digest = (job.dir / "outputs" / "token.sha256").read_text()
    assert digest == hashlib.sha256(SECRET.encode()).hexdigest()
    needle = SECRET.encode()
    for path in job.dir.parent.parent.rglob("*"):
        if path.is_file() and not path.is_symlink():
            assert needle not in path.read_bytes(), path


def test_secret_missing_on_a_restart_is_reported(make_job) -> None:
    job = make_job().write(
        SECRET_JOB.replace('["HF_TOKEN"]', '.get("HF_TOKEN", "")'), secret_env=("HF_TOKEN",)
    )
    job.start()
    assert job.finish() == 0
    assert job.events("attempt_started")[0]["detail"]["missing_secrets"] == ["HF_TOKEN"]
