"""Conda's ``base`` as the jobs' interpreter on one's own machine, on a real conda-style prefix:
a venv made into a conda root (``conda-meta/`` and ``envs/``) with a named environment in it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from rgt.agent.probes import pyenv
from rgt.watch import audit
from tests.clirun import rgt


def conda_base(readings: dict[str, Any]) -> list[dict[str, str]]:
    """``audit.conda_base``'s findings as `rgt audit --json` prints them."""
    return [audit.finding_json(f) for f in audit.conda_base(readings)]


def _venv(where: Path) -> Path:
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True)
    (where / "conda-meta").mkdir()
    (where / "conda-meta" / "history").write_text("==> 2024-05-01 10:00:00 <==\n")
    return where / "bin" / "python"


@pytest.fixture(scope="module")
def conda_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("conda") / "miniconda 3"  # a space, as in real homes
    _venv(root)
    (root / "envs").mkdir()
    _venv(root / "envs" / "torch2")
    (root / "envs" / "scratch").mkdir()  # not an environment: no conda-meta
    return root


def test_the_conda_root_is_base_and_names_its_environments(conda_root: Path) -> None:
    python = str(conda_root / "bin" / "python")
    found = pyenv.interpreters(python, {"PATH": "/usr/bin:/bin"})
    conda = found["expected"]["conda"]
    assert conda["base"] is True and conda["envs"] == ["torch2"]
    assert Path(conda["prefix"]).resolve() == conda_root.resolve()
    (finding,) = conda_base({"interpreters": found})
    assert finding["check"] == "conda base" and finding["severity"] == "warning"
    assert "torch2" in finding["fix"] and "envs/torch2/bin/python" in finding["fix"]


def test_a_named_environment_and_a_plain_venv_are_not_base(conda_root: Path) -> None:
    named = str(conda_root / "envs" / "torch2" / "bin" / "python")
    found = pyenv.interpreters(named, {"PATH": "/usr/bin:/bin"})
    assert found["expected"]["conda"]["base"] is False and conda_base({"interpreters": found}) == []
    found = pyenv.interpreters(sys.executable, {"PATH": "/usr/bin:/bin"})
    assert found["expected"]["conda"] is None and conda_base({"interpreters": found}) == []


def test_the_shell_saying_base_for_this_prefix_is_base(tmp_path: Path) -> None:
    python = _venv(tmp_path / "root")  # a conda root without envs/ (nothing created yet)
    env = {"CONDA_DEFAULT_ENV": "base", "CONDA_PREFIX": str(tmp_path / "root")}
    (finding,) = conda_base({"interpreters": pyenv.interpreters(str(python), env)})
    assert "conda create" in finding["fix"]
    other = {**env, "CONDA_PREFIX": "/elsewhere"}  # base activated, this prefix another one
    assert conda_base({"interpreters": pyenv.interpreters(str(python), other)}) == []


@pytest.mark.slow
def test_audit_of_the_local_machine_flags_base(conda_root: Path, tmp_path: Path) -> None:
    assert rgt("up", "local", "--name", "me", "--root", str(tmp_path / "r")).returncode == 0
    python = str(conda_root / "bin" / "python")
    audit = rgt("audit", "me", "--python", python, "--json",
                env={"RGT_NVIDIA_SMI": "/nonexistent"})  # fmt: skip
    data = json.loads(audit.stdout)
    (finding,) = [f for f in data["findings"] if f["check"] == "conda base"]
    assert "conda's base environment" in finding["finding"] and "torch2" in finding["fix"]
