"""The sentinel: while a job runs, the agent watches for what should wake a human.

Each kind of trouble becomes one event in events.jsonl (and, with ``notify_url``, a webhook
POST) the moment it starts, and again only after it cleared and came back, so a phone hears
about a NaN at hour 9 once, not every second:

    nan_loss           the loss in the log or metrics.jsonl is NaN or Inf
    log_stalled        the process lives but its log has not grown for RGT_WATCH_STALL_S
                       (RGT_WATCH_HANG_S, shorter, for a job started by a launcher); srun's
                       own "step creation … disabled, retrying" lines are not growth (a step
                       that cannot start prints them for ever), and the event names them
    ranks_hung         the same for a launched job, with each rank's Python stack (py-spy):
                       the rank(s) not inside a collective, and where the others wait
    disk_nearly_full   bytes or inodes of a job mount >= RGT_WATCH_DISK_PCT
    memory_near_limit  the cgroup's memory >= RGT_WATCH_MEM_PCT of its limit
    gpu_idle           a priced machine's GPUs all idle for RGT_WATCH_GPU_IDLE_S
    loss_spike         the loss jumped far above its running median (rgt.agent._spikes):
                       told once it recovered or diverged, one event per spike
    input_bound        recent steps waited on data >= RGT_WATCH_INPUT_PCT % of their time
                       (rgt.agent.probes.input_wait: timed_loader records or the log's Data/Time)

Thresholds come from the agent's environment, else the job spec's ``env``, else the defaults
below. The price comes from spec env ``RGT_PRICE_PER_HOUR`` (``rgt run`` sets it from the
machine's price): a machine with no price has no idle meter to worry about.
"""

from __future__ import annotations

import os
import re
import time
from typing import Any, Callable, Dict, Optional

from rgt.agent import _spikes, _system
from rgt.agent._record import JobRecorder, log
from rgt.agent._session import SessionClock
from rgt.agent.paths import JobPaths
from rgt.agent.probes import cgroup, disk, gpu, input_wait, progress

DEFAULTS = {
    "RGT_WATCH_STALL_S": 1800.0,
    # A launched multi-rank job that prints nothing for 5 min is most often a collective
    # waiting on one rank; the collective's own timeout (30 min) would say far less, later.
    "RGT_WATCH_HANG_S": 300.0,
    "RGT_WATCH_DISK_PCT": 90.0,
    "RGT_WATCH_MEM_PCT": 90.0,
    "RGT_WATCH_GPU_IDLE_S": 900.0,
    "RGT_WATCH_GPU_IDLE_PCT": 2.0,
    "RGT_WATCH_PROBE_S": 30.0,
    "RGT_PRICE_PER_HOUR": 0.0,
    "RGT_WATCH_INPUT_PCT": input_wait.DEFAULT_PCT,
    "RGT_WATCH_SPIKE_RATIO": _spikes.MIN_RATIO,
    "RGT_WATCH_SPIKE_Z": _spikes.MIN_Z,
}
HANG_LOOK_S = 5.0
MAX_READ = 1 << 20  # bytes of new log scanned per tick; a flood is sampled, not all read
# srun waiting for the allocation's nodes to take a new step (the previous step's processes
# have not ended): "srun: Job 9479148 step creation still disabled, retrying (Requested nodes
# are busy)" (llnl/smith#688, eth-cscs/DLA-Future#337), older Slurm without the job id.
SRUN_WAITING = re.compile(r"step creation (?:temporarily|still) disabled, retrying")


def thresholds(spec: Dict[str, Any]) -> Dict[str, float]:
    env = spec.get("env") or {}
    out = {}
    for name, default in DEFAULTS.items():
        raw = os.environ.get(name, env.get(name))
        try:
            out[name] = float(raw) if raw not in (None, "") else default
        except (TypeError, ValueError):
            out[name] = default
    return out


