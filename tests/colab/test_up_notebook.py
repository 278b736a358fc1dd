"""`rgt up colab` / `rgt up kaggle-notebook` and `%rgt`: the refusals (not a notebook VM, Drive
not mounted) and machines registered on a real tmpfs standing in for Drive. The CLI runs in this
process through ``rgt.notebook.run_line`` (what ``%rgt`` runs); one call goes through a fresh
``rgt`` process as a shell cell ``!rgt …`` would."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import pytest

from rgt.notebook import run_line
from rgt.state.store import Store
from tests.clirun import rgt

COLAB = {"COLAB_RELEASE_TAG": "release-colab-test"}
KAGGLE = {"KAGGLE_KERNEL_RUN_TYPE": "Interactive"}


@pytest.fixture
def up(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Any:
    def run(*args: str, env: dict[str, str] | None = None) -> tuple[int, dict[str, Any]]:
        for key, value in (env or {}).items():
            monkeypatch.setenv(key, value)
        code = run_line(shlex.join(["up", *args, "--json"]))
        return code, json.loads(capsys.readouterr().out)

    return run


def _machines() -> list[str]:
    return [m.name for m in Store.open().machines()]


def test_refused_outside_a_notebook_vm(drive_mount: Path) -> None:
    proc = rgt("up", "colab", "--name", "c", "--drive", str(drive_mount / "rgt"), "--json")
    assert proc.returncode == 3, proc.stderr
    doc = json.loads(proc.stdout)
    assert "not a colab notebook VM" in doc["message"] and "--force-here" in doc["fix"]
    assert _machines() == []


def test_refused_when_drive_is_not_mounted(up: Any, tmp_path: Path) -> None:
    folder = tmp_path / "content" / "drive" / "MyDrive" / "rgt"
    code, doc = up("colab", "--name", "c", "--drive", str(folder), env=COLAB)
    assert code == 3
    assert "not on a mounted Google Drive" in doc["message"]
    assert "drive.mount('/content/drive')" in doc["fix"]
    assert _machines() == [] and not folder.exists()


def test_up_colab_on_a_mounted_drive(up: Any, drive_mount: Path, hostile_name: str) -> None:
    folder = drive_mount / "MyDrive" / hostile_name
    code, doc = up("colab", "--name", "c", "--drive", str(folder), "--tier", "pro", env=COLAB)
    assert code == 0, doc
    assert doc["profile"] == "colab" and doc["backend"] == "local" and folder.is_dir()
    assert not Path(doc["durable_root"]).is_relative_to(drive_mount)  # work stays on local disk
    connection = Store.open().machine("c").connection
    assert connection["notebook"] == "colab" and connection["tier"] == "pro"
    assert connection["durable"] == str(folder)


def test_watch_shows_the_session_clock(
    up: Any, drive_mount: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _ = up("colab", "--name", "c", "--drive", str(drive_mount / "rgt"), env=COLAB)
    assert code == 0
    assert run_line("watch --once --no-gpu") == 0
    shown = " ".join(capsys.readouterr().out.split())
    assert "session c: colab free:" in shown and "left of ~12h (published)" in shown
    assert "idle disconnect after ~90 min (observed)" in shown


def test_up_kaggle_notebook_uses_its_working_folder(up: Any, tmp_path: Path) -> None:
    working = tmp_path / "kaggle" / "working"
    working.mkdir(parents=True)
    code, doc = up("kaggle-notebook", "--name", "k", "--drive", str(working / "rgt"), env=KAGGLE)
    assert code == 0, doc
    assert doc["profile"] == "kaggle" and (working / "rgt").is_dir()
    assert Store.open().machine("k").connection["notebook"] == "kaggle-notebook"


def test_force_here_registers_a_host_that_is_no_notebook_vm(up: Any, tmp_path: Path) -> None:
    code, doc = up("colab", "--name", "c")
    assert code == 3 and "--force-here" in doc["fix"]
    folder = tmp_path / "working" / "rgt"
    folder.parent.mkdir()
    code, doc = up("kaggle-notebook", "--name", "k", "--force-here", "--drive", str(folder))
    assert code == 0 and doc["machine"] == "k" and _machines() == ["k"]


def test_the_magic_loads_in_ipython(capsys: pytest.CaptureFixture[str]) -> None:
    interactiveshell = pytest.importorskip("IPython.core.interactiveshell")
    shell = interactiveshell.InteractiveShell.instance()
    shell.run_line_magic("load_ext", "rgt.notebook")
    shell.run_line_magic("rgt", "up colab --name c --json")
    assert "rgt exited with 3" in capsys.readouterr().err
