"""Preemption notices from a fake metadata server on 127.0.0.1 (never 169.254.169.254): the
watcher polls the profile's endpoint, records ``preemption_notice``, asks the running job to
checkpoint at once (SIGUSR1 to its agent, forwarded), and runs ``--on-preempt``."""

from __future__ import annotations

import datetime
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from rgt.agent import _preempt
from tests.autostop.helpers import (
    arm,
    events,
    kinds,
    project,
    recorder,
    run_job,
    user_profile,
    wait_for,
)
from tests.autostop.test_spend_cap import TRAIN
from tests.clirun import rgt
from tests.sshd import SshServer

AWS_PATH = "/latest/meta-data/spot/instance-action"
GCP_PATH = "/computeMetadata/v1/instance/preempted"
TOKEN = "imds-session-token"


class Metadata:
    """The instance metadata service, as the clouds document it: AWS answers 404 until an
    action is planned, GCP answers FALSE/TRUE and only with ``Metadata-Flavor: Google``."""

    def __init__(self) -> None:
        self.notice: dict[str, Any] | None = None
        self.requests = 0
        self.imds_v2 = False  # True: AWS answers only with a token from PUT /latest/api/token
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                outer.requests += 1
                status, body = outer.answer(self.path, self.headers)  # case-insensitive
                self.send_response(status)
                self.end_headers()
                self.wfile.write(body.encode())

            def do_PUT(self) -> None:
                ok = self.path == "/latest/api/token" and outer.imds_v2
                self.send_response(200 if ok else 403)
                self.end_headers()
                self.wfile.write(TOKEN.encode() if ok else b"")

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def answer(self, path: str, headers: Any) -> tuple[int, str]:
        if path == GCP_PATH:
            if headers.get("Metadata-Flavor") != "Google":
                return 403, "missing Metadata-Flavor"
            return 200, "TRUE" if self.notice else "FALSE"
        if path == AWS_PATH and self.imds_v2 and headers.get("X-aws-ec2-metadata-token") != TOKEN:
            return 401, ""
        if path == AWS_PATH and self.notice:
            return 200, json.dumps(self.notice)
        return 404, "Not Found"


@pytest.fixture
def metadata() -> Iterator[Metadata]:
    server = Metadata()
    yield server
    server.server.shutdown()


def test_aws_and_gcp_and_azure_answers(metadata: Metadata) -> None:
    aws = {"kind": "aws", "url": metadata.url + AWS_PATH}
    gcp = {"kind": "gcp", "url": metadata.url + GCP_PATH, "headers": {"Metadata-Flavor": "Google"}}
    assert _preempt.poll(aws) is None and _preempt.poll(gcp) is None
    assert _preempt.poll(dict(gcp, headers={})) is None  # 403 without the header
    metadata.notice = {"action": "terminate", "time": "2026-12-06T23:00:00Z"}
    assert _preempt.poll(aws) == {
        "kind": "aws",
        "action": "terminate",
        "time": "2026-12-06T23:00:00Z",
        "raw": json.dumps(metadata.notice),
    }
    assert (_preempt.poll(gcp) or {}).get("action") == "preempt"
    metadata.imds_v2 = True  # IMDSv2: the token is fetched and sent
    assert (_preempt.poll(aws) or {}).get("action") == "terminate"
    azure = {"Events": [{"EventType": "Preempt", "NotBefore": "Sun, 06 Dec 2026 23:00:00 GMT"}]}
    assert (_preempt.parse("azure", json.dumps(azure)) or {})["time"].startswith("Sun")
    assert _preempt.parse("azure", json.dumps({"Events": [{"EventType": "Reboot"}]})) is None
    assert _preempt.poll({"kind": "aws", "url": "http://127.0.0.1:9/x"}) is None  # no service


@pytest.mark.slow
def test_a_notice_checkpoints_the_job_and_shows_in_watch_within_5s(
    rgt_home: Path, tmp_path: Path, sshd_server: SshServer, metadata: Metadata
) -> None:
    root, hook = tmp_path / "root", tmp_path / "PREEMPTED"
    spec = {"kind": "aws", "url": metadata.url + AWS_PATH}
    name = user_profile(
        rgt_home, "spot", [("disk", tmp_path, True)], recorder(tmp_path / "STOP"), spec
    )
    up = rgt("up", name, "--name", "spot1", "--ssh", sshd_server.ssh_line, "--root", str(root))
    assert up.returncode == 0, up.stderr
    job = run_job("spot1", project(tmp_path, TRAIN), "python3", "train.py", "100000", "0.02")
    code, seen = arm("spot1", "--on-preempt", f"touch '{hook}'")
    assert code == 0, seen
    assert wait_for(lambda: metadata.requests >= 2, 20)  # the watcher polls
    log = root / ".rgt" / "jobs" / job / "logs" / "attempt-1.log"
    metadata.notice = {"action": "terminate", "time": "in 120 s"}  # the notice: 2 minutes
    flipped, flipped_at = time.monotonic(), datetime.datetime.now(datetime.timezone.utc)
    shown = wait_for(lambda: _in_watch("preemption_notice"), 30, 0.1)
    assert shown, kinds(root)
    # The latency is the watcher's: from the notice to the event it records, which every
    # `rgt watch` from then on shows (it reads the events file). Timing the test's own polling
    # `rgt watch` processes instead would add their start-up, seconds on a loaded machine.
    (notice,) = [e for e in events(root) if e["kind"] == "preemption_notice"]
    recorded = datetime.datetime.fromisoformat(notice["time"].replace("Z", "+00:00"))
    seen_after = (recorded - flipped_at).total_seconds()
    assert seen_after <= 5.0, f"preemption_notice recorded {seen_after:.1f} s after the notice"
    assert wait_for(lambda: "checkpointed at step" in log.read_text(), 120)
    checkpointed_after = time.monotonic() - flipped
    assert checkpointed_after < 120.0  # within the notice
    assert wait_for(hook.exists, 20)  # --on-preempt ran
    print(f"notice in watch after {seen_after:.2f} s; checkpoint after {checkpointed_after:.2f} s")
    assert kinds(root).count("preemption_notice") == 1
    assert rgt("cancel", job, "--json").returncode == 0


def _in_watch(kind: str) -> bool:
    proc = rgt("watch", "--once", "--json", "--full", "--no-gpu")
    return proc.returncode == 0 and any(
        e.get("kind") == kind for e in json.loads(proc.stdout).get("events") or []
    )
