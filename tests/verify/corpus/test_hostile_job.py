"""A job that leaves hostile pickles among its artifacts: the agent (judging them on the machine
when the job ends), `rgt pull` and `rgt verify artifacts` never run them. They are `hash_only`,
naming the global, and the gate is satisfied: nothing is executed to find out what they are.

The machine is the local backend and a real sshd on loopback: both run the agent on this host,
so a payload run anywhere (agent, pull, verify) would leave its marker file here.
"""

from __future__ import annotations

import json
import subprocess
import sys
from functools import partial
from pathlib import Path

import pytest

from tests import clirun
from tests.clirun import ok
from tests.sshd import SshServer

pytestmark = pytest.mark.slow
rgt = partial(clirun.rgt, timeout=300)

# What the job runs: torch.save of an object whose unpickling runs `touch MARKER`, where
# accelerate keeps a registered object, and the same object in a plain pickle.
JOB = """
import os, pickle, sys, torch
marker = sys.argv[1]
class Evil:
    def __reduce__(self):
        return (os.system, ("touch '%s'" % marker,))
os.makedirs("out/step_1", exist_ok=True)
torch.save({"count": Evil()}, "out/step_1/custom_checkpoint_0.pkl")
with open("out/evil.pkl", "wb") as fh:
    pickle.dump(Evil(), fh)
print("wrote", flush=True)
"""
HOSTILE = ("work/out/step_1/custom_checkpoint_0.pkl", "work/out/evil.pkl")


@pytest.fixture(params=["local", "ssh"])
def machine(request: pytest.FixtureRequest, tmp_path: Path) -> list[str]:
    if request.param == "ssh":
        server: SshServer = request.getfixturevalue("sshd_server")
        return ["generic-ssh", "--ssh", server.ssh_line]
    return ["local"]


def test_hostile_pickles_are_never_run_by_the_agent_pull_or_verify(
    machine: list[str], tmp_path: Path
) -> None:
    marker = tmp_path / "EXECUTED"
    project = tmp_path / "project"
    project.mkdir()
    (project / "job.py").write_text(JOB)
    ok(rgt("up", *machine, "--name", "box", "--root", str(tmp_path / "root"), "--json"))
    launched = ok(rgt("run", "box", "--probe-seconds", "0", "--json", "--", sys.executable,
                      "job.py", str(marker), cwd=project))  # fmt: skip
    watched = ok(rgt("watch", str(launched["job_id"]), "--json"))
    assert watched["state"] == "succeeded", watched
    assert not marker.exists(), "the agent ran a pickle from the job"
    dest = tmp_path / "pulled"
    pulled = ok(rgt("pull", str(launched["job_id"]), "--to", str(dest), "--json"))
    assert not marker.exists(), "rgt pull ran a pickle from the machine"
    checked = rgt("verify", "artifacts", str(dest), "--json")
    assert not marker.exists(), "rgt verify ran a pickle from the machine"
    for doc in (pulled["verify"], json.loads(checked.stdout)):
        verdicts = {f["path"]: f for f in doc["files"]}
        for rel in HOSTILE:
            assert verdicts[rel]["verdict"] == "hash_only", verdicts[rel]
            assert "system" in verdicts[rel]["detail"], verdicts[rel]
    assert checked.returncode == 0 and pulled["ok"] is True
    _prove_the_payload_is_live(dest / HOSTILE[1], marker)


def _prove_the_payload_is_live(path: Path, marker: Path) -> None:
    load = "import pickle, sys; pickle.load(open(sys.argv[1], 'rb'))"
    subprocess.run([sys.executable, "-c", load, str(path)], capture_output=True, timeout=60)
    assert marker.exists(), "the payload never worked: the checks above proved nothing"
