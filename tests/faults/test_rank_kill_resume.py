"""kill -9 of one rank of a sharded FSDP2 torchrun job, at seeded steps, through `rgt run`.

Seven jobs (four of 2 ranks, three of 4 ranks) each take three kills: in attempt a the drawn
rank stops at the drawn step (before that step's save, or right after it returned with its
shard still being written) and the test SIGKILLs it. 21 trials. Every trial must end with: the
attempt labelled retryable (`preempted`: a signal from outside, no OOM evidence), the group
restarted and resumed from the newest step every rank committed (0 committed steps lost: the
step loaded equals the newest manifest on disk and the agent's own choice), and at the end
every rank's per-step losses and the final weights equal an uninterrupted run's.

The figures (RELIABILITY.md) are printed as one JSON line, ``rank-kill tally: {...}``.
They come from the whole draw, ``RGT_FAULTS_FULL=1``. Without it (CI, `bash dev.sh test`) the
test runs two of the draw's jobs (one of 2 ranks, one of 4), 6 trials: the same seeded kills with
the same assertions, a fifth of the CPU (the whole draw alone is a sixth of the suite's CPU).
"""

from __future__ import annotations

import json
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.ckpt._sharded_job import JobRun, Kill, machine, run_job
from tests.faults.harness import rng

pytest.importorskip("torch")

STEPS = 10
KILLS_PER_JOB = 3
ALL_JOBS = (2, 2, 2, 2, 4, 4, 4)  # world size of each job: 21 kills in all
FULL = os.environ.get("RGT_FAULTS_FULL") == "1"
# Job numbers seed the draw: the sample is the whole draw's jobs 3 and 4, which kill ranks 0, 1
# and 3, before a save and while one is written.
JOBS = dict(enumerate(ALL_JOBS)) if FULL else {3: 2, 4: 4}
PARALLEL = 3  # jobs at once: most of a job's time is interpreter starts and retry backoff


def draw(job: int, world: int) -> list[Kill]:
    """Three kills at increasing steps, each of a rank drawn from the group."""
    gen = rng("rank-kill", job)
    steps = sorted(gen.sample(range(2, STEPS), KILLS_PER_JOB))
    return [
        Kill(attempt + 1, step, gen.randrange(world), gen.choice(["step", "save"]))
        for attempt, step in enumerate(steps)
    ]


def tally_job(run: JobRun, reference: JobRun, kills: list[Kill], world: int) -> dict[str, int]:
    ended = run.of("attempt_ended")
    failed = [e["detail"] for e in ended if e["detail"].get("label")]
    resuming = [e["detail"].get("step") for e in run.of("resuming")]
    exact = run.status.get("state") == "succeeded" and run.final == reference.final
    for rank in range(world):
        want = reference.per_step(rank)
        exact = exact and run.per_step(rank) == want
    return {
        "trials": len(kills),
        "retryable": sum(bool(d.get("retryable")) for d in failed),
        "labelled_oom": sum("oom" in str(d.get("label")) for d in failed),
        "resumed": sum(1 for n, _, loaded in run.resumes if n >= 2 and loaded >= 0),
        "lost_committed_steps": sum(newest - loaded for _, newest, loaded in run.resumes),
        "agent_disagrees": sum(
            1 for (_, newest, _), said in zip(run.resumes, resuming, strict=False) if newest != said
        ),
        "inexact_jobs": 0 if exact else 1,
    }


@pytest.mark.early  # ~2 min (the whole draw ~7): started last it would end the run alone
@pytest.mark.timeout(1800)
def test_rank_kills_at_seeded_steps_lose_nothing_and_resume_exactly(tmp_path: Path) -> None:
    where = machine(tmp_path)
    worlds = sorted(set(JOBS.values()))
    with ThreadPoolExecutor(PARALLEL) as pool:
        refs = dict(
            zip(worlds, pool.map(lambda w: run_job(where, w, STEPS, []), worlds), strict=True)
        )
        worlds_run = list(JOBS.values())
        plans = [draw(job, world) for job, world in JOBS.items()]
        runs = list(
            pool.map(
                lambda jp: run_job(where, jp[0], STEPS, jp[1]),
                zip(worlds_run, plans, strict=True),
            )
        )
    rows = [tally_job(r, refs[w], k, w) for r, w, k in zip(runs, worlds_run, plans, strict=True)]
    total = {key: sum(row[key] for row in rows) for key in rows[0]}
    total["killed_rank_0"] = sum(k.rank == 0 for p in plans for k in p)
    total["killed_rank_1"] = sum(k.rank == 1 for p in plans for k in p)
    print("rank-kill tally:", json.dumps(total, sort_keys=True))
    for row, plan in zip(rows, plans, strict=True):
        print("  job:", json.dumps(row, sort_keys=True), [k.spec() for k in plan])
    assert total["trials"] == KILLS_PER_JOB * len(JOBS) >= (20 if FULL else 6)
    assert total["killed_rank_0"] and total["killed_rank_1"], total
    assert total["lost_committed_steps"] == 0 and total["agent_disagrees"] == 0, total
    assert total["labelled_oom"] == 0, total
    assert total["retryable"] == total["resumed"] == total["trials"], total
    assert total["inexact_jobs"] == 0, (total, [r.of("attempt_ended") for r in runs])
