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
time.sleep(2.0)        # the disk is full: the agent's heartbeats cannot be written
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
    assert "cannot write" in log and "writing works again" in log
    assert (job.dir / "DONE").is_file()
