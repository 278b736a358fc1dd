"""A real tmpfs mounted as the notebook's "Google Drive" (root only), unmounted afterwards."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture
def drive_mount(tmp_path: Path) -> Iterator[Path]:
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs as Drive needs root")
    point = tmp_path / "content" / "drive"
    point.mkdir(parents=True)
    proc = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(point)],
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        pytest.skip(f"cannot mount tmpfs here (no CAP_SYS_ADMIN?): {proc.stderr.strip()}")
    try:
        yield point
    finally:
        subprocess.run(["umount", "-l", str(point)], check=True)
