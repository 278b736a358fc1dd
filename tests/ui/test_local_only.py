"""`rgt ui` answers only its own address and changes state only for its own origin, in every
mode, ``--no-token`` included: real HTTP requests against the real server.

- DNS rebinding: a page on evil.example that re-points its name at 127.0.0.1 sends
  ``Host: evil.example:PORT``; it reads nothing (no page, no API, no events, no script).
- Cross-site request forgery: another origin's ``text/plain`` POST (a "simple" request, no
  preflight, no custom header) cancels nothing; neither does a POST that says no origin at all
  when there is no token. A plain browser on this machine (its fetch says ``Origin``) still
  cancels.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from urllib.parse import urlparse

import httpx
import pytest

from tests.ui.conftest import UiServer

SLEEPS = "import time\nprint('sleeping', flush=True)\ntime.sleep(600)\n"
READS = ("/", "/api/overview", "/api/machines", "/api/jobs", "/fragments/machines",
         "/static/app.js", "/machines/box")  # fmt: skip


def port_of(ui: UiServer) -> int:
    port = urlparse(ui.url).port
    assert port is not None
    return port


def get(ui: UiServer, path: str, host: str) -> httpx.Response:
    return httpx.get(ui.url + path, headers={"Host": host}, timeout=30)


@pytest.mark.slow
@pytest.mark.parametrize("token", [None, "test-token-0123456789"], ids=["no-token", "token"])
def test_a_foreign_host_reads_nothing(
    ui_server: Callable[..., UiServer], local_box: str, token: str | None
) -> None:
    ui = ui_server(token=token)
    port = port_of(ui)
    query = f"?token={token}" if token else ""
    for host in (
        f"evil.example:{port}",
        "evil.example",
        f"127.0.0.1:{port + 1}",
        f"10.0.0.1:{port}",
    ):
        for path in READS:
            answer = get(ui, path + query, host)
            assert answer.status_code == 403, (host, path)
            assert local_box not in answer.text and "Host" in answer.json()["error"]
    events = get(ui, "/api/events" + query, f"evil.example:{port}")
    assert events.status_code == 403
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}", f"LOCALHOST:{port}"):
        page = get(ui, "/" + query, host)
        assert page.status_code == 200 and f'data-machine="{local_box}"' in page.text, host


def cancel(ui: UiServer, job_id: str, headers: dict[str, str], body: str) -> httpx.Response:
    url = f"{ui.url}/api/jobs/{job_id}/cancel"
    return httpx.post(url, content=body.encode(), headers=headers, timeout=60)


@pytest.mark.slow
def test_no_token_a_cross_origin_post_cancels_nothing_a_browser_still_does(
    ui_server: Callable[..., UiServer], start_job: Callable[..., str]
) -> None:
    ui = ui_server(token=None)
    job_id = start_job(SLEEPS, "sleeps")
    ui.wait(lambda: ui.json(f"/api/jobs/{job_id}")["state"] == "running", what="the job to run")
    body = json.dumps({"confirm": job_id})
    plain = {"Content-Type": "text/plain"}
    here = f"http://127.0.0.1:{port_of(ui)}"
    refused = [
        {**plain, "Origin": "http://evil.example"},  # the attack as a browser sends it
        {**plain, "Origin": "null"},  # a sandboxed frame, a file:// page
        {**plain, "Sec-Fetch-Site": "cross-site"},  # a browser that sends no Origin
        {"Content-Type": "application/json", "Origin": f"http://evil.example:{port_of(ui)}"},
        {"Content-Type": "application/json"},  # no origin at all, and no token to show
        {"Content-Type": "application/json", "Sec-Fetch-Site": "same-site"},
    ]
    for headers in refused:
        answer = cancel(ui, job_id, headers, body)
        assert answer.status_code == 403, (headers, answer.text)
        assert answer.json()["fix"]
    rebound = cancel(ui, job_id, {**plain, "Origin": here, "Host": "evil.example"}, body)
    assert rebound.status_code == 403
    assert cancel(ui, job_id, {**plain, "Origin": here}, body).status_code == 415
    time.sleep(1.0)  # a cancel would have reached the agent by now
    assert ui.json(f"/api/jobs/{job_id}")["state"] == "running"
    browser = {"Content-Type": "application/json", "Origin": here, "Sec-Fetch-Site": "same-origin"}
    done = cancel(ui, job_id, browser, body)
    assert done.status_code == 200, done.text
    ui.wait(lambda: ui.json(f"/api/jobs/{job_id}")["state"] == "cancelled", what="cancelled")


def test_with_a_token_the_origin_is_checked_too(ui_server: Callable[..., UiServer]) -> None:
    ui = ui_server()
    port = port_of(ui)
    token = {"X-RGT-Token": ui.token or "", "Content-Type": "application/json"}
    body = json.dumps({"confirm": "nope"})
    evil = cancel(ui, "nope", {**token, "Origin": "http://evil.example"}, body)
    assert evil.status_code == 403
    # Past the gates (the job is unknown): a tool with the token and no Origin, and a browser.
    assert cancel(ui, "nope", token, body).status_code == 404
    here = {**token, "Origin": f"http://localhost:{port}"}
    assert cancel(ui, "nope", here, body).status_code == 404


@pytest.mark.slow
def test_rgt_ui_no_token_refuses_a_rebound_host(local_box: str) -> None:
    argv = [sys.executable, "-m", "rgt.cli", "ui", "--port", "0", "--no-token"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    try:
        url = (proc.stdout.readline() if proc.stdout else "").strip()
        port = urlparse(url).port
        page = httpx.get(url, timeout=30)
        assert page.status_code == 200 and f'data-machine="{local_box}"' in page.text
        rebound = httpx.get(url, headers={"Host": f"evil.example:{port}"}, timeout=30)
        assert rebound.status_code == 403 and local_box not in rebound.text
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
