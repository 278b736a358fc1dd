"""`rgt demo`: the whole lifecycle on this machine, with a real kill -9 in the middle.

smoke (with its resume check) → run detached under the agent → kill -9 of the training process
after a checkpoint → the agent classifies the kill as retryable and resumes → the job finishes →
the gate refuses (nothing pulled) → pull with hashes and load-verification → the gate now only
lacks a human's approval → the final weights are compared with an uninterrupted run's.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from rgt.config import rgt_home
from rgt.errors import GateRefused, UsageError
from rgt.smoke.job import SmokeRun, run_once
from rgt.state.store import Store

STEP_RE = re.compile(rb"^step (\d+) ", re.MULTILINE)
Say = Callable[[str], None]


@dataclass
class DemoReport:
    workspace: str
    machine: str = ""
    job_id: str = ""
    phases: dict[str, float] = field(default_factory=dict)
    smoke: dict[str, Any] = field(default_factory=dict)
    kill: dict[str, Any] = field(default_factory=dict)
    job: dict[str, Any] = field(default_factory=dict)
    gate_before_pull: dict[str, Any] = field(default_factory=dict)
    pull: dict[str, Any] = field(default_factory=dict)
    gate_after_pull: dict[str, Any] = field(default_factory=dict)
    steps_lost: int | None = None
    exact_resume: bool = False
    reference_digest: str | None = None
    reference: dict[str, Any] = field(default_factory=dict)  # the uninterrupted run
    final_digest: str | None = None
    compare: dict[str, Any] = field(default_factory=dict)
    delivery: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


def example_script() -> Path:
    """The demo trains ``examples/train_demo.py`` of this source checkout."""
    candidate = Path(__file__).resolve().parents[3] / "examples" / "train_demo.py"
    if not candidate.is_file():
        raise UsageError(
            "rgt demo needs the examples/ folder of a source checkout",
            fix="run it from a clone: `bash dev.sh demo`",
        )
    return candidate


class _Phase:
    def __init__(self, report: DemoReport, name: str, say: Say) -> None:
        self.report, self.name, self.say = report, name, say

    def __enter__(self) -> None:
        self.say(f"[bold cyan]▶ {self.name}[/]")
        self.start = time.monotonic()

    def __exit__(self, *exc: object) -> None:
        self.report.phases[self.name] = round(time.monotonic() - self.start, 2)


def run_demo(say: Say, steps: int = 120) -> DemoReport:
    from rgt.smoke.job import smoke

    stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    workspace = rgt_home() / "demo" / stamp
    project = workspace / "project"
    project.mkdir(parents=True)
    shutil.copy2(example_script(), project / "train_demo.py")
    report = DemoReport(workspace=str(workspace), machine=f"demo-{stamp[-6:]}")
    command = (sys.executable, "train_demo.py", "--steps", str(steps), "--ckpt-every", "10")
    store = Store.open()

    with _Phase(report, "smoke", say):
        result = smoke(command, project)
        report.smoke = {
            "ok": result.ok,
            "exact_resume": result.exact_resume,
            "reason": result.reason,
        }
        say(f"  smoke: {'ok' if result.ok else 'FAILED'} — {result.reason}")
        if not result.ok:
            return report
    reference: list[SmokeRun | Exception] = []

    def run_reference() -> None:
        try:
            ckpt = workspace / "reference" / "ckpt"
            env = {"RGT_SMOKE": "0"}
            reference.append(
                run_once(command, project, ckpt, kill_after_save=None, timeout=900, extra_env=env)
            )
        except Exception as exc:  # reported in the demo's result
            reference.append(exc)

    ref_thread = threading.Thread(target=run_reference, daemon=True)
    with _Phase(report, "run + kill -9 + resume", say):
        ref_thread.start()
        _run_with_kill(store, report, project, command, say)
    with _Phase(report, "gate before pull", say):
        report.gate_before_pull = _gate(store, report.machine)
        say(f"  gate: refused — {'; '.join(report.gate_before_pull['reasons'])}")
    with _Phase(report, "pull + verify", say):
        _pull(store, report, workspace, say)
    with _Phase(report, "gate after pull", say):
        report.gate_after_pull = _gate(store, report.machine)
        say(f"  gate: {'; '.join(report.gate_after_pull['reasons'])}")
        say(
            f"  to release it a human runs: rgt approve {report.machine} && "
            f"rgt down {report.machine}"
        )
    with _Phase(report, "compare with an uninterrupted run", say):
        ref_thread.join()
        _compare(report, reference[0] if reference else None)
    _verify_and_deliver(report, workspace, say)
    return report


def _compare(report: DemoReport, ref: SmokeRun | Exception | None) -> None:
    """exact_resume, and when it is false, why (``report.reference``)."""
    if not isinstance(ref, SmokeRun):
        report.reference = {"error": str(ref) if ref else "the uninterrupted run did not end"}
        return
    report.reference_digest = ref.state_digest
    report.exact_resume = bool(ref.state_digest and ref.state_digest == report.final_digest)
    report.reference = {"returncode": ref.returncode, "step": ref.step}
    if not report.exact_resume:
        report.reference["log_tail"] = ref.log_tail[-1500:]


def _verify_and_deliver(report: DemoReport, workspace: Path, say: Say) -> None:
    from rgt.demo import _evidence as evidence

    with _Phase(report, "train 3 seeds x 2 variants", say):
        groups = evidence.train_variants(example_script(), workspace / "variants", steps=40)
    with _Phase(report, "verify compare", say):
        report.compare = evidence.compare_variants(groups)
        say(
            f"  lr 1e-3 vs 3e-3 on val_accuracy: {report.compare['verdict']} — "
            f"{report.compare.get('explanation', '')}"
        )
    with _Phase(report, "deliver: record, figure, report, gate", say):
        report.delivery = evidence.build_delivery(
            workspace, groups, workspace / "pulled" / "outputs", report.compare
        )
        say(
            f"  {report.delivery['runs']} runs recorded; figure {report.delivery['figure']}; "
            f"report {report.delivery['report']}"
        )


def _run_with_kill(
    store: Store, report: DemoReport, project: Path, command: tuple[str, ...], say: Say
) -> None:
    from rgt.backends import backend_for
    from rgt.ckpt import Checkpointer
    from rgt.jobs.launch import LaunchOptions, launch, wait
    from rgt.lifecycle.machines import register_local

    register_local(store, report.machine, Path(report.workspace) / "machine")
    record = launch(
        store, report.machine, LaunchOptions(command=command, cwd=project, env={"RGT_SMOKE": "0"})
    )
    report.job_id = record.job_id
    say(f"  launched {record.job_id} detached under the agent")
    backend = backend_for(store, report.machine)
    job = backend.job_paths(record.job_id)
    ckpt = Checkpointer(job.ckpt_dir)
    status = _wait_for(lambda: _ready_to_kill(store, record.job_id, ckpt), timeout=300)
    log = backend.log(record.job_id, 1)
    at_kill = max((int(m) for m in STEP_RE.findall(log)), default=0)
    saved = ckpt.latest_info()
    os.kill(int(status["pid"]), signal.SIGKILL)
    report.kill = {
        "pid": status["pid"],
        "step_at_kill": at_kill,
        "checkpoint_step": saved.step if saved else None,
    }
    say(
        f"  kill -9 of the training process (pid {status['pid']}) at step {at_kill}, "
        f"last checkpoint step {report.kill['checkpoint_step']}"
    )
    final = wait(store, record.job_id, poll=0.5)
    report.job = {k: final.get(k) for k in ("state", "attempt", "label", "reason")}
    ended = [e for e in backend.events(record.job_id) if e.get("kind") == "attempt_ended"]
    report.job["interrupted_label"] = ended[0]["detail"].get("label") if ended else None
    resumed_from = _resume_step(backend.log(record.job_id, 2))
    report.steps_lost = at_kill - resumed_from if resumed_from is not None else None
    say(
        f"  job {final['state']} after {final.get('attempt')} attempt(s); "
        f"resumed from step {resumed_from}"
    )


def _ready_to_kill(store: Store, job_id: str, ckpt: Any) -> dict[str, Any] | None:
    from rgt.jobs.launch import refresh

    info = ckpt.latest_info()
    if info is None or info.step < 20:
        return None
    status = refresh(store, job_id)  # the one status path (rgt.status), as `rgt status`
    return status if status.get("state") == "running" and status.get("pid") else None


def _resume_step(log: bytes) -> int | None:
    match = re.search(rb"resum\w* (?:from )?(?:checkpoint )?(?:at )?step (\d+)", log)
    if match:
        return int(match.group(1))
    steps = [int(m) for m in STEP_RE.findall(log)]
    return min(steps) - 1 if steps else None


def _wait_for(probe: Callable[[], dict[str, Any] | None], timeout: float) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = probe()
        if found:
            return found
        time.sleep(0.2)
    raise TimeoutError("the demo job never reached a checkpoint")


def _gate(store: Store, machine: str) -> dict[str, Any]:
    from rgt.lifecycle.teardown import teardown

    try:
        gate: dict[str, Any] = teardown(store, machine, check_only=True)["gate"]
        return gate
    except GateRefused as refused:
        return refused.verdict or {"reasons": refused.reasons}


def _pull(store: Store, report: DemoReport, workspace: Path, say: Say) -> None:
    from rgt.ckpt import Checkpointer
    from rgt.jobs.pull import pull

    dest = workspace / "pulled"
    result = pull(store, report.job_id, dest)
    report.pull = {
        "files": len(result.report.get("files", [])),
        "bytes": result.bytes,
        "ok": result.ok,
        "dest": result.dest,
    }
    say(
        f"  pulled {report.pull['files']} file(s), {result.bytes} bytes, sha256 + load-verify: "
        f"{'100 % OK' if result.ok else 'FAILED'}"
    )
    info = Checkpointer(str(dest / "ckpt")).latest_info()
    report.final_digest = info.state_digest if info else None
