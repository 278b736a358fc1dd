"""MLflow file store (``mlruns/``), read with MLflow's own tracking client (``mlflow-skinny``).

MLflow 3 put the file store in maintenance mode and refuses to open it unless
``MLFLOW_ALLOW_FILE_STORE=true``; years of ``mlruns/`` folders still exist, so the reader sets
that for the duration of the read only. A run killed with SIGKILL (or by the OOM killer) never
reaches ``end_run`` and stays ``RUNNING`` forever; a script that simply exits is closed by
MLflow's atexit hook as ``FINISHED`` even when training stopped early.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from rgt.verify.tracker.record import Point, TrackedRun, coerce, sort_points

_STATUS = {
    "RUNNING": "running",
    "SCHEDULED": "running",
    "FINISHED": "finished",
    "FAILED": "failed",
    "KILLED": "killed",
}
_ALLOW = "MLFLOW_ALLOW_FILE_STORE"


def is_store(path: Path) -> bool:
    """An ``mlruns/`` root: a child folder (an experiment) whose meta.yaml names its artifacts."""
    try:
        children = [c for c in path.iterdir() if c.is_dir()]
    except OSError:
        return False
    for child in children:
        meta = child / "meta.yaml"
        if meta.is_file() and "artifact_location" in meta.read_text("utf-8", errors="replace"):
            return True
    return False


@contextmanager
def _file_store_allowed() -> Iterator[None]:
    before = os.environ.get(_ALLOW)
    os.environ[_ALLOW] = "true"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(_ALLOW, None)
        else:
            os.environ[_ALLOW] = before


def read(root: Path) -> list[TrackedRun]:
    from mlflow.entities import ViewType
    from mlflow.tracking import MlflowClient

    with _file_store_allowed():
        client = MlflowClient(tracking_uri=root.resolve().as_uri())
        experiments = client.search_experiments(view_type=ViewType.ACTIVE_ONLY)
        ids = [e.experiment_id for e in experiments]
        return [_run(client, run, root) for run in _all_runs(client, ids)] if ids else []


def _all_runs(client: Any, experiment_ids: list[str]) -> Iterator[Any]:
    token = None
    while True:
        page = client.search_runs(experiment_ids, max_results=1000, page_token=token)
        yield from page
        token = page.token
        if not token:
            return


def _run(client: Any, run: Any, root: Path) -> TrackedRun:
    info, data = run.info, run.data
    history = {
        key: sort_points(
            [
                Point(m.step, float(m.value), m.timestamp / 1000)
                for m in client.get_metric_history(info.run_id, key)
            ]
        )
        for key in data.metrics
    }
    return TrackedRun(
        source="mlflow",
        run_id=info.run_id,
        name=info.run_name or "",
        status=_STATUS.get(info.status, "unknown"),
        raw_status=info.status,
        path=str(root / info.experiment_id / info.run_id),
        config={key: coerce(value) for key, value in data.params.items()},
        summary={key: float(value) for key, value in data.metrics.items()},
        history=history,
        start_time=info.start_time / 1000 if info.start_time else None,
        end_time=info.end_time / 1000 if info.end_time else None,
    )
