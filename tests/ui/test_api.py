"""`rgt ui`'s JSON API against a real uvicorn and a real local machine running real jobs."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.ui.conftest import UiServer

RUNS = """
import json, os, pathlib, sys, time
out = pathlib.Path(os.environ["RGT_OUTPUT_DIR"])
with open(out / "metrics.jsonl", "a") as f:
    for step in range(1, 6):
        f.write(json.dumps({"step": step, "loss": 1.0 / step}) + "\\n")
    f.write("not json\\n")
    f.write('{"step": 6, "loss": NaN}\\n')
    f.write('{"step": 7, "loss": Infinity}\\n')
pathlib.Path("go").exists() or time.sleep(0)
while not (pathlib.Path(os.environ["RGT_OUTPUT_DIR"]) / "go").exists():
    time.sleep(0.1)
print("done", flush=True)
"""

FAILS = """
import sys
print("Traceback (most recent call last):", file=sys.stderr)
print('  File "job.py", line 3, in <module>', file=sys.stderr)
print("ModuleNotFoundError: No module named 'definitely_missing_mod'", file=sys.stderr)
sys.exit(1)
"""


def _output_dir(job_id: str) -> Any:
    from rgt.backends import backend_for
    from rgt.state.store import Store

    store = Store.open()
    return backend_for(store, store.job(job_id).machine).job_paths(job_id).output_dir


def _sse_updates(ui: UiServer, found: list[dict[str, Any]], stop: threading.Event) -> None:
    headers = {"X-RGT-Token": ui.token or ""}
    try:
        with httpx.stream("GET", ui.url + "/api/events", headers=headers, timeout=None) as resp:
            event = None
            for line in resp.iter_lines():
                if line.startswith("event: "):
                    event = line[7:]
                elif line.startswith("data: ") and event == "update":
                    found.append(json.loads(line[6:]))
                if stop.is_set():
                    return
    except httpx.HTTPError:
        if not stop.is_set():
            raise


@pytest.mark.slow  # > 1 s on two cores
def test_jobs_run_succeed_and_fail_live(
    ui_server: Callable[..., UiServer], start_job: Callable[..., str]
) -> None:
    """One server, two real jobs side by side (one test: each real job costs seconds)."""
    ui = ui_server()
    updates: list[dict[str, Any]] = []
    stop = threading.Event()
    threading.Thread(target=_sse_updates, args=(ui, updates, stop), daemon=True).start()
    job_id = start_job(RUNS, "runs")
    failing = start_job(FAILS, "fails")
    ui.wait(lambda: _state(ui, job_id) == "running", what="the job to run")
    curves = ui.wait(lambda: _curves(ui, job_id), what="the metrics the patrol fetched")
    assert curves["series"]["loss"]["x"] == [1, 2, 3, 4, 5]
    assert curves["skipped"] == 3
    assert "3 lines skipped" in curves["notes"][0]
    page = ui.get(f"/jobs/{job_id}").text
    assert 'data-testid="curve-note"' in page and 'data-metric="loss"' in page
    (Path(_output_dir(job_id)) / "go").write_text("")
    ui.wait(lambda: _state(ui, job_id) == "succeeded", what="the job to succeed")
    ui.wait(lambda: any(job_id in u["jobs"] for u in updates), what="an SSE update")
    stop.set()
    gate = ui.wait(lambda: ui.json("/api/machines")[0]["gate"], what="the gate")
    checks = {c["name"]: c for c in gate["checks"]}
    assert checks["jobs_ended"]["ok"] and not gate["ok"], gate
    assert not checks["artifacts_pulled"]["ok"]
    assert f"rgt pull {job_id}" in checks["artifacts_pulled"]["fix"]
    assert checks["artifacts_pulled"]["missing"] and checks["approved"]["fix"] == "rgt approve box"
    card = ui.get("/fragments/machines").text
    assert 'data-check="artifacts_pulled" data-ok="false"' in card
    ui.wait(lambda: "done" in ui.json(f"/api/jobs/{job_id}/log?lines=50")["lines"], what="log")
    _failed_shows_label(ui, failing)


def _state(ui: UiServer, job_id: str) -> str:
    return str(ui.json(f"/api/jobs/{job_id}")["state"])


def _curves(ui: UiServer, job_id: str) -> dict[str, Any] | None:
    doc: dict[str, Any] = ui.json(f"/api/jobs/{job_id}/metrics")
    return doc if doc["series"] else None


def _failed_shows_label(ui: UiServer, job_id: str) -> None:
    job = ui.wait(
        lambda: (j := ui.json(f"/api/jobs/{job_id}"))["state"] == "failed" and j["remedy"] and j,
        what="the failure with its remedy",
    )
    assert job["label"] == "import_error"
    row = next(r for r in ui.json("/api/jobs")["items"] if r["id"] == job_id)
    assert row["label"] == "import_error" and row["remedy"]
    page = ui.get(f"/jobs/{job_id}").text
    # The label links to its `rgt explain` entry, served by the UI itself.
    link = '<a href="/explain/import_error" data-testid="explain-link">import_error</a>'
    assert f'data-testid="job-label">{link}<' in page
    entry = ui.get("/explain/import_error")
    assert entry.status_code == 200 and 'data-entry="import_error"' in entry.text
    assert "## Fixes, in order of cost" in entry.text and "rgt explain import_error" in entry.text


@pytest.mark.slow  # > 1 s on two cores
def test_unknown_job_is_404_page_and_json(ui_server: Callable[..., UiServer]) -> None:
    ui = ui_server()
    page = ui.get("/jobs/no-such-job")
    assert page.status_code == 404 and 'data-testid="not-found"' in page.text
    api = ui.get("/api/jobs/no-such-job")
    assert api.status_code == 404 and api.json()["fix"]
    assert ui.get("/machines/nope").status_code == 404
    assert ui.get("/sweeps/nope").status_code == 404
    hostile = ui.get("/explain/%3Cscript%3Ealert(1)%3C%2Fscript%3E")
    assert hostile.status_code == 404 and "<script>alert" not in hostile.text


def test_token_required(ui_server: Callable[..., UiServer]) -> None:
    ui = ui_server()
    assert ui.get("/", token=False).status_code == 403
    assert ui.get("/api/overview", token=False).status_code == 403
    assert ui.get("/api/overview", token=False, params={"token": "wrong"}).status_code == 403
    first = ui.get("/", token=False, params={"token": ui.token})
    assert first.status_code == 200 and "rgt_ui" in first.headers["set-cookie"]
    assert (
        "HttpOnly" in first.headers["set-cookie"]
        and "SameSite=Strict" in first.headers["set-cookie"]
    )
    by_cookie = httpx.get(ui.url + "/api/overview", cookies={"rgt_ui": ui.token or ""})
    assert by_cookie.status_code == 200
