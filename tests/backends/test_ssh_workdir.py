"""Per-job working directories over a real sshd: a script that writes relative outputs gets
them listed as artifacts, two jobs on one snapshot do not see each other's files, the snapshot
stays unchanged, and a snapshot damaged by a root job is uploaded again by the next push."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from rgt.backends import get_backend
from rgt.backends.ssh import SshBackend
from rgt.models import TERMINAL, JobSpec, JobState
from rgt.state.store import utcnow
from rgt.transport.snapshot import take_snapshot
from tests.backends.conformance import status_doc
from tests.sshd import SshServer, register, wait_for

# nanoGPT-style: the output dir is relative to the cwd.
TRAIN = """
import os, sys
seen = sorted(os.listdir("out-char")) if os.path.isdir("out-char") else []
os.makedirs("out-char", exist_ok=True)
open("out-char/ckpt.pt", "w").write(os.environ["RGT_JOB_ID"] + " saw " + repr(seen))
if len(sys.argv) > 1:
    open("weights.bin", "ab").write(b"in place, as root")
"""


def tree_digest(root: Path) -> str:
    outer = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        data = path.read_bytes() if path.is_file() else b"dir"
        outer.update(f"{path.relative_to(root)}\0{path.lstat().st_mode}\0".encode())
        outer.update(hashlib.sha256(data).digest())
    return outer.hexdigest()


def run_job(backend: SshBackend, job_id: str, digest: str, *args: str) -> dict[str, Any]:
    spec = JobSpec(
        job_id=job_id,
        machine=backend.machine.name,
        command=(backend.python, "train.py", *args),
        code_snapshot=digest,
        created=utcnow(),
    )
    backend.submit(spec)
    done = wait_for(lambda: JobState(status_doc(backend, job_id)["state"]) in TERMINAL, timeout=90)
    assert done, status_doc(backend, job_id)
    return status_doc(backend, job_id)


def test_jobs_over_ssh_write_into_their_own_work_dir(
    sshd_server: SshServer, tmp_path: Path
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "train.py").write_text(TRAIN)
    (project / "weights.bin").write_bytes(b"W" * 1_500_000)  # large: shared by hard link
    backend = get_backend(register(sshd_server, "box", tmp_path / "root"))
    assert isinstance(backend, SshBackend)
    snapshot = take_snapshot(project)
    remote = Path(backend.push_snapshot(snapshot))
    before = tree_digest(remote)

    for job_id in ("job-a", "job-b"):
        status = run_job(backend, job_id, snapshot.digest)
        assert status["state"] == "succeeded", status
        manifest = backend.manifest(job_id)
        assert manifest is not None
        assert [f["path"] for f in manifest[0]["files"]] == ["work/out-char/ckpt.pt"]
        work = Path(backend.job_paths(job_id).work)
        assert (work / "out-char/ckpt.pt").read_text() == f"{job_id} saw []"
    assert tree_digest(remote) == before and not (remote / "out-char").exists()

    status = run_job(backend, "job-root", snapshot.digest, "--write-in-place")
    assert status["state"] == "succeeded", status
    (event,) = [e for e in backend.events("job-root") if e["kind"] == "snapshot_modified"]
    assert event["detail"]["path"] == "weights.bin" and event["severity"] == "error"
    assert tree_digest(remote) != before  # root's write went through the hard link

    assert Path(backend.push_snapshot(snapshot)) == remote  # moved aside, uploaded again
    assert tree_digest(remote) == before
    assert not Path(f"{remote}.damaged").exists()
    assert len(list(remote.parent.glob(f"{snapshot.digest}.damaged-*.json"))) == 1
    assert run_job(backend, "job-after", snapshot.digest)["state"] == "succeeded"
