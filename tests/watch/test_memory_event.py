"""`memory_near_limit`: a job that fills most of its real cgroup memory limit raises the event
(and is not killed for it: the event is a warning the user can act on before the OOM killer)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.agent.conftest import Job
from tests.cgroups import in_cgroup, memory_cgroup, remove_cgroup

HOLD = """
import time
block = bytearray(225 << 20)          # ~88 % of the 256 MiB limit, touched page by page
for i in range(0, len(block), 4096):
    block[i] = 1
time.sleep(3)
"""


@pytest.mark.slow  # > 1 s on two cores
def test_memory_near_the_cgroup_limit(make_job: Callable[..., Job], tmp_path: Path) -> None:
    cgroup = memory_cgroup(tmp_path, 256 << 20)
    job = make_job().write(HOLD)
    argv = in_cgroup(cgroup, [sys.executable, str(job.pyz), "run", str(job.dir)])
    env = job.env(RGT_WATCH_MEM_PCT="80", RGT_WATCH_PROBE_S="0.2")
    try:
        agent = subprocess.Popen(argv, env=env, start_new_session=True)
        assert agent.wait(timeout=120) == 0, job.agent_log()
    finally:
        remove_cgroup(cgroup)
    events = job.events("memory_near_limit")
    assert len(events) == 1, job.events()
    assert events[0]["detail"]["pct"] >= 80 and events[0]["next"]
    assert job.status()["state"] == "succeeded"
