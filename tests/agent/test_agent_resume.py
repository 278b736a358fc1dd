"""A restart runs the script's resume form (--resume-with) from the newest complete checkpoint
(--ckpt), or says as a warning that it restarts from zero."""

from __future__ import annotations

import os
import signal
from pathlib import Path

# A script with its own resume flag, as most public training scripts have: it writes
# out/ckpt.txt (relative to its working directory) and loads it only when told to.
OWN_FLAG = """
    import os, sys, time
    resume = "--resume" in sys.argv
    step = int(open("out/ckpt.txt").read()) if resume else 0
    print("argv", sys.argv[1:], "RGT_RESUME_FROM", os.environ.get("RGT_RESUME_FROM"), flush=True)
    print("starting at step %d" % step, flush=True)
    os.makedirs("out", exist_ok=True)
    if not resume:
        open("out/ckpt.txt.tmp-x", "w").write("99")   # a save in flight never counts
        open("out/empty.txt", "w").close()
        open("out/ckpt.txt", "w").write("7")
        open(os.path.join(os.environ["RGT_OUTPUT_DIR"], "ready"), "w").write("1")
        time.sleep(600)
"""

# Saves nothing until the end, so a kill mid-run loses everything.
SAVES_AT_END = """
    import os, sys, time
    print("starting at step 0", flush=True)
    if os.environ["RGT_ATTEMPT"] == "1":
        open(os.path.join(os.environ["RGT_OUTPUT_DIR"], "ready"), "w").write("1")
        time.sleep(600)
"""


def kill_trainer(job) -> None:
    job.wait_file("outputs/ready")
    os.kill(job.trainer_pid(), signal.SIGKILL)
    assert job.finish() == 0, job.agent_log()


def test_args_form_appended_from_the_newest_checkpoint(make_job) -> None:
    job = make_job().write(OWN_FLAG, resume={"with": "--resume", "ckpt": "out/ckpt*"})
    job.start()
    kill_trainer(job)

    resuming = job.events("resuming")
    assert [e["attempt"] for e in resuming] == [2] and not job.events("restart_from_zero")
    detail = resuming[0]["detail"]
    ckpt = str(Path(job.paths.work).resolve() / "out" / "ckpt.txt")
    assert Path(detail["ckpt"]).resolve() == Path(ckpt) and detail["form"] == "resume_with"
    assert detail["command"][-1] == "--resume" and detail["found_in"] == "work"
    second = Path(job.paths.log(2)).read_text()
    assert "argv ['--resume']" in second and "starting at step 7" in second
    assert "RGT_RESUME_FROM " + detail["ckpt"] in second
    retrying = job.events("retrying")[0]
    assert "resume form from" in retrying["next"] and detail["ckpt"] in retrying["next"]


def test_whole_command_form_gets_the_path(make_job) -> None:
    form = "python3 -c 'import sys; print(\"resumed from\", sys.argv[1])' {ckpt}"
    job = make_job().write(OWN_FLAG, resume={"with": form, "ckpt": "out/ckpt.txt"})
    job.start()
    kill_trainer(job)
    path = job.events("resuming")[0]["detail"]["ckpt"]
    assert "resumed from " + path in Path(job.paths.log(2)).read_text()


def test_no_checkpoint_is_a_warning_naming_the_glob(make_job) -> None:
    job = make_job().write(SAVES_AT_END, resume={"with": "--resume", "ckpt": "out/*.pt"})
    job.start()
    kill_trainer(job)

    [event] = job.events("restart_from_zero")
    assert event["severity"] == "warning" and event["attempt"] == 2
    assert event["next"].startswith("restarting from zero: no checkpoint found")
    assert "out/*.pt" in event["next"] and event["detail"]["glob"] == "out/*.pt"
    assert not job.events("resuming")
    assert "--resume" not in Path(job.paths.log(2)).read_text()
    assert "from zero" in job.events("retrying")[0]["next"]


def test_without_any_resume_flag_an_empty_ckpt_dir_is_a_restart_from_zero(make_job) -> None:
    job = make_job().write(SAVES_AT_END)
    job.start()
    kill_trainer(job)
    [event] = job.events("restart_from_zero")
    assert event["severity"] == "warning" and "no --ckpt given" in event["next"]


def test_files_that_came_with_the_code_never_trigger_a_resume(make_job) -> None:
    job = make_job().write(SAVES_AT_END, resume={"with": "--resume", "ckpt": "stale.pt"})
    stale = Path(job.paths.code) / "stale.pt"
    stale.write_bytes(b"old weights")
    os.utime(stale, (1_000_000_000, 1_000_000_000))  # shipped long before the job started
    job.start()
    kill_trainer(job)
    [event] = job.events("restart_from_zero")
    assert any("older than the job" in s for s in event["detail"]["skipped"])


def test_a_checkpoint_in_the_ckpt_dir_resumes_the_same_command(make_job) -> None:
    script = """
        import os, time
        ckpt = os.path.join(os.environ["RGT_CKPT_DIR"], "state.bin")
        if not os.path.exists(ckpt):
            open(ckpt, "w").write("3")
            open(os.path.join(os.environ["RGT_OUTPUT_DIR"], "ready"), "w").write("1")
            time.sleep(600)
        print("RGT_RESUME_FROM", os.environ.get("RGT_RESUME_FROM"), flush=True)
    """
    job = make_job().write(script)
    job.start()
    kill_trainer(job)
    detail = job.events("resuming")[0]["detail"]
    assert detail["form"] == "same_command" and detail["found_in"] == "ckpt_dir"
    assert detail["ckpt"] in Path(job.paths.log(2)).read_text()


def test_an_agent_started_again_after_it_died_runs_the_resume_form(make_job) -> None:
    job = make_job().write(OWN_FLAG, resume={"with": "--resume", "ckpt": "out/ckpt.txt"})
    agent = job.start()
    job.wait_file("outputs/ready")
    trainer = job.trainer_pid()
    os.killpg(agent.pid, signal.SIGKILL)  # the agent dies; `rgt resume` starts a new one
    os.killpg(trainer, signal.SIGKILL)
    agent.wait()

    job.start()
    assert job.finish() == 0, job.agent_log()
    [resuming] = job.events("resuming")
    assert resuming["attempt"] == 2 and resuming["detail"]["ckpt"].endswith("out/ckpt.txt")
    assert "starting at step 7" in Path(job.paths.log(2)).read_text()
    assert "resume form" in job.events("retrying")[0]["next"]
