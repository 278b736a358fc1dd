"""`rgt ui` as a user runs it: a real process whose first stdout line is the URL."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from urllib.parse import parse_qs, urlparse

import httpx
import pytest


@pytest.mark.slow
@pytest.mark.parametrize("json_mode", [False, True])
def test_first_line_is_the_url_and_sigterm_stops_it(local_box: str, json_mode: bool) -> None:
    argv = [sys.executable, "-m", "rgt.cli", "ui", "--port", "0", "--interval", "0.5"]
    proc = subprocess.Popen(
        argv + (["--json"] if json_mode else []),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        doc = json.loads(line) if json_mode else {"url": line.strip()}
        url = urlparse(doc["url"])
        token = parse_qs(url.query)["token"][0]
        assert url.scheme == "http" and url.hostname == "127.0.0.1" and url.port
        if json_mode:
            assert (doc["port"], doc["token"]) == (url.port, token)
        page = httpx.get(doc["url"], timeout=30)
        assert page.status_code == 200 and f'data-machine="{local_box}"' in page.text
        bare = httpx.get(f"http://127.0.0.1:{url.port}/api/overview", timeout=30)
        assert bare.status_code == 403
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0, proc.stderr.read() if proc.stderr else ""
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
