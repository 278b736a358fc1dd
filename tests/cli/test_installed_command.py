"""The installed ``rgt`` command (``bin/rgt``, a plain script) starts nothing before rgt: a pip
console-script wrapper would ``import re`` and run a regex first, half again a bare
interpreter's start-up, for every `rgt --help` and `--version`."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

RGT = Path(sys.executable).with_name("rgt")


def _imported(*args: str) -> list[str]:
    env = {**os.environ, "PYTHONPROFILEIMPORTTIME": "1", "COLUMNS": "80"}
    proc = subprocess.run([str(RGT), *args], capture_output=True, text=True, env=env, check=False)
    assert proc.returncode == 0, proc.stderr
    lines = [line.split("|") for line in proc.stderr.splitlines() if line.startswith("import time")]
    return [parts[2].strip() for parts in lines[1:]]  # the first line is the header


@pytest.mark.parametrize("args", [("--help",), ("--version",)])
def test_the_command_imports_rgt_and_nothing_of_a_wrapper(args: tuple[str, ...]) -> None:
    if not RGT.exists():
        pytest.skip("rgt is not installed in this environment")
    modules = _imported(*args)
    after_site = modules[modules.index("site") + 1 :]
    assert after_site[0] == "rgt", modules
    assert "re" not in modules and "click" not in modules, after_site
    assert RGT.read_text().splitlines()[0].startswith("#!")
    assert "import re" not in RGT.read_text()
