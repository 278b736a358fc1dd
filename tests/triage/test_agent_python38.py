"""The agent bundles rgt.triage into a zipapp that runs on the rented machine's Python 3.8."""

from __future__ import annotations

import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

SRC = Path(__file__).parents[2] / "src"


def _python38() -> str:
    # pyenv's shim answers 127 unless 3.8 is selected, so prefer a real interpreter path.
    installed = sorted(Path.home().glob(".pyenv/versions/3.8*/bin/python3.8"))
    found = shutil.which("python3.8")
    if installed:
        return str(installed[-1])
    return found if found and "shims" not in found else "python3.8-not-installed"


PY38 = _python38()

MAIN = """
import json, sys
from rgt.triage import classify, read_tail
verdict = classify(read_tail(sys.argv[1]), exit_code=int(sys.argv[2]))
print(json.dumps(verdict.to_dict()))
"""


def _build_zipapp(target: Path) -> None:
    with zipfile.ZipFile(target, "w") as bundle:
        bundle.write(SRC / "rgt" / "__init__.py", "rgt/__init__.py")
        for path in sorted((SRC / "rgt" / "triage").rglob("*")):
            if path.suffix in (".py", ".json"):
                bundle.write(path, str(path.relative_to(SRC)))
        bundle.writestr("__main__.py", MAIN)


@pytest.mark.skipif(not Path(PY38).exists(), reason="no Python 3.8 interpreter on this machine")
def test_triage_runs_from_a_zipapp_on_python_3_8(hostile_dir: Path) -> None:
    app = hostile_dir / "agent-0.1.pyz"
    log = hostile_dir / "attempt 1.log"
    _build_zipapp(app)
    log.write_text(
        "step 9\nslurmstepd: error: *** JOB 1 ON n1 CANCELLED AT 2024-01-01T00:00:00 "
        "DUE TO TIME LIMIT ***\nKilled\n"
    )
    result = subprocess.run(
        [PY38, "-X", "dev", str(app), str(log), "137"], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert '"label": "preempted"' in result.stdout
    assert "Warning" not in result.stderr


@pytest.mark.skipif(not Path(PY38).exists(), reason="no Python 3.8 interpreter on this machine")
def test_code_error_from_a_zipapp_on_python_3_8(tmp_path: Path) -> None:
    app = tmp_path / "agent-0.1.pyz"
    _build_zipapp(app)
    script = tmp_path / "train.py"
    script.write_text("def step(cfg):\n    return cfg['lr']\n\n\nstep({})\n")
    crashed = subprocess.run([PY38, str(script)], capture_output=True, text=True, timeout=60)
    log = tmp_path / "attempt-1.log"
    log.write_text(crashed.stderr)
    result = subprocess.run(
        [PY38, "-X", "dev", str(app), str(log), "1"], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert '"label": "code_error"' in result.stdout
    assert f"{script}:2 in step: KeyError: 'lr'" in result.stdout
    assert "Warning" not in result.stderr
