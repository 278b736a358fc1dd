"""Each job runs in its own work/ populated from the shared snapshot: whatever the job writes
there is its own (an artifact when new or changed) and never reaches the snapshot."""

from __future__ import annotations

import hashlib
import json
import os
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rgt import _fs
from rgt.agent import _workdir
from rgt.models import JobSpec, RetryPolicy
from rgt.transport.snapshot import materialize, take_snapshot
from tests.agent.conftest import Job

BIG = 2 * 1024 * 1024  # above the copy threshold: shared by hard link, as code is
PROJECT = {
    "notes.txt": b"line 1\n",
    "conf/a.yaml": b"lr: 1\n",
    "conf/b.yaml": b"lr: 2\n",
    "conf/c.json": b"{}",
    "data/readme.md": b"# data\n",
    "data/big.bin": b"B" * BIG,
    "data/big2.bin": b"C" * BIG,
}

# Writes everywhere a script can, the way scripts do (relative to its cwd).
WRITES_EVERYWHERE = """
    import os
    open("new_top.txt", "w").write("new")
    os.makedirs("sub/deeper")
    open("sub/deeper/n.txt", "w").write("n")
    open("conf/a.yaml", "w").write("lr: 9\\n")          # overwrite a small file
    open("notes.txt", "a").write("line 2\\n")           # append to one
    os.remove("conf/b.yaml")                            # delete
    os.rename("data/readme.md", "data/renamed.md")      # rename
    os.chmod("conf/c.json", 0o600)                      # chmod (same content)
    os.mkdir("empty")
    # a large (hard-linked) file is replaced the safe way: new file, then rename
    head = open("data/big.bin", "rb").read()[:10]
    open("data/big.bin.new", "wb").write(head)
    os.replace("data/big.bin.new", "data/big.bin")
    os.makedirs("out-shakespeare-char")
    open("out-shakespeare-char/ckpt.pt", "wb").write(os.urandom(1000))
"""


def tree_state(root: Path) -> list[tuple[str, int, str]]:
    """Every file and directory of ``root`` with its mode and content hash."""
    state = []
    for path in sorted(root.rglob("*")):
        st = path.lstat()
        digest = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "dir"
        state.append((str(path.relative_to(root)), st.st_mode, digest))
    return state


def launchable(job: Job, tmp_path: Path, script: str, **spec: Any) -> Path:
    """Lay out the job as `rgt run` does: a read-only snapshot of a project, linked as code/."""
    project = tmp_path / "project"
    if not project.exists():
        for rel, data in {**PROJECT, "run.sh": b"#!/bin/sh\n"}.items():
            (project / rel).parent.mkdir(parents=True, exist_ok=True)
            (project / rel).write_bytes(data)
        (project / "run.sh").chmod(0o755)
    (project / "train.py").write_text(textwrap.dedent(script))
    snapshot = take_snapshot(project)
    dest = Path(job.root_paths.snapshot(snapshot.digest))
    if not dest.exists():
        materialize(snapshot, dest)
    job.dir.mkdir(parents=True)
    os.symlink(f"../../code/{snapshot.digest}", job.paths.code)
    spec.setdefault("retry", RetryPolicy(max_retries=2, backoff_s=0.05))
    job_spec = JobSpec(job.paths.job_id, "local", (sys.executable, "train.py"), **spec)
    _fs.atomic_write_json(job.paths.spec, job_spec.to_json())
    return dest


def manifest_paths(job: Job) -> list[str]:
    return [e["path"] for e in json.loads(Path(job.paths.manifest).read_text())["files"]]


def test_snapshot_unchanged_after_a_job_that_writes_everywhere(
    make_job: Callable[..., Job], tmp_path: Path
) -> None:
    job = make_job("writer")
    snapshot = launchable(job, tmp_path, WRITES_EVERYWHERE)
    before = tree_state(snapshot)
    job.start()
    assert job.finish() == 0, job.agent_log()
    assert tree_state(snapshot) == before
    assert manifest_paths(job) == [
        "work/conf/a.yaml",
        "work/data/big.bin",
        "work/data/renamed.md",
        "work/new_top.txt",
        "work/notes.txt",
        "work/out-shakespeare-char/ckpt.pt",
        "work/sub/deeper/n.txt",
    ]
    ready = job.events("workdir_ready")[0]["detail"]
    assert (ready["linked"], ready["copied"] + ready["reflinked"]) == (5, 4)
    assert not job.events("snapshot_modified")
    assert (job.dir / "work/notes.txt").read_text() == "line 1\nline 2\n"


