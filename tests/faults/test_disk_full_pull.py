"""A full local disk at each step of `rgt pull`: out of bytes or out of inodes (real tmpfs).

The destination lives on a tmpfs sized so the pull runs out exactly at step ``k``: after ``k``
artifacts fit, at the manifest copy, or (inodes) at each directory and file it creates; and
RGT_HOME on a full tmpfs fails the step that records the verdict in state.db. Each trial then
asserts a clear error (never an unhandled OSError), nothing outside the destination touched, no
success claimed and, once the disk is grown (`mount -o remount`), that the same pull resumes to
100 % verified.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.faults.harness import (
    assert_clear_error,
    assert_pulled_exactly,
    assert_untouched,
    rng,
    snapshot,
)
from tests.faults.world import World

PAGE = 4096
# Steps of a pull of the world's job: 9 artifacts, their directories, manifest.json.
BYTE_STEPS = range(10)  # k = number of artifacts that fit; 9 = only manifest.json fails
INODE_STEPS = range(1, 14)  # k = inodes the tmpfs has: its root, dest, 2 dirs, 9 files, manifest

Mount = Callable[[str, int], Path]


def _pages(size: int) -> int:
    return max(1, -(-size // PAGE))


def _sizes(world: World) -> list[int]:
    return [(world.job_dir / rel).stat().st_size for rel in world.files]


def _grow(point: Path, size: str, inodes: int) -> None:
    subprocess.run(
        ["mount", "-o", f"remount,size={size},nr_inodes={inodes}", str(point)], check=True
    )


def _pull_fails_then_resumes(world: World, point: Path, area: Path, home: Path) -> None:
    dest = point / "dest"
    before = snapshot(area, skip=[dest])
    out = world.cli("pull", world.job_id, "--to", str(dest), "--json", RGT_HOME=str(home))
    assert out.code != 0, f"a pull onto a full disk claimed success:\n{out}"
    assert_clear_error(out)
    assert_untouched(before, snapshot(area, skip=[dest]), area)
    _grow(point, "64m", 10_000)
    again = world.cli("pull", world.job_id, "--to", str(dest), "--json", RGT_HOME=str(home))
    assert again.code == 0 and again.doc()["ok"] is True, (
        f"no resume after space was freed:\n{again}"
    )
    assert_pulled_exactly(dest, world.files)


@pytest.mark.parametrize("k", BYTE_STEPS)
def test_pull_out_of_bytes_at_step(fresh: World, small_tmpfs: Mount, k: int) -> None:
    sizes = _sizes(fresh)
    pages = sum(_pages(s) for s in sizes[:k])
    # k artifacts fit; the next one (or manifest.json when k == all) does not.
    slack = rng("pull-bytes", k).randrange(0, PAGE // 2) if k < len(sizes) else 0
    point = small_tmpfs(f"{pages * PAGE + slack}", 10_000)
    _pull_fails_then_resumes(fresh, point, point.parent, fresh.home)


@pytest.mark.parametrize("k", INODE_STEPS)
def test_pull_out_of_inodes_at_step(fresh: World, small_tmpfs: Mount, k: int) -> None:
    point = small_tmpfs("64m", k)
    _pull_fails_then_resumes(fresh, point, point.parent, fresh.home)


@pytest.mark.parametrize("resource", ["bytes", "inodes"])
def test_pull_with_full_rgt_home(fresh: World, small_tmpfs: Mount, resource: str) -> None:
    """Every artifact lands; the verdict cannot be stored (state.db on a full disk)."""
    point = small_tmpfs("8m", 200)
    home = point / "home"
    shutil.copytree(fresh.home, home, ignore=shutil.ignore_patterns("ssh"))
    _fill(point, resource)
    area = fresh.trial_dir(f"home-full-{resource}")
    dest = area / "dest"
    before = snapshot(area, skip=[dest])
    out = fresh.cli("pull", fresh.job_id, "--to", str(dest), "--json", RGT_HOME=str(home))
    assert_untouched(before, snapshot(area, skip=[dest]), area)
    if out.code == 0:  # only if the verdict really was stored
        listed = fresh.cli("down", "box", "--json", RGT_HOME=str(home))
        assert "not pulled" not in listed.stdout, f"pull said ok, the gate has no record:\n{out}"
        assert_pulled_exactly(dest, fresh.files)
        return
    assert_clear_error(out)
    _grow(point, "64m", 10_000)
    again = fresh.cli("pull", fresh.job_id, "--to", str(dest), "--json", RGT_HOME=str(home))
    assert again.code == 0, f"no recovery after space was freed:\n{again}"
    assert_pulled_exactly(dest, fresh.files)


def _fill(point: Path, resource: str) -> None:
    if resource == "inodes":
        spare = point / "spare"
        spare.mkdir()
        for i in range(100_000):
            try:
                (spare / str(i)).touch()
            except OSError:
                return
    fd = os.open(point / "filler", os.O_WRONLY | os.O_CREAT)  # unbuffered: no flush at close
    try:
        while True:
            os.write(fd, b"\0" * 65536)
    except OSError:
        pass
    finally:
        os.close(fd)
