"""One attempt: start the job command detached in its own process group, keep the heartbeat
going while it runs, and report how it ended.

The job runs in its own session (``start_new_session``): a cancel or a stop then reaches the
trainer and every worker it forked with one ``killpg``, and a hangup of the terminal that
started the agent never reaches the job. Its stdout and stderr go straight to
``logs/attempt-<n>.log`` (not through the agent), so the job never blocks on, or dies with,
the agent's pipes.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from typing import Any, Dict, List, Optional, Set, Tuple

from rgt.agent import _gpus, _kernel, _launch, _pypath, _ranklogs, _resume, _system, _workdir
from rgt.agent._classify import REMEDY_PREEMPTED, AttemptFacts, Decision, decide
from rgt.agent._fleet import group_restart
from rgt.agent._record import JobRecorder
from rgt.agent._sentinel import Sentinel
from rgt.agent._slurm_nodes import NodeGroup, group_for, settle
from rgt.agent._step_start import StepStart, watch_for
from rgt.agent.paths import JobPaths

LOG_TAIL_BYTES = 64 * 1024
EXEC_FAILED = 127  # what a shell reports when the command cannot be started


class AttemptRunner(object):
    def __init__(
        self,
        paths: JobPaths,
        spec: Dict[str, Any],
        secrets: Dict[str, str],
        rec: JobRecorder,
        grace_s: float,
    ) -> None:
        self.paths = paths
        self.spec = spec
        self.secrets = secrets
        self.rec = rec
        self.grace_s = grace_s
        self.heartbeat_s = max(0.05, _system.env_float("RGT_AGENT_HEARTBEAT_S", 2.0))
        self.stop_requested = False
        self.checkpoint_requested = False  # set by SIGUSR1, cleared once forwarded
        self.warned = False  # this attempt's job got a forwarded SIGUSR1
        self.sentinel = None  # type: Optional[Sentinel]
        self.launcher = None  # type: Optional[str]  # torchrun, accelerate, deepspeed, srun
        self.rank_logs = None  # type: Optional[_ranklogs.RankLogs]
        self.rank_pids: Set[int] = set()  # every rank process seen in this attempt
        self.orphans: List[int] = []  # ranks that outlived their launcher, killed
        self.gpus = _gpus.GpuClaim(paths, spec)  # `--gpus N` on a box (rgt.agent._gpus)
        self.nodes: Optional[NodeGroup] = None  # a multi-node Slurm job (srun per node)
        self.step_start: Optional[StepStart] = None  # an srun's step, bounded

    def run(self, attempt: int) -> Optional[Decision]:
        """Run attempt ``attempt``; None when it exited 0, else the verdict on its failure."""
        for directory in (self.paths.logs_dir, self.paths.ckpt_dir, self.paths.output_dir):
            os.makedirs(directory, exist_ok=True)
        failure = self._work_dir()
        if failure is None:
            failure = self.gpus.claim(self.rec)  # free GPUs, or the refusal naming holders
        if failure is not None:
            return failure
        boot, oom_before = _system.boot_id(), _system.oom_kill_count()
        host_oom_before, since = _kernel.host_oom_count(), _kernel.uptime_s()
        self.warned, self.rank_pids, self.orphans = False, set(), []
        self.sentinel = Sentinel(self.paths, self.spec, self.rec, attempt)
        proc = self._spawn(attempt)
        if proc is None:
            facts = AttemptFacts(EXEC_FAILED, None, self._log_tail(attempt))
            return self._ended(EXEC_FAILED, False, facts)
        returncode, sent = self._wait(proc)
        stragglers = self._reap_stragglers(proc.pid)
        self._check_snapshot()
        exit_code = returncode if returncode >= 0 else None
        signal_num = -returncode if returncode < 0 else None
        facts = AttemptFacts(
            exit_code,
            signal_num,
            self._log_tail(attempt),
            sent,
            os.path.exists(self.paths.cancel_request),
            boot,
            _system.boot_id(),
            oom_before,
            _system.oom_kill_count(),
            proc.pid,
        )
        record = self._rank_facts(facts, host_oom_before, since)
        return self._ended(returncode, bool(stragglers), facts, record)

    def _spawn(self, attempt: int) -> Optional["subprocess.Popen[bytes]"]:
        env, missing = self.child_env(attempt)
        cwd = self.paths.work
        choice = self.resume_choice(attempt, cwd)
        env.update(choice.env)
        log_path = self.paths.log(attempt)
        ranks_dir = _ranklogs.attempt_dir(self.paths.logs_dir, attempt)
        self.launcher = _launch.recognise(choice.command)
        extra = _launch.env_for(self.launcher, choice.command, ranks_dir)
        env.update((k, v) for k, v in extra.items() if k not in env)  # the user's values win
        self.nodes = group_for(env, ranks_dir)  # None on one node
        command = self.nodes.argv(choice.command, self.launcher) if self.nodes else choice.command
        env.update(self.nodes.env() if self.nodes else {})
        self.rank_logs = _ranklogs.RankLogs(log_path, ranks_dir, self.launcher)
        srun = self.nodes is not None or self.launcher == _launch.SRUN
        if self.sentinel is not None:
            self.sentinel.launched(self.launcher, ranks_dir, env.get("PATH", ""), srun)
        limit = _system.env_float("RGT_AGENT_STEP_START_S", 600.0)
        self.step_start = watch_for(os.environ, limit) if srun else None
        with open(log_path, "ab") as log_file:
            if choice.kind == "resuming":  # the attempt's own log says where it started
                log_file.write(("rgt-agent: %s\n" % choice.detail["said"]).encode("utf-8"))
                log_file.flush()
            try:
                proc = subprocess.Popen(
                    command,
                    cwd=cwd,
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=log_file,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            except OSError as exc:
                log_file.write(("rgt-agent: cannot start the job command: %s\n" % exc).encode())
                proc = None
        if proc is not None:
            self.gpus.track(proc.pid)  # its process group holds the GPUs too
        self.rec.update(
            state="running",
            attempt=attempt,
            pid=proc.pid if proc else None,
            started=self.rec.status.get("started") or _system.now_iso(),
            ended=None,
            exit_code=None,
            signal=None,
            reason="attempt %d running" % attempt,
        )
        _resume.announce(self.rec, choice)
        if self.nodes is not None:
            self.rec.event("nodes_started", self.nodes.to_json())
        self.rec.event(
            "attempt_started",
            {
                "pid": proc.pid if proc else None,
                "cwd": cwd,
                "log": os.path.relpath(log_path, self.paths.root),
                "missing_secrets": missing,
                "launcher": self.launcher,
            },
        )
        return proc

    def resume_choice(self, attempt: int, cwd: str) -> _resume.Choice:
        """The original command or its resume form (--resume-with), by the checkpoints found
        in ``cwd`` (the job's working directory) and RGT_CKPT_DIR."""
        started = self.rec.status.get("started")
        return _resume.choose(self.spec, attempt, cwd, self.paths.ckpt_dir, started)

    def child_env(self, attempt: int) -> Tuple[Dict[str, str], List[str]]:
        """os.environ + spec env + declared secrets + the RGT_* contract of a job."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("RGT_AGENT_")}
        env.pop("RGT_RESUME_FROM", None)  # set only by the attempt that resumes
        env.update({str(k): str(v) for k, v in (self.spec.get("env") or {}).items()})
        declared = [str(name) for name in self.spec.get("secret_env") or []]
        env.update({k: v for k, v in self.secrets.items() if k in declared})
        env.update(self.gpus.env)  # CUDA_VISIBLE_DEVICES of the claimed GPUs
        env.update(
            {
                "RGT_JOB_ID": self.paths.job_id,
                "RGT_ATTEMPT": str(attempt),
                "RGT_JOB_DIR": self.paths.root,
                "RGT_WORK_DIR": self.paths.work,
                "RGT_CKPT_DIR": self.paths.ckpt_dir,
                "RGT_OUTPUT_DIR": self.paths.output_dir,
                "RGT_SMOKE": "1" if self.spec.get("smoke") else "0",
                "PYTHONUNBUFFERED": "1",
            }
        )
        _pypath.add_to(env, self.paths.root)  # `import rgt.ckpt` without installing rgt
        return env, [name for name in declared if name not in self.secrets]

    def _work_dir(self) -> Optional[Decision]:
        """``work/`` once per job: a retry finds what the previous attempt wrote there."""
        done = _workdir.ensure(self.paths)
        if isinstance(done, _workdir.WorkDirFailure):
            self.rec.event("workdir_failed", {"reason": done.cause}, done.remedy, "error")
            return Decision(done.label, False, done.cause, done.remedy, [done.cause])
        if done is not None:
            self.rec.event("workdir_ready", dict(done, path=self.paths.work))
        return None

    def _check_snapshot(self) -> None:
        """A root job can write a hard-linked snapshot file in place (``_workdir``)."""
        for change in _workdir.check_links(self.paths):
            self.rec.event(
                "snapshot_modified",
                change,
                "the job wrote %s of the shared code snapshot in place; the next launch "
                "uploads the snapshot again. Write outputs to new files instead" % change["path"],
                "error",
            )

    def _wait(self, proc: "subprocess.Popen[bytes]") -> Tuple[int, bool]:
        """Wait for the job, beating the heart; stop it on CANCEL or when the agent is stopped.
        Returns (returncode, whether the agent itself signalled the job)."""
        sent = False
        tick = min(0.25, self.heartbeat_s)
        next_beat = time.monotonic() + self.heartbeat_s
        while True:
            try:
                return proc.wait(timeout=tick), sent
            except subprocess.TimeoutExpired:
                pass
            if not sent and (self.stop_requested or os.path.exists(self.paths.cancel_request)):
                sent = True
                _system.terminate_group(proc.pid, self.grace_s, proc.poll)
            if self.checkpoint_requested:
                self._forward_checkpoint_request(proc.pid)
            if self.rank_logs is not None:
                self.rank_logs.follow()
            if self.sentinel is not None:
                self.sentinel.tick(proc.pid)
            if not sent and self.step_start is not None and self.step_start.check(self.rec):
                sent = True  # Slurm refused the requeue: the step cannot run, stop waiting
                _system.terminate_group(proc.pid, self.grace_s, proc.poll)
            if time.monotonic() >= next_beat:
                self._note_ranks(proc.pid)
                self.rec.heartbeat()
                next_beat = time.monotonic() + self.heartbeat_s

    def _forward_checkpoint_request(self, pgid: int) -> None:
        """The job runs in its own session, so the platform's warning reaches only the agent;
        a job without a USR1 handler dies of it, which is then a preemption, not a bug."""
        self.checkpoint_requested, self.warned = False, True
        sent = _system.signal_group(pgid, signal.SIGUSR1)
        self.rec.event("checkpoint_requested", {"signal": "SIGUSR1", "delivered": sent})

    def _note_ranks(self, root: int) -> None:
        if self.launcher is not None:
            from rgt.agent._hang import rank_processes

            self.rank_pids.update(rank_processes(root).values())

    def _reap_stragglers(self, pgid: int) -> List[int]:
        """Processes the job left in its group (workers, a background uploader) would hold
        GPU memory and keep writing artifacts while we hash them, so the attempt ends here.
        torchrun starts each rank in a session of its own: when the launcher itself is killed
        (``kill -9``, the OOM killer) its ranks live on as orphans and would train beside the
        next attempt, so every rank seen during the attempt that still runs goes too."""
        sent = _system.terminate_group(pgid, self.grace_s) if _system.group_alive(pgid) else []
        for pid in sorted(self.rank_pids):
            if _system.pid_alive(pid) and _system.process_belongs_to_job(pid, self.paths.root):
                self.orphans.append(pid)
                sent += _system.terminate_group(pid, self.grace_s)  # the rank's own session
        return sent

    def _log_tail(self, attempt: int) -> str:
        try:
            with open(self.paths.log(attempt), "rb") as handle:
                handle.seek(0, os.SEEK_END)
                handle.seek(max(0, handle.tell() - LOG_TAIL_BYTES))
                return handle.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def _rank_facts(
        self, facts: AttemptFacts, host_oom_before: Optional[int], since: Optional[float]
    ) -> Dict[str, Any]:
        """Per-rank evidence once the attempt ended: each rank's log tail, the launcher's list
        of failed ranks (``ranks.json``), torchrun's error file, the kernel's OOM readings."""
        record = {"ranks": []}  # type: Dict[str, Any]
        if self.rank_logs is not None:
            self.rank_logs.close()
            facts.rank_tails = self.rank_logs.tails()
            directory = self.rank_logs.directory
            facts.rank_stderr = _ranklogs.launcher_stderr(directory)
            record = _ranklogs.write_record(directory, self.launcher, facts.log_tail)
            facts.rank_error = record.get("error_file")
        host_oom_after = _kernel.host_oom_count()
        if host_oom_before is not None and host_oom_after is not None:
            facts.host_oom_delta = max(0, host_oom_after - host_oom_before)
        if facts.exit_code != 0:
            facts.kernel_oom = _kernel.oom_kills(since)
        return record

    def _ended(
        self,
        returncode: int,
        stragglers: bool,
        facts: AttemptFacts,
        record: Optional[Dict[str, Any]] = None,
    ) -> Optional[Decision]:
        self.gpus.release()
        self.rec.update(exit_code=facts.exit_code, signal=facts.signal_num)
        decision = None if returncode == 0 else decide(facts)
        decision = group_restart(self.spec, decision)  # a fleet node: a peer's loss
        decision = settle(self.nodes, decision, facts)  # Slurm: each node's end
        stopped = self.stop_requested or (self.warned and facts.signal_num == signal.SIGUSR1)
        if decision is not None and stopped and not decision.cancelled:
            why = "SIGTERM" if self.stop_requested else "SIGUSR1 (the platform's warning)"
            cause = "the agent got %s: platform stop or preemption ended the job" % why
            decision = Decision("preempted", True, cause, REMEDY_PREEMPTED, ["agent got " + why])
        blocked = self.step_start is not None and self.step_start.blocked is not None
        if decision is not None and blocked and not decision.cancelled:
            decision = self.step_start.decision()  # type: ignore[union-attr]
        detail = {
            "exit_code": facts.exit_code,
            "signal": facts.signal_num,
            "stragglers_killed": stragglers,
            "label": None,
            "retryable": False,
            "evidence": [],
        }  # type: Dict[str, Any]
        if decision is not None:
            detail.update(decision.to_json())
        if self.orphans:
            detail["orphaned_ranks_killed"] = list(self.orphans)
        if record and record.get("ranks"):
            detail["ranks"] = record["ranks"]  # the launcher's list, the first failure first
        if self.rank_logs is not None and self.rank_logs.ranks():
            logs = os.path.relpath(self.rank_logs.directory, self.paths.root)
            detail["rank_logs"] = logs
        self.rec.event("attempt_ended", detail)
        return decision
