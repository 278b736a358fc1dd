"""The `--notify` webhook URL is a bearer secret: read from an env var, the credentials file or
stdin; sent to the agent over stdin; never in argv, spec.json, the state DB, logs or events;
re-sent by `rgt resume`. A real job notifies a real HTTP server started here."""

from __future__ import annotations

import contextlib
import http.server
import json
import os
import secrets
import signal
import sys
import threading
import time
from collections.abc import Iterator
from io import StringIO
from pathlib import Path
from typing import ClassVar

import pytest

from rgt.errors import UsageError
from rgt.jobs.notify import resolve
from tests.clirun import rgt

JOB = """
import json, os, sys, time
print(json.dumps(dict(os.environ), sort_keys=True), flush=True)  # a job that dumps its env
if os.environ["RGT_ATTEMPT"] == "1":
    time.sleep(float(sys.argv[1]))
open(os.path.join(os.environ["RGT_OUTPUT_DIR"], "done.txt"), "w").write("ok")
"""


class _Hook(http.server.BaseHTTPRequestHandler):
    received: ClassVar[list[tuple[str, dict]]] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.received.append((self.path, body))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def hook() -> Iterator[tuple[str, str, list[tuple[str, dict]]]]:
    """A Slack-style hook whose URL carries its bearer token in the path."""
    _Hook.received = []
    server = http.server.HTTPServer(("127.0.0.1", 0), _Hook)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    token = "T0KEN" + secrets.token_hex(12)
    yield f"http://127.0.0.1:{server.server_port}/services/{token}", token, _Hook.received
    server.shutdown()
    server.server_close()
    thread.join(timeout=10)


def _wait(predicate: object, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.2)


def _no_token_anywhere(token: str, *roots: Path, skip: tuple[Path, ...] = ()) -> int:
    checked = 0
    for root in roots:
        for path in root.rglob("*"):
            if path.is_file() and not path.is_symlink() and path not in skip:
                assert token.encode() not in path.read_bytes(), f"webhook token leaked into {path}"
                checked += 1
    return checked


def _argv_of_every_process() -> bytes:
    found = b""
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):  # exited, or not ours to read
                found += (entry / "cmdline").read_bytes() + b"\n"
    return found


@pytest.mark.slow
def test_webhook_url_is_a_secret_end_to_end(
    tmp_path: Path, rgt_home: Path, hook: tuple[str, str, list[tuple[str, dict]]]
) -> None:
    url, token, received = hook
    project = tmp_path / "proj"
    project.mkdir()
    (project / "job.py").write_text(JOB)
    root = tmp_path / "durable"
    assert rgt("up", "local", "--name", "box", "--root", str(root)).returncode == 0
    literal = rgt("run", "box", "--notify", url, "--json", "--", "true", cwd=project)
    assert literal.returncode == 2 and "bearer secret" in literal.stdout
    run = rgt(
        "run", "box", "--probe-seconds", "1", "--notify", "env:HOOK", "--json", "--",
        sys.executable, "job.py", "30",
        env={"HOOK": url}, cwd=project,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    job_id = json.loads(run.stdout)["job_id"]
    spec = json.loads((root / ".rgt" / "jobs" / job_id / "spec.json").read_text())
    assert spec["notify"] == "env:HOOK" and "notify_url" not in spec
    # The agent runs the job now: no process's argv holds the URL, and the job's environment
    # does not either (it is dumped to the job's log, checked below) although on this local
    # backend the agent inherited $HOOK from `rgt run`.
    status_file = root / ".rgt" / "jobs" / job_id / "status.json"
    _wait(lambda: json.loads(status_file.read_text() or "{}").get("state") == "running")
    assert token.encode() not in _argv_of_every_process()
    # Lose the agent; `rgt resume` re-sends the URL from the recorded source.
    agent_pid = int(json.loads(status_file.read_text())["agent_pid"])
    os.kill(agent_pid, signal.SIGKILL)
    resumed = rgt("resume", job_id, "--json", env={"HOOK": url})
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout)["resumed"] is True
    _wait(lambda: any(body.get("kind") == "succeeded" for _, body in received))
    assert {path for path, _ in received} == {f"/services/{token}"}
    assert rgt("watch", job_id, "--json", "--interval", "0.3").returncode == 0
    for verb in (("status", "--json"), ("logs", job_id), ("watch", job_id, "--once", "--json")):
        shown = rgt(*verb)
        assert token not in shown.stdout + shown.stderr, verb
    assert rgt("pull", job_id, "--to", str(tmp_path / "pulled")).returncode == 0
    assert _no_token_anywhere(token, rgt_home, root, tmp_path / "pulled", project) > 10


def test_sources_and_the_credentials_file(rgt_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = "https://hooks.slack.com/services/T000/B000/XXXXSECRET"
    monkeypatch.setenv("HOOK", url)
    assert resolve("env:HOOK").url == url and resolve("env:HOOK").source == "env:HOOK"
    assert "XXXXSECRET" not in repr(resolve("env:HOOK"))
    assert resolve("-", StringIO(url + "\n")).source == "stdin"
    for bad in (url, "slack+" + url, "env:NOPE", "env:A B", "file:/x", "-"):
        with pytest.raises(UsageError):
            resolve(bad, StringIO("not a url\n"))
    credentials = rgt_home / "credentials.toml"
    credentials.write_text(f'[notify]\nslack = "{url}"\n')
    credentials.chmod(0o644)
    with pytest.raises(UsageError, match="readable by others"):
        resolve("credentials:slack")
    credentials.chmod(0o600)
    assert resolve("credentials:slack").url == url
    with pytest.raises(UsageError, match="no \\[notify\\] other"):
        resolve("credentials:other")