def test_two_jobs_on_one_snapshot_do_not_see_each_others_files(
    make_job: Callable[..., Job], tmp_path: Path
) -> None:
    script = """
        import os
        seen = sorted(os.listdir("out")) if os.path.isdir("out") else []
        os.makedirs("out", exist_ok=True)
        open("out/ckpt.pt", "w").write(os.environ["RGT_JOB_ID"] + " saw " + repr(seen))
    """
    first, second = make_job("job-a"), make_job("job-b")
    snapshot = launchable(first, tmp_path, script)
    assert launchable(second, tmp_path, script) == snapshot
    for job in (first, second):
        job.start()
        assert job.finish() == 0, job.agent_log()
    for job in (first, second):
        assert (job.dir / "work/out/ckpt.pt").read_text() == f"{job.paths.job_id} saw []"
        assert manifest_paths(job) == ["work/out/ckpt.pt"]
    assert not (snapshot / "out").exists()


def test_a_retry_sees_what_the_previous_attempt_wrote(
    make_job: Callable[..., Job], tmp_path: Path
) -> None:
    script = """
        import os, signal
        if not os.path.exists("progress.txt"):
            open("progress.txt", "w").write("step 7")
            os.kill(os.getpid(), signal.SIGKILL)  # looks like a preemption from outside
        open("resumed.txt", "w").write(open("progress.txt").read())
    """
    job = make_job()
    launchable(job, tmp_path, script)
    job.start()
    assert job.finish() == 0, job.agent_log()
    assert job.status()["attempt"] == 2
    assert (job.dir / "work/resumed.txt").read_text() == "step 7"
    assert len(job.events("workdir_ready")) == 1


def test_root_writing_a_hard_linked_file_in_place_is_caught(
    make_job: Callable[..., Job], tmp_path: Path
) -> None:
    """Permission bits do not stop root: the write reaches the shared inode. The agent says
    so (error event naming the file), and no later job starts from the damaged snapshot."""
    script = 'open("data/big2.bin", "ab").write(b"root was here")\n'
    job = make_job("damager")
    snapshot = launchable(job, tmp_path, script)
    job.start()
    assert job.finish() == 0, job.agent_log()
    (event,) = job.events("snapshot_modified")
    assert event["severity"] == "error" and event["detail"]["path"] == "data/big2.bin"
    assert "uploads the snapshot again" in event["next"]
    marker = json.loads(Path(str(snapshot) + ".damaged").read_text())
    assert marker == {"job_id": "damager", "files": ["data/big2.bin"]}
    assert "work/data/big2.bin" in manifest_paths(job)  # what the job wrote is its artifact

    later = make_job("later")
    launchable(later, tmp_path, script)
    later.start()
    assert later.finish() == 1
    status = later.status()
    assert status["state"] == "failed" and "changed by an earlier job" in status["reason"]
    assert later.events("workdir_failed")[0]["severity"] == "error"


def test_no_space_for_work_dir_fails_as_disk_full_and_leaves_the_snapshot(
    make_job: Callable[..., Job], tmp_path: Path, small_tmpfs: Callable[[str, int], Path]
) -> None:
    durable = small_tmpfs("1m", 4096)
    job = make_job(durable=durable)
    project = tmp_path / "project"
    for n in range(12):  # 12 x 60 KiB: fits once, not twice
        (project / "conf").mkdir(parents=True, exist_ok=True)
        (project / "conf" / f"c{n}.json").write_bytes(b"{}" + b" " * (60 * 1024))
    snapshot = launchable(job, tmp_path, "print('never runs')\n")
    before = tree_state(snapshot)
    job.start()
    assert job.finish() == 1, job.agent_log()
    status = job.status()
    assert status["state"] == "failed" and status["label"] == "disk_full", status
    assert "working directory" in status["reason"]
    assert tree_state(snapshot) == before
    assert not (job.dir / "work").exists() and not (job.dir / "work.partial").exists()


def test_ensure_is_once_per_job(tmp_path: Path) -> None:
    from rgt.agent.paths import JobPaths

    paths = JobPaths(str(tmp_path / "job"), "j")
    Path(paths.root).mkdir()
    assert isinstance(_workdir.ensure(paths), dict)  # no snapshot: an empty work/
    Path(paths.work, "kept.txt").write_text("x")
    assert _workdir.ensure(paths) is None
    assert Path(paths.work, "kept.txt").read_text() == "x"


def test_a_missing_snapshot_is_an_error_not_an_empty_work_dir(tmp_path: Path) -> None:
    from rgt.agent.paths import JobPaths

    paths = JobPaths(str(tmp_path / "job"), "j")
    Path(paths.root).mkdir()
    os.symlink("../code/gone", paths.code)
    failure = _workdir.ensure(paths)
    assert isinstance(failure, _workdir.WorkDirFailure) and "missing" in failure.cause
    assert not Path(paths.work).exists()
