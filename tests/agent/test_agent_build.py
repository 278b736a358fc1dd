"""The zipapp: deterministic, versioned by content, Python 3.8 syntax, stdlib only."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import rgt
from rgt.agent import build

AGENT_SRC = Path(build.PACKAGE_ROOT) / "agent"


def test_build_is_deterministic_and_named_by_version(tmp_path: Path) -> None:
    first = build.build_agent(tmp_path / "a")
    second = build.build_agent(tmp_path / "b")
    assert first.name == second.name == f"agent-{build.agent_version()}.pyz"
    assert first.read_bytes() == second.read_bytes()
    assert build.agent_version().startswith(rgt.__version__ + "-")


def test_a_changed_source_gets_a_new_file_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = build.build_agent(tmp_path / "before").name
    copy = tmp_path / "pkg"
    shutil.copytree(build.PACKAGE_ROOT, copy, ignore=shutil.ignore_patterns("__pycache__"))
    with (copy / "agent" / "_system.py").open("a") as handle:
        handle.write("\n# a one-line change\n")
    monkeypatch.setattr(build, "PACKAGE_ROOT", copy)
    assert build.build_agent(tmp_path / "after").name != before


def test_archive_holds_the_agent_and_what_it_imports_and_nothing_else(agent_pyz: Path) -> None:
    names = zipfile.ZipFile(agent_pyz).namelist()
    assert names == sorted(names) and names[0] == "__main__.py"
    for required in (
        "rgt/__init__.py",
        "rgt/_fs.py",
        "rgt/agent/paths.py",
        "rgt/agent/cli.py",
        "rgt/agent/supervisor.py",
        "rgt/agent/probes/gpu.py",
        "rgt/agent/verdicts/__init__.py",
        "rgt/triage/__init__.py",  # the agent imports the rule base unguarded
        "rgt/ckpt/__init__.py",
        "rgt/ckpt/adapters/lightning.py",
    ):
        assert required in names
    assert "rgt/agent/build.py" not in names
    allowed = (
        "rgt/__init__.py",
        "rgt/_fs.py",
        "rgt/errors.py",  # imported by rgt.ckpt
        "rgt/ckpt/",  # for jobs (rgt.agent._pypath); the agent never imports it
        "rgt/agent/",  # with probes/ and verdicts/ (the manifest's verifier)
        "rgt/triage/",
    )
    assert all(name == "__main__.py" or name.startswith(allowed) for name in names)
    if (Path(build.PACKAGE_ROOT) / "triage" / "rules").is_dir():
        assert any(n.startswith("rgt/triage/rules/") and n.endswith(".json") for n in names)


def test_every_bundled_source_parses_as_python_3_8(agent_pyz: Path) -> None:
    archive = zipfile.ZipFile(agent_pyz)
    sources = {n: archive.read(n) for n in archive.namelist() if n.endswith(".py")}
    sources.update(
        {str(p): p.read_bytes() for p in AGENT_SRC.rglob("*.py") if p.name != "build.py"}
    )
    for name, data in sources.items():
        ast.parse(data, filename=name, feature_version=(3, 8))


def test_agent_runs_on_a_bare_interpreter_without_site_packages(
    agent_pyz: Path, tmp_path: Path
) -> None:
    # -I -S: no site-packages, no PYTHONPATH, no user site: only the stdlib and the archive.
    python = shutil.which("python3") or sys.executable
    version = subprocess.run(
        [python, "-I", "-S", str(agent_pyz), "--version"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert version.stdout.strip() == build.agent_version()
    status = subprocess.run(
        [python, "-I", "-S", str(agent_pyz), "status", str(tmp_path)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert '"status_file": "missing"' in status.stdout  # a job dir with no status yet


def test_missing_job_dir_is_an_error_naming_it(agent_pyz: Path, tmp_path: Path) -> None:
    missing = tmp_path / "no such job"
    result = subprocess.run(
        [sys.executable, str(agent_pyz), "run", str(missing)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 1 and str(missing) in result.stderr
