"""The checkpoint corpus: built once per test session by the real libraries (tests/verify/corpus/
make.py, one process per framework, two at a time), in a temp dir."""

from __future__ import annotations

import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.verify.corpus.make import FRAMEWORKS

REPO = Path(__file__).resolve().parents[3]
# deepspeed is not a dependency of the test extra; where it is missing its cases are skipped
# with the reason.


def _make(out: Path, framework: str) -> str:
    proc = subprocess.run(
        [sys.executable, "-m", "tests.verify.corpus.make", str(out), framework],
        cwd=REPO, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    if (out / framework / "DONE").is_file():
        return ""
    if "No module named 'deepspeed'" in proc.stderr:
        return "deepspeed is not installed (pip install deepspeed==0.19.8 to run these cases)"
    tail = f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    raise AssertionError(f"{framework} corpus failed:\n{tail}")


@pytest.fixture(scope="session")
def ckpt_corpus(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, str]]:
    """framework -> (its folder with good/ nan/ hostile/, the reason it is missing or '')."""
    out = tmp_path_factory.mktemp("ckpt-corpus")
    with ThreadPoolExecutor(max_workers=2) as pool:
        skipped = dict(
            zip(FRAMEWORKS, pool.map(lambda fw: _make(out, fw), FRAMEWORKS), strict=True)
        )
    return {fw: (out / fw, skipped[fw]) for fw in FRAMEWORKS}
