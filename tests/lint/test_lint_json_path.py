"""`rgt lint ... --json` without click (rgt.cli._lint_json) answers exactly as click's command:
the same document, stderr and exit code for every form of call, or click answers it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"
BUGGY = "import torch.nn.functional as F\n\ndef step(model, x, y):\n"
BUGGY += "    return F.nll_loss(F.softmax(model(x), dim=1), y)\n"
THROUGH_CLICK = "import sys\nfrom rgt.cli.app import run\nrun(sys.argv[1:])\n"
CALLS = [
    ["lint", "{dir}", "--json"],
    ["lint", "--json", "--no-cache", "{dir}/train.py", "{dir}/clean.py"],
    ["lint", "{dir}", "--json", "--select", "RGT5"],
    ["lint", "{dir}", "--json", "--select=rgt1", "--ignore", "RGT101"],
    ["lint", "{dir}", "--json", "--ignore", "RGT1,RGT2", "--ignore", "RGT3"],
    ["lint", "{dir}", "--json", "--select", "RGT999"],  # a usage error: exit 2
    ["lint", "{dir}/missing.py", "--json"],  # no such file: exit 2
    ["lint", "--json"],  # no path: click's usage error
    ["lint", "{dir}", "--json", "--select"],  # an option without its value
    ["lint", "{dir}", "--json", "--help"],
    ["lint", "{dir}", "--json", "--no-cache=1"],
    ["lint", "--json", "--", "{dir}"],
]


def _run(argv: list[str], tmp_path: Path, click: bool) -> tuple[int, str, str]:
    env = {**os.environ, "PYTHONPATH": str(SRC), "RGT_HOME": str(tmp_path / "home")}
    env.pop("RGT_DEBUG", None)
    head = ["-c", THROUGH_CLICK] if click else ["-m", "rgt.cli"]
    done = subprocess.run(
        [sys.executable, *head, *argv], capture_output=True, text=True, env=env, timeout=60
    )
    return done.returncode, done.stdout, done.stderr


@pytest.mark.slow
def test_every_call_answers_as_click_does(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(BUGGY)
    (tmp_path / "clean.py").write_text("import torch\n")
    codes = set()
    for call in CALLS:
        argv = [a.format(dir=tmp_path) for a in call]
        fast, slow = _run(argv, tmp_path, False), _run(argv, tmp_path, True)
        assert fast == slow, argv
        codes.add(fast[0])
    assert codes == {0, 1, 2}


def test_a_plain_json_lint_never_imports_click(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(BUGGY)
    code = (
        "import sys\nfrom rgt.cli import main\n"
        f"try:\n    main(['lint', {str(tmp_path)!r}, '--json', '--no-cache'])\n"
        "except SystemExit as exc:\n    print(exc.code, 'click' in sys.modules, file=sys.stderr)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(SRC), "RGT_HOME": str(tmp_path / "home")}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60
    )
    assert done.stderr.split() == ["1", "False"]
    assert '"code": "RGT1' in done.stdout
