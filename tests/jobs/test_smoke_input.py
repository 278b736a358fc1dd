"""Plain `rgt smoke` reports the data wait of a script not written for rgt: the meters of
pytorch/examples' imagenet/main.py (its own ``AverageMeter``/``ProgressMeter`` classes, taken
from the corpus copy) print ``Time … Data …`` lines; a loader that sleeps makes the run
input-bound, a step that computes does not. A script using ``rgt.smoke.timed_loader`` is read
from its ``metrics.jsonl`` records."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SRC = str(Path(__file__).resolve().parents[2] / "src")
IMAGENET = Path(__file__).parents[1] / "lint" / "corpus" / "dev" / "examples__imagenet_main.py.txt"

LOOP = """
def loader(n):  # each batch takes DATA s to read (a network file system, a JPEG decode)
    for index in range(n):
        time.sleep({data})
        yield index


batch_time = AverageMeter('Time', False, ':6.3f', Summary.NONE)
data_time = AverageMeter('Data', False, ':6.3f', Summary.NONE)
progress = ProgressMeter(12, [batch_time, data_time], prefix="Epoch: [0]")
end = time.time()
for i, batch in enumerate(loader(12)):
    data_time.update(time.time() - end)
    time.sleep({compute})  # forward, backward, optimizer step
    batch_time.update(time.time() - end)
    end = time.time()
    progress.display(i + 1)
"""

TIMED = """
import time
from rgt.smoke import timed_loader

def batches():
    for index in range(12):
        time.sleep(0.03)
        yield index

for batch in timed_loader(batches(), every=4):
    time.sleep(0.003)
print("done", flush=True)
"""


def meters_script(data: float, compute: float) -> str:
    """pytorch/examples' meter classes, as written there, and a loop timed the way its
    ``train()`` times one."""
    text = IMAGENET.read_text()
    tree = ast.parse(text)
    wanted = {"Summary", "AverageMeter", "ProgressMeter"}
    classes = [
        ast.get_source_segment(text, node) or ""
        for node in tree.body
        if isinstance(node, ast.ClassDef) and node.name in wanted
    ]
    head = "import time\nfrom enum import Enum\n\n"
    return head + "\n\n".join(classes) + LOOP.format(data=data, compute=compute)


def smoke(cwd: Path, script: str) -> dict:
    (cwd / "train.py").write_text(script)
    done = subprocess.run(
        [sys.executable, "-m", "rgt.cli", "smoke", "--json", "--", sys.executable, "train.py"],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": SRC},
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.slow  # a CLI smoke run, ~1 s
def test_a_loader_that_sleeps_is_input_bound_in_plain_smoke(tmp_path: Path) -> None:
    out = smoke(tmp_path, meters_script(data=0.03, compute=0.003))
    waits = out["input_wait"]
    assert waits["input_bound"] and waits["wait_pct"] > 70, waits
    assert waits["samples"] == 12
    assert "num_workers" in waits["remedy"] and "local disk" in waits["remedy"]


@pytest.mark.slow  # a CLI smoke run, ~1 s
def test_a_step_that_computes_is_not_input_bound(tmp_path: Path) -> None:
    out = smoke(tmp_path, meters_script(data=0.002, compute=0.03))
    waits = out["input_wait"]
    assert not waits["input_bound"] and waits["wait_pct"] < 30, waits
    assert "remedy" not in waits


@pytest.mark.slow  # a CLI smoke run, ~1 s
def test_timed_loader_records_are_read(tmp_path: Path) -> None:
    out = smoke(tmp_path, TIMED)
    waits = out["input_wait"]
    assert waits["input_bound"] and waits["samples"] == 11, waits  # the first batch is skipped


def test_a_script_that_shows_no_timing_has_no_reading(tmp_path: Path) -> None:
    out = smoke(tmp_path, "print('step 1 loss 0.5')\n")
    assert out["input_wait"] is None


@pytest.mark.slow  # two CLI smoke runs, ~1 s each
@pytest.mark.parametrize("data,bound", [(0.03, "input-bound"), (0.002, "")])
def test_the_human_output_names_the_share(tmp_path: Path, data: float, bound: str) -> None:
    (tmp_path / "train.py").write_text(meters_script(data=data, compute=0.01))
    done = subprocess.run(
        [sys.executable, "-m", "rgt.cli", "smoke", "--", sys.executable, "train.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": SRC, "COLUMNS": "200"},
    )
    assert done.returncode == 0, done.stderr
    line = next(x for x in done.stdout.splitlines() if "data wait:" in x)
    assert "% of step time over 12 batch(es)" in line
    assert ("input-bound" in line) == bool(bound)