class Sentinel(object):
    def __init__(self, paths: JobPaths, spec: Dict[str, Any], rec: JobRecorder, attempt: int):
        self.paths = paths
        self.rec = rec
        self.attempt = attempt
        self.limits = thresholds(spec)
        self.log_path = paths.log(attempt)
        self.metrics_path = os.path.join(paths.output_dir, progress.METRICS_FILE)
        self.offsets = {self.log_path: 0, self.metrics_path: _size(self.metrics_path)}
        self.log_size = -1
        self.log_grew = time.monotonic()
        self.log_news = True  # the newest log text holds more than srun's waiting lines
        self.srun_waiting = None  # type: Optional[str]  # the last such line, while no other
        self.next_probe = 0.0
        self.idle_since = None  # type: Optional[float]
        self.active = set()  # type: set[str]
        self.broken = False
        self.input = input_wait.InputWait(self.limits["RGT_WATCH_INPUT_PCT"])
        self.spikes = _spikes.SpikeWatch(
            self.limits["RGT_WATCH_SPIKE_RATIO"], self.limits["RGT_WATCH_SPIKE_Z"]
        )
        self.session = SessionClock(spec, rec)  # notebook VMs: warn before the platform's cap
        self.launcher = None  # type: Optional[str]
        self.srun = False
        self.hang_look = 0.0
        self.ranks_dir = ""
        self.job_path = ""

    def launched(
        self, launcher: Optional[str], ranks_dir: str, job_path: str, srun: bool = False
    ) -> None:
        """The attempt's launcher (None: a plain process), where its rank files go, and whether
        the command runs under ``srun`` (the user's or the agent's, one launcher per node)."""
        self.launcher, self.ranks_dir, self.job_path = launcher, ranks_dir, job_path
        self.srun = srun

    def tick(self, pid: int) -> None:
        """Called by the attempt's wait loop; never raises (a probe must not kill the job)."""
        if self.broken:
            return
        try:
            self._tick(pid)
        except Exception as exc:
            self.broken = True
            log("sentinel stopped after %s: %s" % (type(exc).__name__, exc))

    def _tick(self, pid: int) -> None:
        now = time.monotonic()
        self._scan(self.log_path, progress.scan_lines, "log")
        self._scan(self.metrics_path, _records, progress.METRICS_FILE)
        self._stall(pid, now)
        self.session.tick()
        if now >= self.next_probe:
            self.next_probe = now + self.limits["RGT_WATCH_PROBE_S"]
            self._disk()
            self._memory(pid)
            self._gpu(now)

    def _raise(
        self, key: str, kind: str, detail: Dict[str, Any], next_step: str, severity: str = "info"
    ) -> None:
        if key not in self.active:
            self.active.add(key)
            self.rec.event(kind, detail, next_step, severity)

    def _clear(self, key: str) -> None:
        self.active.discard(key)

    def _scan(self, path: str, scan: Callable[[str], Dict[str, Any]], source: str) -> None:
        if _size(path) == self.offsets[path]:
            return
        text, self.offsets[path] = progress.read_new(path, self.offsets[path])
        if len(text) > MAX_READ:
            text = text[-MAX_READ:]
        if source == "log":
            self._note_srun(text)
        found = scan(text)
        if found["nonfinite"]:
            detail = {"source": source, "line": found["nonfinite"][0], "step": found["step"]}
            self._raise("nan", "nan_loss", detail, NEXT_NAN % self.paths.job_id)
        self._input_wait(text, source)
        for spike in self.spikes.feed(text, source):
            next_step = _spikes.next_step(spike, self.paths.job_id)
            self.rec.event("loss_spike", spike.detail(source), next_step, spike.severity)

    def _note_srun(self, text: str) -> None:
        if "disabled, retrying" not in text:  # the common case: no per-line work
            self.log_news = True
            if text.strip():
                self.srun_waiting = None
            return
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        waiting = [line for line in lines if SRUN_WAITING.search(line)]
        self.log_news = len(waiting) < len(lines) or not lines
        if waiting and lines[-1] == waiting[-1]:
            self.srun_waiting = waiting[-1][:300]
        elif self.log_news:
            self.srun_waiting = None

    def _input_wait(self, text: str, source: str) -> None:
        lines = text.splitlines()
        samples = input_wait.from_log(text) if source == "log" else input_wait.from_records(lines)
        verdict = self.input.add(samples)
        if verdict is None:
            return
        if not verdict["input_bound"]:
            self._clear("input")
        elif "input" not in self.active:
            self.active.add("input")
            detail = dict(verdict, source=source)
            self.rec.event("input_bound", detail, input_wait.remedy(verdict), severity="warning")

    def _stall(self, pid: int, now: float) -> None:
        size = _size(self.log_path)
        if size != self.log_size:
            self.log_size = size
            if self.log_news:
                self.log_grew = now
                self._clear("stall")
                self._clear("hang")
                return
        quiet = now - self.log_grew
        limit = self.limits["RGT_WATCH_STALL_S"]
        if self.launcher is not None:
            limit = min(limit, self.limits["RGT_WATCH_HANG_S"])
        if "stall" in self.active or quiet < limit:
            return
        if _system.group_alive(pid):
            detail = {
                "quiet_s": round(quiet, 1),
                "pid": pid,
                "ckpt_age_s": _newest_age(self.paths.ckpt_dir),
            }  # type: Dict[str, Any]
            if self.srun_waiting is not None:
                detail["srun_waiting"] = self.srun_waiting
                self._raise("stall", "log_stalled", detail, NEXT_SRUN % self.paths.job_id)
                return  # no rank has started: nothing to dump
            next_step = NEXT_STALL % (pid, self.paths.job_id)
            if self.srun:  # srun may print its waiting lines only when it exits
                next_step += "; " + NEXT_SRUN_MAYBE
            self._raise("stall", "log_stalled", detail, next_step)
            if self.launcher is not None and "hang" not in self.active and now >= self.hang_look:
                self.hang_look = now + HANG_LOOK_S  # no rank yet: look again a little later
                self._ranks_hung(pid, quiet)

    def _ranks_hung(self, pid: int, quiet: float) -> None:
        """Dump every rank's stack once per silence; a launcher that has not started its
        ranks yet is looked at again on the next tick."""
        from rgt.agent import _hang

        detail, next_step = _hang.diagnose(pid, self.ranks_dir, self.job_path)
        if not detail.get("positions") and not detail.get("ranks"):
            return
        detail.update(quiet_s=round(quiet, 1), launcher=self.launcher)
        if detail.get("stacks"):
            detail["stacks"] = os.path.relpath(detail["stacks"], self.paths.root)
        self._raise("hang", "ranks_hung", detail, next_step, "warning")

    def _disk(self) -> None:
        paths = [self.paths.root, self.paths.ckpt_dir, self.paths.output_dir]
        for reading in disk.usage_by_mount(paths):
            key = "disk:%s" % reading.get("mount")
            worst = max(reading.get("bytes_pct") or 0, reading.get("inodes_pct") or 0)
            if worst >= self.limits["RGT_WATCH_DISK_PCT"]:
                self._raise(key, "disk_nearly_full", reading, NEXT_DISK % reading.get("mount"))
            else:
                self._clear(key)

    def _memory(self, pid: int) -> None:
        reading = cgroup.memory(pid)
        if (reading.get("pct") or 0) >= self.limits["RGT_WATCH_MEM_PCT"]:
            self._raise("mem", "memory_near_limit", reading, NEXT_MEM % reading["pct"])
        else:
            self._clear("mem")

    def _gpu(self, now: float) -> None:
        price = self.limits["RGT_PRICE_PER_HOUR"]
        if price <= 0:
            return
        reading = gpu.read()
        utils = [g["util_pct"] for g in reading["gpus"] if g["util_pct"] is not None]
        if not utils or max(utils) > self.limits["RGT_WATCH_GPU_IDLE_PCT"]:
            self.idle_since = None
            self._clear("idle")
            return
        self.idle_since = self.idle_since if self.idle_since is not None else now
        idle_s = now - self.idle_since
        if idle_s >= self.limits["RGT_WATCH_GPU_IDLE_S"]:
            detail = {
                "idle_s": round(idle_s, 1),
                "price_per_hour": price,
                "util_pct": utils,
                "wasted": round(price * idle_s / 3600.0, 4),
            }
            self._raise("idle", "gpu_idle", detail, NEXT_IDLE % (price, self.paths.job_id))


