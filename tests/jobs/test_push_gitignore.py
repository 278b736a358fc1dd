"""`rgt push` names what the project's .gitignore kept out of the code snapshot, and a `!PATTERN`
line in .rgtignore takes it back (nanoGPT ignores *.bin and *.pkl: its data files)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.jobs.test_local_lifecycle import rgt


def _nanogpt_like(root: Path, git: bool) -> Path:
    proj = root / "nano gpt ü"
    data = proj / "data" / "shakespeare_char"
    data.mkdir(parents=True)
    (proj / "train.py").write_text("print('train')\n")
    (proj / ".gitignore").write_text("*.bin\n*.pkl\nout*/\n")
    (data / "prepare.py").write_text("print('prepare')\n")
    (data / "train.bin").write_bytes(b"\1" * 3000)
    (data / "val.bin").write_bytes(b"\2" * 300)
    (data / "meta.pkl").write_bytes(b"\3" * 30)
    (proj / "out-shakespeare-char").mkdir()
    (proj / "out-shakespeare-char" / "ckpt.pt").write_bytes(b"\4" * 10)
    (proj / ".venv").mkdir()
    (proj / ".venv" / "x.bin").write_bytes(b"rgt always skips virtual envs")
    if git:
        subprocess.run(["git", "init", "-q", str(proj)], check=True)
    return proj


@pytest.fixture
def machine(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    assert rgt("up", "local", "--name", "box", "--root", str(root)).returncode == 0
    return root


LEFT_OUT = [
    "data/shakespeare_char/meta.pkl",
    "data/shakespeare_char/train.bin",
    "data/shakespeare_char/val.bin",
    "out-shakespeare-char/ckpt.pt",
]


@pytest.mark.parametrize("git", [True, False], ids=["git", "no-git"])
@pytest.mark.slow
def test_push_names_what_gitignore_left_out(tmp_path: Path, machine: Path, git: bool) -> None:
    proj = _nanogpt_like(tmp_path, git)
    proc = rgt("push", "box", "--json", cwd=proj)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert sorted(f["path"] for f in doc["files"]) == [
        ".gitignore",
        "data/shakespeare_char/prepare.py",
        "train.py",
    ]
    left = doc["gitignored"]
    assert (left["count"], left["bytes"], left["first"]) == (4, 3340, LEFT_OUT)
    assert "!PATTERN" in left["include"] and ".rgtignore" in left["include"]

    human = rgt("push", "box", cwd=proj)
    assert human.returncode == 0, human.stderr
    assert "note: .gitignore left 4 file(s) (3,340 bytes) out of the snapshot" in human.stdout
    assert "data/shakespeare_char/train.bin" in human.stdout
    assert "to include them: add a `!PATTERN` line to .rgtignore" in human.stdout


@pytest.mark.slow
def test_a_bang_line_in_rgtignore_takes_the_files_back(tmp_path: Path, machine: Path) -> None:
    proj = _nanogpt_like(tmp_path, git=True)
    (proj / ".rgtignore").write_text("!*.bin\n!*.pkl\n!x.bin\n")
    doc = json.loads(rgt("push", "box", "--json", cwd=proj).stdout)
    pushed = sorted(f["path"] for f in doc["files"])
    assert pushed == sorted(
        [".gitignore", ".rgtignore", "data/shakespeare_char/prepare.py", "train.py", *LEFT_OUT[:3]]
    )
    assert doc["gitignored"]["first"] == ["out-shakespeare-char/ckpt.pt"]
    landed = machine / ".rgt" / "code" / str(doc["snapshot"]) / "data" / "shakespeare_char"
    assert (landed / "train.bin").read_bytes() == b"\1" * 3000
    clean = _nanogpt_like(tmp_path / "clean", git=True)
    (clean / ".gitignore").write_text("")
    nothing = json.loads(rgt("push", "box", "--json", cwd=clean).stdout)["gitignored"]
    assert (nothing["count"], nothing["first"]) == (0, [])
