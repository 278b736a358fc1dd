"""The same exact resume of a sharded FSDP2 job, over a real sshd (the ssh backend), with 2
and 4 gloo ranks: ``kill -9`` of a drawn rank at a drawn step; the agent on the far side
calls it ``preempted``, restarts the whole torchrun group, and every rank's per-step losses and
the final weights equal an uninterrupted run's on the same machine."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.ckpt._sharded_job import Kill, machine, run_job
from tests.ckpt.test_sharded_resume import STEPS, assert_exact
from tests.faults.harness import rng
from tests.sshd import SshServer

pytestmark = [pytest.mark.slow, pytest.mark.early]  # torchrun groups, over ssh: ~1 min each

pytest.importorskip("torch")


@pytest.mark.parametrize("world", [2, 4])
def test_a_rank_killed_over_ssh_resumes_the_group_exactly(
    sshd_server: SshServer, tmp_path: Path, world: int
) -> None:
    where = machine(tmp_path, sshd_server.ssh_line)
    reference = run_job(where, world, STEPS, [])
    assert reference.status.get("state") == "succeeded", reference.status
    draw = rng(f"sharded-resume-ssh-{world}")
    kill = Kill(1, draw.randrange(2, STEPS), draw.randrange(world), draw.choice(["step", "save"]))
    run = run_job(where, world, STEPS, [kill])
    assert_exact(run, reference, world)
    ended = run.of("attempt_ended")[0]["detail"]
    assert (ended["label"], ended["retryable"]) == ("preempted", True), ended
    ((attempt, newest, loaded),) = run.resumes
    assert attempt == 2 and loaded == newest  # the newest step every rank committed
