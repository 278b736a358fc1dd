"""The supervisor: run attempts of one job until it succeeds, is cancelled, or must stop.

Every ended attempt is classified before anything is retried (``_classify``); retries reuse
the same spec, environment and code snapshot, and the job itself resumes from its newest
checkpoint (``RGT_CKPT_DIR``). A terminal state always gets a verified manifest; DONE only on
success. The supervisor keeps nothing in memory that status.json does not also hold, so an
agent started after a crash or a host restart continues where the last one stopped.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from typing import Any, Dict, List, Optional, Tuple

from rgt.agent import _autostop, _durable, _manifest, _resume, _system, _webhook, jobfiles
from rgt.agent._attempt import AttemptRunner
from rgt.agent._classify import REMEDY_PREEMPTED, Decision
from rgt.agent._record import JobRecorder, log, previous_status
from rgt.agent.paths import JobPaths

# How long a job that ended waits for a full disk to take its manifest and terminal status
# (the user may be freeing space) before it is failed as disk_full. RGT_AGENT_TERMINAL_WAIT_S
# overrides it (tests use seconds).
TERMINAL_WRITE_WAIT_S = 600.0
REMEDY_DISK_FULL = (
    "free space (or inodes: `df -i`) on the machine's durable disk, then run the job again; "
    "`rgt audit NAME` shows every tier's free bytes and inodes"
)
DISK_REFUSED = "the disk refused"  # how a manifest the disk would not take is reported
TERMINAL = jobfiles.TERMINAL
MAX_BACKOFF_S = 300.0
REOPEN_REQUEST = "REOPEN"  # written by `rgt resume` to restart a failed job from a checkpoint
MISSING_ARTIFACT_REMEDY = (
    "check the --artifact glob (relative to the job's work/ directory) against what the script "
    "writes; what it did write is in manifest.json and can be pulled"
)


class Supervisor(object):
    def __init__(
        self, job_dir: str, spec: Dict[str, Any], secrets: Dict[str, str], version: str = "dev"
    ) -> None:
        self.version = version
        self.paths = JobPaths(job_dir, str(spec["job_id"]))
        self.spec = spec
        retry = spec.get("retry") or {}
        self.max_retries = int(retry.get("max_retries", 3))
        self.backoff_s = float(retry.get("backoff_s", 2.0))
        self.grace_s = _system.env_float("RGT_AGENT_CANCEL_GRACE_S", 10.0)
        notify_url = secrets.get(_webhook.NOTIFY_SECRET)  # over stdin, never in spec.json
        _webhook.scrub_environ(notify_url)
        self.rec = JobRecorder(self.paths, list(secrets.values()), notify_url)
        self.runner = AttemptRunner(self.paths, spec, secrets, self.rec, self.grace_s)

    def request_stop(self, signum: int, frame: Any = None) -> None:
        """SIGTERM/SIGINT to the agent (platform stop, Slurm preemption): stop, stay resumable."""
        self.runner.stop_requested = True

    def request_checkpoint(self, signum: int, frame: Any = None) -> None:
        """SIGUSR1 (Slurm's ``--signal=B:USR1@grace``: the time limit is near): the runner
        forwards it to the job's process group, where rgt.ckpt's hook saves one last time."""
        self.runner.checkpoint_requested = True

    def run(self) -> int:
        previous = previous_status(self.paths)
        self.rec.event(
            "agent_started",
            {
                "pid": os.getpid(),
                "host": _system.hostname(),
                "boot_id": _system.boot_id(),
                "version": self.version,
            },
        )
        _autostop.job_hook(self.paths.root, self.rec.notify_url)  # the machine's armed policy
        if previous and previous.get("state") == "failed" and os.path.exists(self._reopen_file):
            return self._reopen(previous)
        if previous and previous.get("state") in TERMINAL:
            log("job already %s; nothing to do" % previous["state"])
            if previous.get("rebuilt"):  # status.json was cut: put the recorded end back
                self.rec.status.update((k, v) for k, v in previous.items() if k != "rebuilt")
                self.rec.land()
            return 0 if previous["state"] == "succeeded" else 1
        self.rec.status["retries_left"] = self.max_retries
        if previous:
            self.rec.adopt(previous)
            outcome = self._resume(previous)
            if outcome is not None:
                return outcome
        return self._loop()

    @property
    def _reopen_file(self) -> str:
        return os.path.join(self.paths.root, REOPEN_REQUEST)

    def _reopen(self, previous: Dict[str, Any]) -> int:
        """`rgt resume` on a failed job (it wrote ``REOPEN``): one new attempt from the newest
        valid checkpoint, with the job's command and resume form and a fresh retry budget;
        without a checkpoint the job stays failed and the event says why."""
        with contextlib.suppress(OSError):
            os.remove(self._reopen_file)  # one request, one restart
        self.rec.adopt(previous)
        attempt = int(previous.get("attempt") or 0) + 1
        plan = self.runner.resume_choice(attempt, self.paths.work)
        if plan.ckpt is None:
            why = "no valid checkpoint to resume from; %s" % plan.next_step
            log("not resuming the failed job: %s" % why)
            detail = dict(plan.detail, reason=why)
            self.rec.event("resume_refused", detail, "run it again with `rgt run`", "error")
            self.rec.status.update((k, v) for k, v in previous.items() if k != "rebuilt")
            self.rec.land()  # the failed state stands, with a fresh heartbeat
            return 1
        self.rec.status["retries_left"] = self.max_retries
        self.rec.event("reopened", {"from_state": "failed", "ckpt": plan.ckpt})
        return self._loop()

    def _loop(self) -> int:
        while True:
            attempt = int(self.rec.status.get("attempt") or 0) + 1
            decision = self._attempt(attempt)
            if decision is None:
                return self.finish("succeeded", "the job exited 0")
            outcome = self._settle(decision)
            if outcome is not None:
                return outcome

    def _attempt(self, attempt: int) -> Optional[Decision]:
        """One attempt; a disk that refuses the attempt's own files (its log, its dirs) ends
        it as ``disk_full``, never as a crash of the agent."""
        try:
            return self.runner.run(attempt)
        except OSError as exc:
            if exc.errno not in jobfiles.DISK_ERRNOS:
                raise
            cause = "the disk refused the attempt's files: %s" % exc
            return Decision("disk_full", False, cause, REMEDY_DISK_FULL, [str(exc)])

    def _resume(self, previous: Dict[str, Any]) -> Optional[int]:
        """A status.json left by an agent that is gone (we hold the lock, so it is gone)."""
        before, now = str(previous.get("boot_id") or ""), _system.boot_id()
        if before and before != now:
            self.rec.event("host_restart_detected", {"boot_id_before": before, "boot_id_now": now})
        if previous.get("state") != "running":
            return None  # queued, or between attempts: that end was already recorded
        if before and before != now:
            cause = "the host restarted during attempt %s" % previous.get("attempt")
            evidence = ["boot id %s -> %s" % (before, now)]
        else:
            cause, evidence = self._orphaned(previous)
        decision = Decision("preempted", True, cause, REMEDY_PREEMPTED, evidence)
        self.rec.event("attempt_ended", dict(decision.to_json(), exit_code=None, signal=None))
        self.rec.update(label=decision.label, exit_code=None, signal=None)
        return self._settle(decision)

    def _orphaned(self, previous: Dict[str, Any]) -> Tuple[str, List[str]]:
        """Same boot, dead agent: the agent was killed or its container restarted. A job
        process it left behind would write checkpoints next to the new attempt, so it goes."""
        cause = "the agent (pid %s) stopped without recording the end of attempt %s" % (
            previous.get("agent_pid"),
            previous.get("attempt"),
        )
        evidence = ["agent pid %s not alive" % previous.get("agent_pid")]
        pid = previous.get("pid")
        if isinstance(pid, int) and _system.process_belongs_to_job(pid, self.paths.root):
            sent = _system.terminate_group(pid, self.grace_s)
            evidence.append("job process group %d was still running; sent %s" % (pid, sent))
        return cause, evidence

    def _settle(self, decision: Decision) -> Optional[int]:
        """After a failed attempt: None to run the next attempt, or the agent's exit code."""
        if decision.cancelled:
            return self.finish("cancelled", "cancelled on request", label=None)
        left = int(self.rec.status.get("retries_left") or 0)
        if not decision.retryable or left <= 0:
            return self._fail(decision, exhausted=decision.retryable)
        self.rec.update(
            state="retrying",
            retries_left=left - 1,
            label=decision.label,
            reason="%s; retrying (%d retries left)" % (decision.cause, left - 1),
        )
        attempt = int(self.rec.status.get("attempt") or 0) + 1
        plan = self.runner.resume_choice(attempt, self.paths.work)  # the job's working dir
        self.rec.event(
            "retrying",
            {"label": decision.label, "retries_left": left - 1},
            _resume.retry_next_step(plan),
        )
        if self.runner.stop_requested:
            self.rec.event(
                "agent_stopped",
                {"signal": "SIGTERM"},
                "start the agent again to resume (rgt run resumes it)",
            )
            return 1
        return self._backoff(self.max_retries - left + 1)

    def _backoff(self, retry_number: int) -> Optional[int]:
        delay = min(MAX_BACKOFF_S, self.backoff_s * 2 ** (retry_number - 1))
        deadline = time.monotonic() + delay
        while time.monotonic() < deadline:
            if os.path.exists(self.paths.cancel_request):
                return self.finish("cancelled", "cancelled on request while waiting to retry")
            if self.runner.stop_requested:
                return 1
            time.sleep(min(0.1, delay))
        return None

    def _fail(self, decision: Decision, exhausted: bool) -> int:
        reason = decision.cause
        if exhausted:
            reason = "retry budget exhausted (%d retries): %s" % (self.max_retries, reason)
        return self.finish("failed", reason, label=decision.label, remedy=decision.remedy)

    def finish(
        self, state: str, reason: str, label: Optional[str] = None, remedy: Optional[str] = None
    ) -> int:
        """Terminal state: verified manifest first, then status.json, then the event."""
        self.rec.update(reason="%s; hashing and re-reading the artifacts" % reason)
        result = self._finalize(state)
        if result.ok and result.missing and state == "succeeded":
            state, label = "failed", "unknown"
            reason = (
                "the job exited 0 but declared artifact %r matched no file" % (result.missing[0])
            )
            remedy = MISSING_ARTIFACT_REMEDY
        if result.ok:
            reason = _manifest.artifacts_said(reason, state, result)
            self._warn_left_out(result.left_out)
            self.rec.event(
                "manifest_written",
                {
                    "files": result.files,
                    "bytes": result.total_bytes,
                    "sha256": result.digest,
                    "skipped": result.skipped,
                },
            )
            _durable.mirror_outputs(self.paths, self.spec, self.rec)  # notebook VMs only
        elif result.reason.startswith(DISK_REFUSED) and state != "cancelled":
            state, reason = "failed", "%s; then %s" % (reason, result.reason)
            label, remedy = "disk_full", REMEDY_DISK_FULL
        elif state == "succeeded":
            state, reason = "failed", "artifact verification failed: %s" % result.reason
            label, remedy = "unknown", "check what else writes into the job directory, rerun"
        else:
            reason = "%s; no manifest: %s" % (reason, result.reason)
        if label is None and state != "succeeded" and self.rec.status.get("label"):
            label = self.rec.status["label"]  # the last failure, kept; a success has no label
        self.rec.status.update(state=state, ended=_system.now_iso(), reason=reason, label=label)
        self._land_terminal_state()
        self.rec.event(
            state,
            {"reason": reason, "label": label, "manifest": result.to_json()},
            _next_step(state, remedy, result.files if result.ok else None),
        )
        return 0 if state == "succeeded" else 1

    def _warn_left_out(self, left_out: Dict[str, Any]) -> None:
        if left_out.get("count"):
            self.rec.event("artifacts_capped", left_out, str(left_out.get("fix")), "warning")

    def _finalize(self, state: str) -> _manifest.ManifestResult:
        """Write the manifest (and DONE); while the disk refuses it, wait (bounded) for the
        user to free space, beating the heart so that ``watch`` sees a live agent."""
        deadline = time.monotonic() + _terminal_wait_s()
        patterns = list(self.spec.get("artifacts") or [])
        while True:
            try:
                return _manifest.finalize(self.paths, state, patterns, self.spec)
            except OSError as exc:
                if exc.errno not in jobfiles.DISK_ERRNOS:
                    return _manifest.ManifestResult(False, "writing it failed: %s" % exc)
                if time.monotonic() >= deadline:
                    why = "%s manifest.json or DONE (%s)" % (DISK_REFUSED, exc)
                    return _manifest.ManifestResult(False, why)
                log("cannot write the manifest (%s); waiting for free space" % exc)
            time.sleep(_retry_s())
            self.rec.heartbeat()

    def _land_terminal_state(self) -> None:
        """The terminal status is the smallest write that matters most: without it the job
        would look alive-but-unsupervised forever. It goes first (before the event), falls
        back to an in-place overwrite, and is retried (bounded) while the disk refuses it."""
        deadline = time.monotonic() + _terminal_wait_s()
        while not self.rec.land() and time.monotonic() < deadline:
            time.sleep(_retry_s())
        if not self.rec.status_landed:
            log(
                "the terminal state %s could not be written: %s"
                % (self.rec.status.get("state"), self.rec.write_error)
            )


def _terminal_wait_s() -> float:
    return _system.env_float("RGT_AGENT_TERMINAL_WAIT_S", TERMINAL_WRITE_WAIT_S)


def _retry_s() -> float:
    return max(0.05, min(5.0, _terminal_wait_s() / 20))


def _next_step(state: str, remedy: Optional[str], files: Optional[int] = None) -> Optional[str]:
    if state == "succeeded" and files == 0:
        return "nothing to pull: the job produced no artifacts"
    if state == "succeeded":
        return "rgt pull the results (manifest.json lists every verified artifact)"
    if state == "cancelled":
        return None
    return remedy or "read the attempt log and run `rgt triage`"


def install_signal_handlers(supervisor: Supervisor) -> None:
    # A handler (not SIG_IGN) for SIGHUP: the hangup of the ssh session that started us is
    # ignored, while the job still gets default dispositions (handlers reset at exec).
    signal.signal(signal.SIGHUP, lambda signum, frame: log("ignored SIGHUP"))
    signal.signal(signal.SIGTERM, supervisor.request_stop)
    signal.signal(signal.SIGINT, supervisor.request_stop)
    signal.signal(signal.SIGUSR1, supervisor.request_checkpoint)
