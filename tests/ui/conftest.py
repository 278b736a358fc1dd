"""Server fixtures of `rgt ui` (the browser tests add theirs in tests/ui/browser/conftest.py).

``ui_server``: a real uvicorn serving ``rgt.ui.app.create_app`` on 127.0.0.1:<free port> in a
thread, over this test's RGT_HOME, with a fast patrol. ``local_box``: a real local machine;
``start_job`` launches a real job on it under the agent.
"""

from __future__ import annotations

import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

TOKEN = "test-token-0123456789"


@dataclass
class UiServer:
    url: str
    token: str | None
    home: Path
    app: Any
    server: Any

    def get(self, path: str, *, token: bool = True, **kwargs: Any) -> httpx.Response:
        headers = {"X-RGT-Token": self.token} if token and self.token else {}
        return httpx.get(self.url + path, headers=headers, timeout=30, **kwargs)

    def json(self, path: str) -> Any:
        response = self.get(path)
        assert response.status_code == 200, (path, response.status_code, response.text[:500])
        return response.json()

    def wait(self, probe: Callable[[], Any], timeout: float = 60, what: str = "") -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = probe()
            if found:
                return found
            time.sleep(0.2)
        raise AssertionError(f"timed out waiting for {what or probe}")


def start_server(home: Path, token: str | None, interval: float = 0.3, **kw: Any) -> UiServer:
    import uvicorn

    from rgt.ui.app import create_app

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    app = create_app(home, token, interval, **kw)
    config = uvicorn.Config(app, log_level="warning", lifespan="on", timeout_graceful_shutdown=1)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    ui = UiServer(f"http://127.0.0.1:{sock.getsockname()[1]}", token, home, app, server)
    ui.wait(lambda: server.started, timeout=30, what="uvicorn to start")
    ui.thread = thread  # type: ignore[attr-defined]
    return ui


@pytest.fixture
def ui_server(rgt_home: Path) -> Iterator[Callable[..., UiServer]]:
    """A factory: ``ui_server(token=..., interval=...)`` starts one; all stop at the end."""
    started: list[UiServer] = []

    def start(token: str | None = TOKEN, interval: float = 0.3, **kw: Any) -> UiServer:
        ui = start_server(rgt_home, token, interval, **kw)
        started.append(ui)
        return ui

    yield start
    for ui in started:
        ui.server.should_exit = True
        ui.thread.join(timeout=10)  # type: ignore[attr-defined]


@pytest.fixture
def local_box(rgt_home: Path, tmp_path: Path) -> str:
    from rgt.lifecycle.machines import register_local
    from rgt.state.store import Store

    register_local(Store.open(), "box", tmp_path / "box root")
    return "box"


@pytest.fixture
def start_job(local_box: str, tmp_path: Path) -> Callable[..., str]:
    """``start_job(source)`` runs ``python job.py`` (``source``) on the local box; its id."""
    from rgt.jobs.launch import LaunchOptions, launch
    from rgt.models import RetryPolicy
    from rgt.state.store import Store

    def start(source: str, name: str = "job") -> str:
        project = tmp_path / f"project-{name}"
        project.mkdir()
        (project / "job.py").write_text(source)
        options = LaunchOptions(
            command=(sys.executable, "job.py"),
            cwd=project,
            retry=RetryPolicy(max_retries=0),
            job_id=f"{local_box}-{name}",
        )
        return launch(Store.open(), local_box, options).job_id

    return start
