"""The agent's sentinel on real jobs: a NaN loss, a stalled log, a disk filling a real tmpfs,
an idle GPU on a priced machine (recorded real nvidia-smi output), and the webhook formats."""

from __future__ import annotations

import http.server
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest

from rgt.agent._webhook import NOTIFY_SECRET
from tests.agent.conftest import Job

GOLDEN = Path(__file__).parents[1] / "golden" / "nvidia-smi"
WAIT_FOR_GO = """
import json, math, os, sys, time
{body}
while not os.path.exists(os.path.join(os.environ["RGT_OUTPUT_DIR"], "go")):
    time.sleep(0.05)
"""
FAST = {"RGT_WATCH_PROBE_S": "0.2"}


def _job(make_job: Any, body: str, **spec: Any) -> Job:
    return make_job().write(WAIT_FOR_GO.format(body=body), **spec)


def _wait_event(job: Job, kind: str, timeout: float = 30) -> dict[str, Any]:
    job.wait_for(lambda s: bool(job.events(kind)) or s.get("state") == "failed", timeout)
    events = job.events(kind)
    assert events, f"no {kind} event; events: {[e['kind'] for e in job.events()]}"
    return events[0]


def _finish(job: Job) -> None:
    (job.dir / "outputs" / "go").write_text("")
    assert job.finish() == 0, job.agent_log()


def test_nan_in_the_log(make_job: Any) -> None:
    job = _job(
        make_job, 'print("step 1 loss 0.52", flush=True)\nprint("step 2 loss nan", flush=True)'
    )
    job.start(**FAST)
    event = _wait_event(job, "nan_loss")
    assert event["detail"]["source"] == "log" and event["detail"]["line"] == "step 2 loss nan"
    assert event["detail"]["step"] == 2 and f"rgt cancel {job.paths.job_id}" in event["next"]
    _finish(job)
    assert len(job.events("nan_loss")) == 1  # one event per episode, not one per tick


def test_nan_in_metrics_jsonl(make_job: Any) -> None:
    body = (
        'm = open(os.path.join(os.environ["RGT_OUTPUT_DIR"], "metrics.jsonl"), "a")\n'
        'for step, loss in ((1, 2.0), (2, float("inf"))):\n'
        '    m.write(json.dumps({"step": step, "loss": loss}) + "\\n"); m.flush()'
    )
    job = _job(make_job, body)
    job.start(**FAST)
    event = _wait_event(job, "nan_loss")
    assert event["detail"]["source"] == "metrics.jsonl" and event["detail"]["step"] == 2
    _finish(job)


@pytest.mark.slow  # > 1 s on two cores
def test_a_quiet_live_process_is_a_stalled_log(make_job: Any) -> None:
    job = _job(make_job, 'print("epoch 1 started", flush=True)')
    job.start(RGT_WATCH_STALL_S="1", **FAST)
    event = _wait_event(job, "log_stalled")
    assert event["detail"]["quiet_s"] >= 1 and event["detail"]["pid"] == job.status()["pid"]
    assert "py-spy dump" in event["next"]
    _finish(job)


# srun's lines while the allocation's nodes cannot take the step, as Slurm prints them
# (llnl/smith#688, eth-cscs/DLA-Future#337): printed for as long as the wait lasts.
SRUN_WAITING = (
    "for i in range(8):\n"
    "    print('step', i, 'loss 0.5', flush=True); time.sleep(0.1)\n"
    "go = os.path.join(os.environ['RGT_OUTPUT_DIR'], 'go')\n"
    "print('srun: Job 41 step creation temporarily disabled, retrying (Requested nodes are "
    "busy)', flush=True)\n"
    "while not os.path.exists(go):\n"
    "    print('srun: Job 41 step creation still disabled, retrying (Requested nodes are "
    "busy)', flush=True); time.sleep(0.2)"
)


