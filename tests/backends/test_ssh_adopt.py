"""Two RGT_HOMEs (two laptops) on one machine over a real sshd: the gate of each sees the
other's job, and `rgt adopt` brings it under the second so it is pulled and verified."""

from __future__ import annotations

from pathlib import Path

import pytest

from rgt.backends import backend_for
from rgt.jobs.adopt import adopt
from rgt.jobs.pull import pull
from rgt.lifecycle.gate import evaluate
from rgt.models import TERMINAL, JobSpec, JobState
from rgt.state.store import Store, utcnow
from tests.backends.conformance import status_doc
from tests.sshd import SshServer, register, wait_for

JOB = "import os, pathlib; pathlib.Path(os.environ['RGT_OUTPUT_DIR'], 'r.json').write_text('[2]')"


@pytest.mark.slow
def test_a_job_of_another_home_blocks_until_adopted_over_ssh(
    sshd_server: SshServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "shared 'root'"
    monkeypatch.setenv("RGT_HOME", str(tmp_path / "laptop A"))
    register(sshd_server, "gpu", root)
    backend_a = backend_for(Store.open(), "gpu")
    spec = JobSpec("from-a-1", "gpu", (backend_a.python, "-c", JOB), created=utcnow())
    Store.open().add_job(spec)
    backend_a.submit(spec)
    assert wait_for(lambda: JobState(status_doc(backend_a, "from-a-1")["state"]) in TERMINAL)

    monkeypatch.setenv("RGT_HOME", str(tmp_path / "laptop B"))
    store = Store.open()
    register(sshd_server, "gpu", root)
    backend = backend_for(store, "gpu")
    known = next(c for c in evaluate(store, backend).checks if c.name == "known")
    assert not known.ok and "`rgt adopt gpu from-a-1`" in known.detail

    assert [j["job_id"] for j in adopt(store, "gpu")["adopted"]] == ["from-a-1"]
    assert store.job("from-a-1").machine == "gpu"
    assert store.job("from-a-1").state == JobState.SUCCEEDED
    assert pull(store, "from-a-1", tmp_path / "pulled").ok
    verdict = evaluate(store, backend)
    assert [c.name for c in verdict.checks if not c.ok] == ["approved"]
