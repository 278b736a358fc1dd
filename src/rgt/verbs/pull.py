"""``rgt pull``: a job's artifacts here, every sha256 checked and every file load-verified,
with the run-time capture beside them (what the job resolved: seed, determinism flags)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rgt.jobs.pull import PullProgress, PullResult
    from rgt.state.store import Store


@dataclass(frozen=True)
class Pulled:
    result: PullResult
    runtime: dict[str, Any] | None  # only when the pull verified

    def to_json(self) -> dict[str, Any]:
        data = self.result.to_json()
        return {**data, "runtime": self.runtime} if self.result.ok else data


def destination(job_id: str, dest: str | None) -> Path:
    """Where a pull lands: ``dest``, or ./rgt-pulls/JOB_ID; absolute."""
    return (Path(dest) if dest else Path("rgt-pulls") / job_id).absolute()


def pull(store: Store, job_id: str, target: Path, progress: PullProgress | None = None) -> Pulled:
    from rgt.jobs.pull import pull as pull_job
    from rgt.sweep._runtime import fetch as fetch_runtime

    result = pull_job(store, job_id, target, progress=progress)
    runtime = fetch_runtime(store, job_id, target) if result.ok else None
    return Pulled(result, runtime)
