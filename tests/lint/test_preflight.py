"""`rgt smoke` and `rgt run --lint` show lint bugs before anything runs or is rented."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rgt.cli import main
from rgt.lint.preflight import scripts_of

# A script that runs without torch (the bug sits in a function never called), so the smoke
# itself passes quickly and only the lint can fail it.
SCRIPT = """import sys

def training_step(model, x, y):
    import torch.nn as nn
    import torch.nn.functional as F
    criterion = nn.CrossEntropyLoss()
    return criterion(F.softmax(model(x), dim=1), y)

print("step 1 loss 2.3")
"""


def test_scripts_of_common_launchers(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text("x = 1\n")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "main.py").write_text("x = 1\n")
    for command in (
        ["python", "-u", "train.py", "--lr", "3e-4"],
        ["torchrun", "--nproc_per_node", "8", "train.py"],
        ["accelerate", "launch", "train.py"],
    ):
        assert scripts_of(command, tmp_path) == [str(tmp_path / "train.py")]
    assert scripts_of(["python", "-m", "pkg.main"], tmp_path) == [str(tmp_path / "pkg/main.py")]
    assert scripts_of(["bash", "run.sh", "missing.py"], tmp_path) == []


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, object], str]:
    with pytest.raises(SystemExit) as exit_:
        main(list(args))
    out, err = capsys.readouterr()
    return int(exit_.value.code or 0), json.loads(out), err


def test_run_with_lint_refuses_before_anything_is_launched(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "train.py").write_text(SCRIPT)
    monkeypatch.chdir(tmp_path)
    code, data, _ = cli(
        capsys, "run", "no-such-box", "--lint", "--json", "--", "python", "train.py"
    )
    assert code == 3 and data["error"] == "GateRefused"
    assert "RGT101" in data["reasons"][0]  # refused by lint, before the machine is looked up


def test_smoke_shows_lint_bugs_and_fails(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "train.py").write_text(SCRIPT)
    monkeypatch.chdir(tmp_path)
    args = ["smoke", "--json", "--kill-after-seconds", "5", "--", "python", "train.py"]
    code, data, err = cli(capsys, *args)
    lint = data["lint"]
    assert isinstance(lint, dict) and lint["counts"]["bug"] == 1
    assert code == 1 and "RGT101" in err
    code, data, _ = cli(capsys, *args[:1], "--no-lint", *args[1:])
    assert data["lint"] is None