def _records(text: str) -> Dict[str, Any]:
    return progress.scan_records(text.splitlines())


def _size(path: str) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0


def _newest_age(directory: str) -> Optional[float]:
    """Seconds since the newest file in the checkpoint dir changed: a quiet log while
    checkpoints still advance is block-buffered stdout, not a hang (U43)."""
    newest = None
    for root, _dirs, files in os.walk(directory):
        for name in files:
            try:
                mtime = os.stat(os.path.join(root, name)).st_mtime
            except OSError:
                continue
            newest = mtime if newest is None else max(newest, mtime)
    return None if newest is None else round(time.time() - newest, 1)


NEXT_NAN = (
    "the loss diverged and will not recover by itself: `rgt cancel %s`, then lower the "
    "learning rate, enable gradient clipping or check the data for inf, and resume from the "
    "last finite checkpoint"
)
NEXT_STALL = (
    "the process lives but prints nothing: if checkpoints still advance it is only quiet; "
    "otherwise it hangs (DataLoader, NCCL): `py-spy dump --pid %d` on the machine, then "
    "`rgt cancel %s`"
)
NEXT_SRUN = (
    "srun is still waiting for the allocation's nodes to start the step (a previous step's "
    "processes have not ended, or the step asks for more than the job holds): `squeue -s` "
    "and `sacct -j $SLURM_JOB_ID` on the cluster show the steps; `scancel` the stuck step, or "
    "`rgt cancel %s` and run again"
)
NEXT_SRUN_MAYBE = (
    "under srun, `squeue -s -j $SLURM_JOB_ID` shows whether the step started at all (a step "
    "that waits for busy nodes prints nothing until srun ends)"
)
NEXT_DISK = (
    "free space on %s (old checkpoints, caches, per-sample outputs) or move to a bigger disk "
    "before the next checkpoint write fails; rgt deletes nothing for you"
)
NEXT_MEM = (
    "host RAM is at %s%% of the cgroup limit and the OOM killer is next: use fewer DataLoader "
    "workers (size them from the limit, not the CPU count) or share the dataset between them"
)
NEXT_IDLE = (
    "the meter runs (%s/h) while every GPU idles: check the job is not stuck on CPU or data "
    "(`rgt logs %s`), or stop the machine (`rgt down NAME`)"
)
