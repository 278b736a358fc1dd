"""Memory cgroups for tests: a child process with a hard memory limit (v1, or v2 with the memory
controller delegated). Tests that need one are skipped where the machine does not allow it."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest


def memory_cgroup(tmp_path: Path, limit_bytes: int = 256 << 20) -> Path:
    """A new memory cgroup under our own with ``limit_bytes`` as its hard limit."""
    candidates = []
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        hier, controllers, rel = line.split(":", 2)
        if "memory" in controllers.split(","):
            v1 = Path("/sys/fs/cgroup/memory") / rel.lstrip("/")
            candidates.append((v1, ("memory.limit_in_bytes", "memory.memsw.limit_in_bytes")))
        elif hier == "0":
            candidates.append((Path("/sys/fs/cgroup") / rel.lstrip("/"), ("memory.max",)))
    for base, limits in candidates:
        cgroup = base / f"rgt-test-{os.getpid()}-{tmp_path.name}"
        try:
            cgroup.mkdir()
        except OSError:
            continue
        if (cgroup / limits[0]).exists():
            for name in limits:
                if (cgroup / name).exists():
                    (cgroup / name).write_text(str(limit_bytes))
            return cgroup
        cgroup.rmdir()
    pytest.skip("cannot create a memory cgroup with a limit here")


def peak_bytes(cgroup: Path) -> int | None:
    """The cgroup's peak memory use so far (v1 ``max_usage_in_bytes``, v2 ``memory.peak``)."""
    for name in ("memory.max_usage_in_bytes", "memory.peak"):
        if (cgroup / name).exists():
            return int((cgroup / name).read_text())
    return None


def in_cgroup(cgroup: Path, argv: list[str]) -> list[str]:
    """``argv`` run inside ``cgroup`` (the shell joins it, then execs the command)."""
    return ["sh", "-c", f'echo $$ > "{cgroup / "cgroup.procs"}" && exec "$0" "$@"', *argv]


def remove_cgroup(cgroup: Path) -> None:
    for pid in (cgroup / "cgroup.procs").read_text().split():
        os.kill(int(pid), signal.SIGKILL)
    deadline = time.monotonic() + 10
    while True:
        try:
            cgroup.rmdir()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
