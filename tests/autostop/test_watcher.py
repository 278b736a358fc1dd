"""The watcher itself: on the oldest Python the agent supports (3.8), the idle trigger with no job
at all, and the webhook that tells a phone why the meter keeps running."""

from __future__ import annotations

import json
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from rgt.agent.build import build_agent
from rgt.autostop import arm
from rgt.autostop.policy import Options
from rgt.state.store import Store
from tests.autostop.helpers import (
    arm as arm_at_terminal,
)
from tests.autostop.helpers import (
    kinds,
    project,
    recorder,
    run_job,
    state,
    stops,
    wait_ended,
    wait_for,
)
from tests.clirun import rgt

PY38 = sorted(Path.home().glob(".pyenv/versions/3.8*/bin/python3.8"))
NO_MONEY = {"price_per_hour": None, "spent_at_arm": 0.0}


@pytest.mark.slow
@pytest.mark.skipif(not PY38, reason="no Python 3.8 under ~/.pyenv")
def test_the_idle_trigger_fires_on_python38_with_no_job(tmp_path: Path, rgt_home: Path) -> None:
    root, record = tmp_path / "root", tmp_path / "STOP"
    up = rgt("up", "local", "--name", "box", "--root", str(root), "--self-stop", recorder(record))
    assert up.returncode == 0, up.stderr
    store = Store.open()
    doc = arm.prepare(store, "box", Options(idle="1s"), NO_MONEY)
    doc["tick_s"] = 0.3
    (root / ".rgt" / "autostop").mkdir(parents=True)
    (root / ".rgt" / "autostop" / "policy.json").write_text(json.dumps(doc))
    agent = build_agent(rgt_home / "agent")
    argv = [str(PY38[-1]), "-S", str(agent), "autostop", str(root / ".rgt")]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    assert len(stops(record)) == 1
    fired = [e for e in _events(root) if e["kind"] == "autostop_fired"]
    assert fired[0]["detail"]["trigger"].startswith("no job and an idle GPU for")


def _events(root: Path) -> list[dict[str, Any]]:
    text = (root / ".rgt" / "autostop" / "events.jsonl").read_text()
    return [json.loads(line) for line in text.splitlines()]


class Hook:
    def __init__(self) -> None:
        self.bodies: list[str] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                outer.bodies.append(self.rfile.read(length).decode())
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture
def hook() -> Iterator[Hook]:
    server = Hook()
    yield server
    server.server.shutdown()


@pytest.mark.slow
def test_the_webhook_hears_why_it_did_not_fire(tmp_path: Path, hook: Hook) -> None:
    root, record = tmp_path / "root", tmp_path / "STOP"
    up = rgt("up", "local", "--name", "box", "--root", str(root), "--self-stop", recorder(record))
    assert up.returncode == 0, up.stderr
    job = run_job(
        "box", project(tmp_path, "open('out.txt', 'w').write('x')\n"), "python3", "train.py"
    )
    assert wait_ended("box", job) == "succeeded"
    (root / ".rgt" / "jobs" / job / "work" / "out.txt").unlink()
    code, seen = arm_at_terminal("box", "--notify", "env:HOOK", env={"HOOK": hook.url})
    assert code == 0, seen
    assert wait_for(lambda: any("autostop_blocked" in b for b in hook.bodies), 30), kinds(root)
    body = json.loads(next(b for b in hook.bodies if "autostop_blocked" in b))
    assert "out.txt is missing" in body["detail"]["reason"] and body["job_id"] == "autostop"
    assert hook.url not in json.dumps(_events(root))  # the URL is a secret: never written
    assert stops(record) == []


@pytest.mark.slow
def test_arming_again_hands_the_watcher_over_with_the_new_webhook(
    tmp_path: Path, hook: Hook
) -> None:
    root, record = tmp_path / "root", tmp_path / "STOP"
    up = rgt("up", "local", "--name", "box", "--root", str(root), "--self-stop", recorder(record))
    assert up.returncode == 0, up.stderr
    job = run_job(
        "box", project(tmp_path, "open('out.txt', 'w').write('x')\n"), "python3", "train.py"
    )
    assert wait_ended("box", job) == "succeeded"
    (root / ".rgt" / "jobs" / job / "work" / "out.txt").unlink()
    assert arm_at_terminal("box")[0] == 0  # no webhook
    first = wait_for(lambda: state(root).get("watcher_pid"), 20)
    assert wait_for(lambda: "autostop_blocked" in kinds(root), 30)
    code, seen = arm_at_terminal("box", "--notify", "env:HOOK", env={"HOOK": hook.url})
    assert code == 0, seen
    assert wait_for(lambda: any("autostop_blocked" in b for b in hook.bodies), 40), kinds(root)
    assert state(root)["watcher_pid"] != first
    assert not (root / ".rgt" / "autostop" / "takeover").exists()
