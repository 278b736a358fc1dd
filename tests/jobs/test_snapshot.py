"""Code snapshots: which files, a stable content hash, immutability on the machine."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from rgt.errors import UsageError
from rgt.transport.snapshot import materialize, take_snapshot


def _tree(root: Path, name: str = "train.py") -> None:
    (root / "pkg").mkdir(parents=True)
    (root / name).write_text("print('hi')\n")
    (root / "pkg" / "mod.py").write_text("X = 1\n")
    (root / "run.sh").write_text("#!/bin/sh\necho\n")
    (root / "run.sh").chmod(0o755)
    (root / "data").mkdir()
    (root / "data" / "big.bin").write_bytes(b"\0" * 1000)
    (root / ".venv").mkdir()
    (root / ".venv" / "junk.py").write_text("")
    (root / "__pycache__").mkdir()
    (root / "__pycache__" / "x.pyc").write_bytes(b"1")
    (root / ".rgtignore").write_text("data/\n*.log\n")
    (root / "noise.log").write_text("log")


def test_selection_and_hash(hostile_dir: Path) -> None:
    _tree(hostile_dir, "tráin $(x).py")
    snap = take_snapshot(hostile_dir)
    rels = [f.rel for f in snap.files]
    assert rels == sorted([".rgtignore", "pkg/mod.py", "run.sh", "tráin $(x).py"])
    assert take_snapshot(hostile_dir).digest == snap.digest
    (hostile_dir / "pkg" / "mod.py").write_text("X = 2\n")
    assert take_snapshot(hostile_dir).digest != snap.digest


def test_git_repository_uses_gitignore(tmp_path: Path) -> None:
    _tree(tmp_path)
    (tmp_path / ".gitignore").write_text("pkg/\n")
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    rels = [f.rel for f in take_snapshot(tmp_path).files]
    assert "pkg/mod.py" not in rels and "train.py" in rels and "data/big.bin" not in rels


def test_mode_bit_changes_the_hash(tmp_path: Path) -> None:
    _tree(tmp_path)
    before = take_snapshot(tmp_path).digest
    (tmp_path / "train.py").chmod(0o755)
    assert take_snapshot(tmp_path).digest != before


def test_materialize_is_read_only(tmp_path: Path) -> None:
    _tree(tmp_path / "src")
    snap = take_snapshot(tmp_path / "src")
    dest = tmp_path / "code" / snap.digest
    dest.parent.mkdir()
    materialize(snap, dest)
    assert (dest / "pkg" / "mod.py").read_text() == "X = 1\n"
    assert not os.stat(dest / "train.py").st_mode & 0o222
    assert os.access(dest / "run.sh", os.X_OK)


def test_not_a_directory(tmp_path: Path) -> None:
    with pytest.raises(UsageError):
        take_snapshot(tmp_path / "missing")
