"""Disk, cgroup and progress probes on real files, real tmpfs mounts and this machine."""

from __future__ import annotations

import math
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from rgt.agent.probes import cgroup, disk, progress


@pytest.fixture
def small_tmpfs(tmp_path: Path, hostile_name: str) -> Iterator[Path]:
    point = tmp_path / hostile_name
    point.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=4m,nr_inodes=64", "tmpfs", str(point)],
        capture_output=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount tmpfs here: {mounted.stderr.decode()}")
    try:
        yield point
    finally:
        subprocess.run(["umount", "-l", str(point)], check=False)


def test_disk_bytes_and_inodes_of_a_small_tmpfs(small_tmpfs: Path) -> None:
    empty = disk.usage(str(small_tmpfs / "not yet created" / "ckpt"))
    assert empty["mount"] == str(small_tmpfs) and empty["fstype"] == "tmpfs"
    assert empty["bytes_total"] == 4 << 20 and empty["inodes_total"] == 64
    (small_tmpfs / "big").write_bytes(b"x" * (3 << 20))
    for i in range(40):
        (small_tmpfs / f"f{i}").write_bytes(b"")
    full = disk.usage(str(small_tmpfs))
    assert 70 <= full["bytes_pct"] <= 80 and full["inodes_pct"] >= 60
    assert full["bytes_used"] >= 3 << 20


def test_usage_by_mount_dedupes(tmp_path: Path) -> None:
    readings = disk.usage_by_mount([str(tmp_path), str(tmp_path / "a"), "/dev/shm"])
    assert len({r["mount"] for r in readings}) == len(readings) == 2


def _tree(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)


def test_cgroup_v2_layout(tmp_path: Path) -> None:
    _tree(
        tmp_path,
        {
            "proc": "0::/job.slice\n",
            "fs/job.slice/memory.current": "943718400\n",
            "fs/job.slice/memory.max": "1073741824\n",
            "fs/job.slice/memory.events": "low 0\nhigh 0\nmax 12\noom 2\noom_kill 2\n",
            "fs/job.slice/cpu.max": "400000 100000\n",
        },
    )
    reading = cgroup.memory(mount=str(tmp_path / "fs"), proc_cgroup=str(tmp_path / "proc"))
    assert reading == {
        "version": 2,
        "current_bytes": 943718400,
        "limit_bytes": 1 << 30,
        "oom_kill": 2,
        "pct": 87.9,
    }
    assert cgroup.cpu_quota(str(tmp_path / "fs"), str(tmp_path / "proc")) == 4.0


def test_cgroup_v1_unlimited_and_max(tmp_path: Path) -> None:
    _tree(
        tmp_path,
        {
            "proc": "4:memory:/docker/abc\n3:cpu,cpuacct:/docker/abc\n0::/\n",
            "fs/memory/docker/abc/memory.usage_in_bytes": "5000\n",
            "fs/memory/docker/abc/memory.limit_in_bytes": "9223372036854771712\n",
            "fs/memory/docker/abc/memory.oom_control": "under_oom 0\noom_kill 0\n",
            "fs/cpu,cpuacct/docker/abc/cpu.cfs_quota_us": "-1\n",
            "fs/cpu,cpuacct/docker/abc/cpu.cfs_period_us": "100000\n",
        },
    )
    reading = cgroup.memory(mount=str(tmp_path / "fs"), proc_cgroup=str(tmp_path / "proc"))
    assert reading["version"] == 1 and reading["limit_bytes"] is None and reading["pct"] is None
    assert reading["oom_kill"] == 0
    assert cgroup.cpu_quota(str(tmp_path / "fs"), str(tmp_path / "proc")) is None


def test_this_machine_has_a_readable_memory_cgroup() -> None:
    reading = cgroup.memory()
    if reading["version"] is None:
        pytest.skip("no cgroup memory controller visible here")
    assert reading["current_bytes"] > 0 and isinstance(reading["oom_kill"], int)


@pytest.mark.parametrize(
    "line",
    [
        "step 120 loss nan",
        "Epoch 3 | loss: NaN",
        "{'loss': inf, 'lr': 1e-4}",
        "train_loss=-inf",
        "loss tensor(nan, device='cuda:0')",
    ],
)
def test_nonfinite_loss_lines(line: str) -> None:
    assert progress.scan_lines(line)["nonfinite"] == [line]


@pytest.mark.parametrize(
    "line",
    [
        "step 120 loss 0.4182",
        "nan_count=0 loss 1.2",
        "loss_scale 65536.0 found_inf 0",
        "skipped step: grad norm is nan (amp overflow), loss 2.31",
    ],
)
def test_near_misses_are_finite(line: str) -> None:
    assert progress.scan_lines(line)["nonfinite"] == []


def test_metrics_jsonl_as_the_demo_writes_it(tmp_path: Path) -> None:
    out = tmp_path / "outputs"
    out.mkdir()
    rows = [{"step": 1, "loss": 2.5}, {"step": 2, "loss": 1.25}, {"step": 3, "loss": math.nan}]
    import json

    (out / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    found = progress.latest(str(tmp_path / "no.log"), str(out))
    assert (found["step"], found["loss"], found["nonfinite"], found["source"]) == (
        3,
        "nan",
        1,
        "metrics.jsonl",
    )


def test_read_new_stops_at_the_last_full_line(tmp_path: Path) -> None:
    path = tmp_path / "log"
    path.write_bytes(b"a\nb\npartial")
    text, offset = progress.read_new(str(path), 0)
    assert text == "a\nb\n" and offset == 4
    with path.open("ab") as handle:
        handle.write(b" line\n")
    assert progress.read_new(str(path), offset) == ("partial line\n", os.path.getsize(path))
