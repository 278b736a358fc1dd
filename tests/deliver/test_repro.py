"""repro --check: a clean git clone rebuilds every figure and document, compared by hash."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from rgt.deliver.figures import build_figure
from rgt.deliver.render import render
from rgt.deliver.runs import stored_run_ids
from rgt.deliver.workspace import Workspace
from tests.deliver.deliver_helpers import add_loss_figure


def _git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True)


@pytest.mark.slow
def test_repro_check_reproduced_then_changed(demo_ws: Workspace) -> None:
    add_loss_figure(demo_ws)
    build_figure(demo_ws, "loss")
    template = demo_ws.root / "report.md.j2"
    template.write_text(f'final loss << metric("{stored_run_ids(demo_ws)[0]}", "val_loss") >>\n')
    render(demo_ws, template, demo_ws.root / "report.md")
    cmd = [sys.executable, "-m", "rgt.cli", "deliver", "repro"]
    assert subprocess.run(cmd, cwd=demo_ws.root, capture_output=True).returncode == 0
    _git(demo_ws.root, "init", "-q")
    _git(demo_ws.root, "-c", "user.name=t", "-c", "user.email=t@t", "add", "-A")
    _git(demo_ws.root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "paper")
    ok = subprocess.run([*cmd, "--check", "--json"], cwd=demo_ws.root, capture_output=True,
                        text=True)  # fmt: skip
    assert ok.returncode == 0, ok.stdout + ok.stderr
    outputs = {o["path"]: o["status"] for o in json.loads(ok.stdout)["outputs"]}
    assert outputs == {
        "figures/loss/loss.png": "REPRODUCED",
        "figures/loss/source_data.csv": "REPRODUCED",
        "figures/loss/loss.provenance.json#digest": "REPRODUCED",
        "report.md": "REPRODUCED",
    }
    (demo_ws.root / "report.md").write_text("final loss 0.1 (retyped by hand)\n")
    changed = subprocess.run([*cmd, "--check", "--json"], cwd=demo_ws.root,
                             capture_output=True, text=True)  # fmt: skip
    assert changed.returncode == 1
    statuses = {o["path"]: o["status"] for o in json.loads(changed.stdout)["outputs"]}
    assert statuses["report.md"] == "CHANGED" and statuses["figures/loss/loss.png"] == "REPRODUCED"
