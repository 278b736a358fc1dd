"""`rgt explain` through the real CLI, and the links from `rgt triage` and `rgt lint`."""

from __future__ import annotations

import json
from pathlib import Path

from tests.clirun import rgt

OOM_LOG = (
    "Traceback (most recent call last):\n"
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 79.1 GiB total"
    " capacity; 77.0 GiB already allocated; 1.2 GiB free; 77.5 GiB reserved in total by PyTorch)\n"
)


def test_explain_a_label_prints_its_markdown_when_piped() -> None:
    proc = rgt("explain", "cuda_oom")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("# CUDA out of memory")
    assert "## Fixes, in order of cost" in proc.stdout and "## Sources" in proc.stdout
    assert "\x1b[" not in proc.stdout  # plain text, no terminal codes, when not a terminal


def test_explain_json_has_the_documented_fields() -> None:
    doc = json.loads(rgt("explain", "rgt301", "--json").stdout)
    assert {"id", "kind", "title", "sources", "body"} <= set(doc)
    assert (doc["id"], doc["kind"]) == ("RGT301", "lint") and doc["sources"]


def test_list_json_counts_every_entry() -> None:
    doc = json.loads(rgt("explain", "--list", "--json").stdout)
    assert doc["count"] == len(doc["entries"]) >= 60
    assert {"id", "kind", "title"} == set(doc["entries"][0])
    assert "oom-ladder" in {e["id"] for e in doc["entries"]}


def test_an_unknown_topic_exits_2_with_the_closest_ids() -> None:
    proc = rgt("explain", "cuda_om", "--json")
    assert proc.returncode == 2
    doc = json.loads(proc.stdout)
    assert doc["suggestions"][0] == "cuda_oom" and "rgt explain cuda_oom" in doc["fix"]
    human = rgt("explain", "nan-loss-spike")
    assert human.returncode == 2 and "fix: try: rgt explain" in human.stderr


def test_triage_links_its_label_to_the_entry(tmp_path: Path) -> None:
    log = tmp_path / "job.log"
    log.write_text(OOM_LOG)
    doc = json.loads(rgt("triage", str(log), "--json").stdout)
    assert doc["label"] == "cuda_oom" and doc["explain_entry"] == "rgt explain cuda_oom"
    assert rgt(*doc["explain_entry"].split()[1:]).returncode == 0
    assert "read:      rgt explain cuda_oom" in rgt("triage", str(log)).stdout


def test_lint_links_each_finding_to_its_code(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(
        "import torch.nn as nn\nimport torch.nn.functional as F\n"
        "criterion = nn.CrossEntropyLoss()\n"
        "def step(model, x, y):\n    return criterion(F.softmax(model(x), dim=1), y)\n"
    )
    doc = json.loads(rgt("lint", str(script), "--json").stdout)
    (finding,) = doc["findings"]
    assert finding["explain"] == "rgt explain RGT101"
    assert "(rgt explain RGT101)" in rgt("lint", str(script)).stdout


def test_at_a_terminal_the_entry_is_rendered_markdown_and_nothing_is_cut() -> None:
    import os
    import pty
    import subprocess
    import sys

    leader, follower = pty.openpty()
    env = {**os.environ, "COLUMNS": "80", "TERM": "xterm"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "rgt.cli", "explain", "RGT301"],
        stdout=follower, stderr=follower, stdin=subprocess.DEVNULL, env=env,
    )  # fmt: skip
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(leader)
    text = b"".join(chunks).decode()
    assert proc.wait(timeout=60) == 0
    assert "\x1b[" in text and "## Symptom" not in text  # rendered, not the raw Markdown
    assert "reseeding" in text and "per worker)" in text  # a long list item wraps, never cut
