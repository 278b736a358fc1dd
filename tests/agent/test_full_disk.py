"""A completely full disk under the job directory must not kill the agent: the job goes on,
and the state lands once space is free again."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.agent.conftest import Job

FILL_THEN_FREE = """
import os, pathlib, time
out = pathlib.Path(os.environ["RGT_OUTPUT_DIR"])
filler = out / "filler.bin"
with open(filler, "wb") as handle:
    try:
        while True:
            handle.write(b"x" * 65536)
            handle.flush()
    except OSError:
        pass
# The disk is full: the agent's heartbeats cannot be written. Keep it so until the agent has
# said so (its log's first page has room for the line), not for a fixed time: under load the
# agent may not run at all for a while.
agent_log = pathlib.Path(os.environ["RGT_JOB_DIR"]) / "agent.log"
deadline = time.monotonic() + 60
while "cannot write" not in agent_log.read_text() and time.monotonic() < deadline:
    time.sleep(0.05)
filler.unlink()
(out / "result.json").write_text('{"ok": true}')
"""


@pytest.mark.slow  # > 1 s on two cores
def test_agent_survives_a_full_disk(
    make_job: Callable[..., Job], small_tmpfs: Callable[[str, int], Path]
) -> None:
    job = make_job(durable=small_tmpfs("2m", 1024)).write(FILL_THEN_FREE)
    job.start()
    assert job.finish(timeout=120) == 0, job.agent_log()
    status = job.status()
    assert status["state"] == "succeeded", status
    log = job.agent_log()
    events = (job.dir / "events.jsonl").read_text()
    assert "cannot write" in log and "writing works again" in log, (log, events)
    assert (job.dir / "DONE").is_file()
