"""The agent's parts on real files and a real HTTP server: manifest rules, redaction, webhook,
the retry decision table, and a bad spec."""

from __future__ import annotations

import http.server
import json
import os
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest

from rgt.agent import _artifacts, _manifest
from rgt.agent._classify import AttemptFacts, decide
from rgt.agent._record import JobRecorder
from rgt.agent._webhook import NOTIFY_SECRET
from rgt.agent.paths import JobPaths


def test_collect_skips_in_flight_files_agent_files_and_symlinks(tmp_path: Path) -> None:
    (tmp_path / "ckpt" / "sub").mkdir(parents=True)
    (tmp_path / "ckpt" / "sub" / "a.pt").write_bytes(b"a")
    (tmp_path / "ckpt" / ".tmp-b.pt.part").write_bytes(b"partial")
    (tmp_path / "ckpt" / "c.pt.part").write_bytes(b"partial")
    (tmp_path / "outputs").symlink_to("/etc")  # a link to anything: never followed
    (tmp_path / "status.json").write_text("{}")
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "notes.txt").write_text("x")
    paths = JobPaths(str(tmp_path), "j")
    found = _artifacts.collect(paths, ["*", "nothing/*.bin", "../up"])
    assert found.sorted_found() == ["ckpt/sub/a.pt", "work/notes.txt"]
    assert found.missing == ["nothing/*.bin"]
    reasons = {entry["path"]: entry["reason"] for entry in found.skipped}
    assert "not followed" in reasons["outputs"] and "/etc" in reasons["outputs"]
    assert "leaves the job directory" in reasons["../up"]


def test_failed_and_cancelled_states_get_a_manifest_but_no_done(tmp_path: Path) -> None:
    paths = JobPaths(str(tmp_path), "j")
    (tmp_path / "outputs").mkdir()
    (tmp_path / "outputs" / "partial.csv").write_text("1,2\n")
    result = _manifest.finalize(paths, "failed", ["missing/*.pt"])
    assert result.ok and result.files == 1
    assert json.loads(Path(paths.manifest).read_text())["state"] == "failed"
    assert not Path(paths.done).exists()


def test_recorder_redacts_secrets_from_status_and_events(tmp_path: Path) -> None:
    paths = JobPaths(str(tmp_path), "j")
    rec = JobRecorder(paths, ["hf_abcdef123456"])
    rec.update(reason="failed near hf_abcdef123456 in the log")
    rec.event("failed", {"evidence": ["HTTP 401 for token hf_abcdef123456"]}, "fix hf_abcdef123456")
    disk = Path(paths.status).read_text() + Path(paths.events).read_text()
    assert "hf_abcdef123456" not in disk and disk.count("***") == 3


class _Hook(http.server.BaseHTTPRequestHandler):
    received: ClassVar[list[dict]] = []

    def do_POST(self) -> None:
        length = int(self.headers["Content-Length"])
        self.received.append(json.loads(self.rfile.read(length)))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def webhook() -> Iterator[tuple[str, list[dict]]]:
    _Hook.received = []
    server = http.server.HTTPServer(("127.0.0.1", 0), _Hook)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/hook", _Hook.received
    server.shutdown()
    server.server_close()


def test_webhook_hears_retry_and_terminal_events(make_job, webhook) -> None:
    url, received = webhook
    job = make_job().write("import os\nos.kill(os.getpid(), 9)\n")
    job.start(secrets={NOTIFY_SECRET: url})
    assert job.finish() == 1
    assert [event["kind"] for event in received] == ["retrying", "retrying", "failed"]
    assert all(event["job_id"] == "job-1" and "job-1" in event["text"] for event in received)


def test_a_dead_webhook_never_stops_the_job(make_job) -> None:
    job = make_job().write("print('ok')\n")
    job.start(secrets={NOTIFY_SECRET: "http://127.0.0.1:9/nobody-listens"})
    assert job.finish() == 0
    assert job.status()["state"] == "succeeded"
    assert "webhook POST failed" in job.agent_log()


def test_bad_spec_is_recorded_as_failed_with_the_reason(make_job) -> None:
    job = make_job()
    job.dir.mkdir(parents=True)
    Path(job.paths.spec).write_text('{"schema": "rgt.spec/1", "job_id": "job-1", "command": []}')
    job.start()
    assert job.finish() == 1
    assert job.status()["state"] == "failed" and "command" in job.status()["reason"]


KILL, TERM = int(signal.SIGKILL), int(signal.SIGTERM)


@pytest.mark.parametrize(
    ("facts", "label", "retryable"),
    [
        (AttemptFacts(None, KILL, cancel_requested=True), "cancelled", False),
        (AttemptFacts(None, None, boot_id_start="A", boot_id_now="B"), "preempted", True),
        (AttemptFacts(None, KILL, oom_before=3, oom_after=4), "host_oom", False),
        (
            AttemptFacts(1, None, "DataLoader worker (pid 7) is killed", oom_before=0, oom_after=1),
            "host_oom",
            False,
        ),
        (AttemptFacts(None, KILL, oom_before=3, oom_after=3), "preempted", True),
        (AttemptFacts(None, TERM), "preempted", True),
        (AttemptFacts(None, int(signal.SIGHUP)), "preempted", True),
        (AttemptFacts(1, None, "ModuleNotFoundError: No module named 'x'"), "import_error", False),
    ],
)
def test_decision_table(facts: AttemptFacts, label: str, retryable: bool) -> None:
    decision = decide(facts)
    assert (decision.label, decision.retryable) == (label, retryable)
    assert decision.cause


def test_a_kill_the_agent_sent_itself_is_left_to_the_rule_base() -> None:
    external = decide(AttemptFacts(None, KILL, ""))
    own = decide(AttemptFacts(None, KILL, "", agent_sent_signal=True))
    assert "outside the agent" in external.cause
    assert "outside the agent" not in own.cause


def test_env_override_for_boot_id_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from rgt.agent import _system

    real = _system.boot_id()
    assert real == Path(_system.BOOT_ID_FILE).read_text().strip()
    (tmp_path / "boot").write_text("fake-boot\n")
    monkeypatch.setenv("RGT_AGENT_BOOT_ID_FILE", str(tmp_path / "boot"))
    assert _system.boot_id() == "fake-boot" != real
    assert os.path.exists(_system.BOOT_ID_FILE)
