"""The interpreter jobs run, on a real sshd: `rgt audit` names it with its torch, and `rgt run`
refuses a torch job whose python has none (exit 3, the fix, --force), by one quick probe or the
audit's recorded answer; a job that does not import torch is never held up."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rgt.jobs import pythongate
from tests.clirun import rgt
from tests.sshd import SshServer, register

BARE = "/usr/bin/python3"  # the ssh session's python3: no torch, no rgt
TRAIN = "import torch\nprint(torch.__version__)\n"
HELPER = "from model import net\nprint(net)\n"  # torch only through a local module


def _bare_has_no_torch() -> bool:
    if not shutil.which(BARE):
        return False
    return subprocess.run([BARE, "-c", "import torch"], capture_output=True).returncode != 0


pytestmark = pytest.mark.skipif(not _bare_has_no_torch(), reason=f"{BARE} has torch or is absent")


@pytest.fixture
def project(tmp_path: Path) -> Path:
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "train.py").write_text(TRAIN)
    (proj / "main.py").write_text(HELPER)
    (proj / "model.py").write_text("import torch.nn as nn\nnet = nn.Linear(1, 1)\n")
    (proj / "plain.py").write_text("import json\nprint(json.dumps(1))\n")
    return proj


def test_which_commands_are_torch_jobs(project: Path) -> None:
    torch_jobs = [
        ["python3", "train.py"],
        ["python", "-u", "main.py"],
        ["python3", "-c", "import torch"],
        ["python3", "-m", "torch.distributed.run"],
    ]
    for command in torch_jobs:
        assert pythongate.needs_torch(command, project), command
    for command in (["python3", "plain.py"], ["python3", "-c", "print(1)"], ["python3", "x.py"]):
        assert not pythongate.needs_torch(command, project), command
    # A script in a subfolder imports its siblings (its folder is sys.path[0]).
    (project / "src").mkdir()
    (project / "src" / "run.py").write_text("from net import M\n")
    (project / "src" / "net.py").write_text("from torch import nn\nM = nn.Linear\n")
    assert pythongate.needs_torch(["python3", "src/run.py"], project)


@pytest.mark.slow
def test_run_refuses_a_torch_job_whose_python_has_no_torch(
    sshd_server: SshServer, tmp_path: Path, project: Path
) -> None:
    register(sshd_server, "box", tmp_path / "root")
    refused = rgt("run", "box", "--json", "--probe-seconds", "0", "--", "python3", "main.py",
                  cwd=project)  # fmt: skip
    assert refused.returncode == 3, refused.stderr
    said = refused.stdout + refused.stderr
    assert (
        f"`python3` on box runs {BARE}" in said or "`python3` on box runs /usr/bin/python3" in said
    )
    assert "has no torch" in said and "-m pip install torch" in said and "--force" in said
    assert "rgt run box --" in said  # the fix names the real machine
    plain = rgt("run", "box", "--json", "--probe-seconds", "5", "--", "python3", "plain.py",
                cwd=project)  # fmt: skip
    assert plain.returncode == 0, plain.stderr
    forced = rgt("run", "box", "--force", "--json", "--probe-seconds", "0", "--", "python3",
                 "train.py", cwd=project)  # fmt: skip
    assert forced.returncode == 0 and "--force: starting although" in forced.stderr
    # The venv's python has torch: its torch job passes.
    venv = rgt("run", "box", "--json", "--probe-seconds", "0", "--", sys.executable, "train.py",
               cwd=project)  # fmt: skip
    assert venv.returncode == 0, venv.stderr


@pytest.mark.slow
def test_audit_names_the_jobs_python_and_its_torch(sshd_server: SshServer, tmp_path: Path) -> None:
    register(sshd_server, "box", tmp_path / "root")
    data = json.loads(rgt("audit", "box", "--python", sys.executable, "--json").stdout)
    found = data["readings"]["interpreters"]
    assert found["python3"]["torch"]["installed"] is False
    assert found["expected"]["torch"]["installed"] is True
    assert found["expected"]["torch"]["version"].startswith("2.")
    torch = [f for f in data["findings"] if f["check"] == "torch"]
    exe = found["python3"]["executable"]
    assert torch and torch[0]["severity"] == "bug" and exe in torch[0]["finding"]
    assert "`python3`" in torch[0]["finding"] and "has no torch" in torch[0]["finding"]
    assert f"rgt run box -- {sys.executable} train.py" in torch[0]["fix"]
    info = [f["finding"] for f in data["findings"] if f["check"] == "python"]
    assert any("the profile's python" in t and "torch 2." in t for t in info), info
    # Recorded for `rgt run`: the torch answer per interpreter, kept out of the every-command
    # gate (a shell job is not held up by a python without torch).
    recorded = json.loads(pythongate.python_file("box").read_text())["interpreters"]
    assert recorded["python3"]["torch"]["installed"] is False
    from rgt.watch.envgate import audit_file

    assert all(f["check"] != "torch" for f in json.loads(audit_file("box").read_text())["findings"])


@pytest.mark.slow
def test_the_probe_costs_one_round_trip(sshd_server: SshServer, tmp_path: Path) -> None:
    register(sshd_server, "box", tmp_path / "root")
    pythongate.probe("box", "python3", {})  # warm the ssh master connection
    started = time.perf_counter()
    for _ in range(5):
        answer = pythongate.probe("box", "python3", {})
    each = (time.perf_counter() - started) / 5
    assert answer is not None and answer["installed"] is False
    print(f"pythongate probe over ssh: {each * 1000:.0f} ms")
    assert each < 2.0