@pytest.mark.slow  # > 1 s on two cores
def test_srun_waiting_for_its_step_is_a_stall_not_progress(make_job: Any) -> None:
    """The log grows five times a second, but only with srun's retries: no step runs."""
    job = _job(make_job, SRUN_WAITING)
    job.start(RGT_WATCH_STALL_S="2", **FAST)
    event = _wait_event(job, "log_stalled")
    assert "still disabled, retrying" in event["detail"]["srun_waiting"], event
    assert event["detail"]["quiet_s"] >= 2 and "sacct -j" in event["next"], event
    assert "py-spy" not in event["next"]  # no rank started: nothing to dump
    _finish(job)
    assert len(job.events("log_stalled")) == 1


@pytest.fixture
def tmpfs_durable(tmp_path: Path) -> Iterator[Path]:
    point = tmp_path / "small durable disk"
    point.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=5m", "tmpfs", str(point)],
        capture_output=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip("cannot mount tmpfs here")
    try:
        yield point
    finally:
        subprocess.run(["umount", "-l", str(point)], check=False)


def test_a_job_filling_its_disk(make_job: Any, tmpfs_durable: Path) -> None:
    body = (
        'open(os.path.join(os.environ["RGT_CKPT_DIR"], "big.pt"), "wb").write(b"x" * (4700 << 10))'
    )
    job = make_job(durable=tmpfs_durable).write(WAIT_FOR_GO.format(body=body))
    job.start(**FAST)
    event = _wait_event(job, "disk_nearly_full")
    assert event["detail"]["mount"] == str(tmpfs_durable) and event["detail"]["bytes_pct"] >= 90
    assert str(tmpfs_durable) in event["next"] and "deletes nothing" in event["next"]
    _finish(job)
    job.cleanup()


def _replay(tmp_path: Path, csv: str) -> str:
    script = tmp_path / "nvidia-smi"
    script.write_text(
        f"#!{sys.executable}\nimport sys\nsys.stdout.write(open({str(GOLDEN / csv)!r}).read())\n"
    )
    script.chmod(0o755)
    return str(script)


@pytest.mark.slow  # > 1 s on two cores
def test_an_idle_gpu_on_a_priced_machine(make_job: Any, tmp_path: Path) -> None:
    job = _job(make_job, 'print("loading data", flush=True)', env={"RGT_PRICE_PER_HOUR": "2.5"})
    job.start(RGT_NVIDIA_SMI=_replay(tmp_path, "h100-idle.csv"), RGT_WATCH_GPU_IDLE_S="0.5", **FAST)
    event = _wait_event(job, "gpu_idle")
    assert event["detail"]["price_per_hour"] == 2.5 and event["detail"]["util_pct"] == [0.0]
    assert event["detail"]["idle_s"] >= 0.5 and "rgt down" in event["next"]
    _finish(job)


class _Hook(http.server.BaseHTTPRequestHandler):
    received: ClassVar[list[tuple[dict[str, str], bytes]]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.received.append((dict(self.headers), body))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def hook() -> Iterator[tuple[str, list[tuple[dict[str, str], bytes]]]]:
    _Hook.received = []
    server = http.server.HTTPServer(("127.0.0.1", 0), _Hook)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}/rgt-topic", _Hook.received
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("fmt", ["ntfy", "slack"])
def test_webhook_formats(make_job: Any, hook: Any, fmt: str) -> None:
    import json

    url, received = hook
    job = _job(make_job, 'print("loss nan", flush=True)')
    job.start(secrets={NOTIFY_SECRET: f"{fmt}+{url}"}, **FAST)
    _wait_event(job, "nan_loss")
    _finish(job)
    kinds = []
    for headers, body in received:
        if fmt == "ntfy":
            assert headers["Content-Type"].startswith("text/plain") and body.startswith(b"rgt job")
            kinds.append(headers["Title"].split(":")[0].split()[1])
        else:
            doc = json.loads(body)
            assert list(doc) == ["text"]
            kinds.append(doc["text"].split(": ")[1].split(" ")[0])
    assert kinds == ["nan_loss", "succeeded"]
    if fmt == "ntfy":
        assert received[0][0]["Priority"] == "high"
