"""Pagination, an unreachable machine and the cancel guard, through a real uvicorn."""

from __future__ import annotations

import socket
from collections.abc import Callable

import httpx
import pytest

from tests.ui.conftest import UiServer

SLEEPS = "import time\nprint('sleeping', flush=True)\ntime.sleep(600)\n"


def _add_jobs(machine: str, count: int, state: str = "succeeded") -> list[str]:
    from rgt.models import JobSpec, JobState
    from rgt.state.store import Store, utcnow

    store = Store.open()
    ids = []
    for n in range(count):
        spec = JobSpec(
            job_id=f"{machine}-{n:04d}", machine=machine, command=("x",), created=utcnow()
        )
        ids.append(store.add_job(spec, JobState(state)).job_id)
    return ids


def test_pagination_of_120_jobs(ui_server: Callable[..., UiServer], local_box: str) -> None:
    ids = _add_jobs(local_box, 120)
    ui = ui_server(run_patrol=False)
    first = ui.json("/api/jobs")
    assert (first["total"], first["pages"], len(first["items"])) == (120, 3, 50)
    last = ui.json("/api/jobs?page=3")
    assert len(last["items"]) == 20 and last["page"] == 3
    shown = {r["id"] for p in (1, 2, 3) for r in ui.json(f"/api/jobs?page={p}")["items"]}
    assert shown == set(ids)
    page = ui.get("/?page=2").text
    assert "page 2 of 3" in page and page.count('data-testid="job-row"') == 50
    assert 'href="?page=3"' in page and 'href="?page=1"' in page
    assert ui.json("/api/jobs?page=99")["page"] == 3  # clamped, not an error
    assert ui.json("/api/jobs?state=failed")["total"] == 0


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_unreachable_machine_is_not_dead(ui_server: Callable[..., UiServer]) -> None:
    from rgt.models import Machine
    from rgt.state.store import Store, utcnow

    connection = {
        "host": "127.0.0.1",
        "port": _closed_port(),
        "user": "nobody",
        "identity_file": None,
        "ssh_options": [],
        "known_hosts": None,
        "python": "python3",
        "host_key": None,
    }
    machine = Machine("gone", "ssh", "generic-ssh", connection, "/srv", 1.5, utcnow())
    Store.open().add_machine(machine)
    (job_id,) = _add_jobs("gone", 1, state="running")
    ui = ui_server()
    card = ui.wait(
        lambda: (m := ui.json("/api/machines")[0])["reachable"] is False and m,
        what="the patrol to find the machine unreachable",
    )
    assert card["last_good_at"] is None and card["unreachable_since"]
    assert "Connection refused" in card["error"] and card["price_per_hour"] == 1.5
    job = ui.json(f"/api/jobs/{job_id}")
    assert job["state"] == "running" and job["reachable"] is False  # last known, not "dead"
    html = ui.get("/").text
    assert 'data-reachable="false"' in html and 'data-testid="unreachable"' in html
    assert "last good reading" in html


@pytest.mark.slow  # > 1 s on two cores
def test_cancel_needs_header_and_confirm(
    ui_server: Callable[..., UiServer], start_job: Callable[..., str]
) -> None:
    ui = ui_server()
    job_id = start_job(SLEEPS, "sleeps")
    ui.wait(lambda: ui.json(f"/api/jobs/{job_id}")["state"] == "running", what="the job to run")
    url = f"{ui.url}/api/jobs/{job_id}/cancel"
    header = {"X-RGT-Token": ui.token or ""}
    cookie_only = httpx.post(url, json={"confirm": job_id}, cookies={"rgt_ui": ui.token or ""})
    assert cookie_only.status_code == 403  # a cross-site form cannot set the header
    assert httpx.post(url, json={}, headers=header).status_code == 400
    assert httpx.post(url, json={"confirm": "other"}, headers=header).status_code == 400
    assert httpx.get(url, headers=header).status_code == 405
    done = httpx.post(url, json={"confirm": job_id}, headers=header, timeout=60)
    assert done.status_code == 200, done.text
    ui.wait(lambda: ui.json(f"/api/jobs/{job_id}")["state"] == "cancelled", what="cancelled")
    assert (
        httpx.post(
            f"{ui.url}/api/jobs/nope/cancel", json={"confirm": "nope"}, headers=header
        ).status_code
        == 404
    )


def test_sweep_grid_and_reconciliation(ui_server: Callable[..., UiServer], local_box: str) -> None:
    import json

    from rgt.models import JobSpec, JobState
    from rgt.state.store import Store

    store = Store.open()
    cells = [("c-lr1-s0", 0.1, 0, "succeeded"), ("c-lr1-s1", 0.1, 1, "failed")]
    cells += [("c-lr2-s0", 0.2, 0, "running")]
    for cell_id, lr, seed, state in cells:
        env = {
            "RGT_SWEEP": "grid",
            "RGT_CELL_ID": cell_id,
            "RGT_SEED": str(seed),
            "RGT_OVERRIDES": json.dumps({"lr": lr}),
        }
        spec = JobSpec(job_id=f"j-{cell_id}", machine=local_box, command=("x",), env=env)
        store.add_job(spec, JobState(state))
    ui = ui_server(run_patrol=False)
    doc = ui.json("/api/sweeps/grid")
    assert doc["reconciliation"]["counts"]["succeeded"] == 1
    assert doc["reconciliation"]["counts"]["failed"] == 1
    assert doc["reconciliation"]["counts"]["running"] == 1
    assert doc["grid"]["seeds"] == [0, 1]
    assert [r["group"] for r in doc["grid"]["rows"]] == ["lr=0.1", "lr=0.2"]
    assert doc["grid"]["rows"][1]["cells"][1] is None  # lr=0.2 seed 1 never got a job
    page = ui.get("/sweeps/grid").text
    assert page.count('data-testid="sweep-cell"') == 3 and 'data-testid="reconcile-table"' in page


def test_a_released_machine_shows_when_its_stopped_clock_ends(
    ui_server: Callable[..., UiServer],
) -> None:
    """AutoDL deletes a machine left stopped 15 days after it stopped: once rgt released it,
    that clock has a date; a clock of a running machine has none."""
    from datetime import datetime, timedelta, timezone

    from rgt.models import Machine
    from rgt.state.store import Store, utcnow

    store = Store.open()
    store.add_machine(
        Machine("west", "ssh", "autodl", {"host": "127.0.0.1"}, "/root", 2.0, utcnow())
    )
    store.release_machine("west")
    released = datetime.fromisoformat(store.machine("west").released.replace("Z", "+00:00"))
    ui = ui_server()
    (card,) = ui.json("/api/machines")
    assert card["state"] == "released"
    clocks = {c["name"]: c for c in card["clocks"]}
    due = datetime.fromisoformat(clocks["stopped-auto-release"]["ends_at"].replace("Z", "+00:00"))
    assert abs(due - (released + timedelta(days=15))) < timedelta(seconds=1)
    assert due.tzinfo == timezone.utc
    assert clocks["nohup-gateway-kill"]["ends_at"] is None  # runs while the machine runs
    assert clocks["arrears-force-stop"]["ends_at"] is None  # no duration to count
    html = ui.get("/").text
    assert html.count('data-testid="clock-ends"') == 1
    assert f"until {clocks['stopped-auto-release']['ends_at']}" in html
