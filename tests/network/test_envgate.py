"""The environment gate on a real sshd: the interpreter a non-interactive ssh shell really runs
against the profile's environment, a cache on a small disk, and `rgt run` refusing on the
recorded audit until --force."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.network.helpers import profile_with, rgt
from tests.sshd import SshServer, register


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real environment (its own prefix) that is not on the ssh PATH."""
    env = tmp_path_factory.mktemp("image env") / "env"
    subprocess.run(["/usr/bin/python3", "-m", "venv", "--without-pip", str(env)], check=True)
    return env / "bin" / "python"


@pytest.mark.slow
def test_wrong_interpreter_and_small_cache_disk_gate_the_run(
    sshd_server: SshServer, tmp_path: Path, venv: Path, small_tmpfs: Any
) -> None:
    small = small_tmpfs("64m", 1000)
    profile_with(str(venv), small / "hf")
    register(sshd_server, "box", tmp_path / "data")
    proc = rgt("audit", "box", "--json")
    assert proc.returncode == 1, proc.stderr
    data = json.loads(proc.stdout)
    found = data["readings"]["interpreters"]
    assert found["expected"]["prefix"] == str(venv.parent.parent)
    assert found["python3"]["prefix"] != found["expected"]["prefix"]
    wrong = [f for f in data["findings"] if f["check"] == "interpreter"]
    assert wrong and all(f["severity"] == "bug" for f in wrong)
    assert any("`python3` in a non-interactive ssh shell is" in f["finding"] for f in wrong)
    assert f"-- {venv} train.py" in wrong[0]["fix"]
    assert data["readings"]["torch"]["python"] == str(venv)  # torch asked of the job's python
    (cache,) = [f for f in data["findings"] if f["check"] == "cache disk"]
    assert "huggingface cache" in cache["finding"] and "(HF_HOME)" in cache["finding"]
    assert cache["fix"].startswith(f"point it at the data disk: --env HF_HOME={tmp_path / 'data'}")

    proj = tmp_path / "proj"
    proj.mkdir()
    refused = rgt("run", "box", "--json", "--probe-seconds", "0", "--", "true", cwd=proj)
    assert refused.returncode == 3, refused.stderr
    assert "last audit of box" in refused.stderr and "s ago" in refused.stderr
    assert "interpreter" in refused.stderr and "--force" in refused.stderr
    forced = rgt("run", "box", "--force", "--json", "--probe-seconds", "0", "--", "true", cwd=proj)
    assert forced.returncode == 0, forced.stderr
    assert "--force: starting despite" in forced.stderr


def test_the_right_interpreter_first_on_the_ssh_path_passes(
    sshd_factory: Any, tmp_path: Path, venv: Path
) -> None:
    server = sshd_factory()
    server.stop()
    path = f'"PATH={venv.parent}:/usr/local/bin:/usr/bin:/bin"'  # sshd keeps the first SetEnv
    text = server.config.read_text().replace("SetEnv SHLVL=1", f"SetEnv SHLVL=1 {path}")
    server.config.write_text(text)
    server.start()
    profile_with(str(venv), tmp_path / "data" / "hf")
    register(server, "box", tmp_path / "data")
    data = json.loads(rgt("audit", "box", "--json").stdout)
    found = data["readings"]["interpreters"]
    assert found["path_env"].startswith(str(venv.parent)), found
    assert found["python"]["prefix"] == found["expected"]["prefix"] == str(venv.parent.parent)
    checks = {f["check"] for f in data["findings"]}
    assert "interpreter" not in checks and "cache disk" not in checks
    assert data["routes"] == {} and data["readings"]["routes"] == []  # no mirror: no choice
