"""`rgt push NAME PATH` to a local machine through the CLI: rsync's trailing-slash rule."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rgt.lifecycle.machines import register_local
from rgt.state.store import Store

HOSTILE = "d 'q' \"x\" ü $(touch PWNED)"


def push(*args: str, cwd: Path) -> dict[str, object]:
    proc = subprocess.run(
        [sys.executable, "-m", "rgt.cli", "push", "here", *args, "--json"],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=os.environ.copy(),
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    doc: dict[str, object] = json.loads(proc.stdout)
    return doc


@pytest.mark.slow  # > 1 s on two cores
def test_a_folder_lands_under_its_name_and_a_trailing_slash_sends_its_contents(
    tmp_path: Path,
) -> None:
    root = tmp_path / "machine"
    register_local(Store.open(), "here", root)
    project = tmp_path / "proj"
    data = project / HOSTILE
    (data / "sub").mkdir(parents=True)
    (data / "train.txt").write_text("train")
    (data / "sub" / "val.txt").write_text("val")

    named = push(HOSTILE, cwd=project)
    assert sorted(f["path"] for f in named["files"]) == [  # type: ignore[attr-defined]
        f"{HOSTILE}/sub/val.txt",
        f"{HOSTILE}/train.txt",
    ]
    landed = Path(str(named["remote"]))
    assert (landed / HOSTILE / "sub" / "val.txt").read_text() == "val"

    contents = push(f"{HOSTILE}/", "--to", "flat", cwd=project)
    flat = Path(str(contents["remote"]))
    assert flat.name == "flat"
    assert sorted(f["path"] for f in contents["files"]) == ["sub/val.txt", "train.txt"]  # type: ignore[attr-defined]
    assert (flat / "train.txt").read_text() == "train"
    assert (flat / "sub" / "val.txt").read_text() == "val"
    assert not (flat / HOSTILE).exists()
    assert not list(tmp_path.rglob("PWNED"))
