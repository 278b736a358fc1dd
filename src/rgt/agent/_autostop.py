"""The autostop watcher: the meter stops by itself only once the results are safe.

``python3 agent.pyz autostop ROOT`` runs detached on the machine, one per machine (a flock), as
long as a policy armed by a human (`rgt approve NAME --autostop`) is in ``ROOT/autostop``. Every
tick (``tick_s``, at most 5 s) it:

1. polls the profile's preemption endpoint, if any: on a notice it records
   ``preemption_notice``, sends SIGUSR1 to every running job's agent (forwarded to the job, where
   rgt.ckpt saves at once) and runs ``--on-preempt``;
2. warns at 80 % and 95 % of ``--budget`` (the money clock: the ledger's spend when armed plus
   price × time since);
3. finds a trigger: every job ended (``--after-jobs``), no job and an idle GPU for ``--idle``,
   the ``--at`` time, or the spend cap. The last two end running jobs first: SIGTERM to their
   agents (the job gets SIGTERM, rgt.ckpt's signal save runs, the agent records a resumable
   stop), then the watcher waits for the checkpoint commit;
4. asks the gate (``_autostop_gate``): no job runs, every artifact re-verified on storage that
   survives the stop. If not, it records why (``autostop_blocked``, once per reason, with the
   webhook) and looks again;
5. creates ``fired-<arm>.json`` (O_EXCL: at most once, across kill -9 and restarts), then runs
   the stop action: the reversible one that keeps the disk, never a release or destroy.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from typing import Any, Dict, List, Optional, Tuple

from rgt.agent import _autostop_files as af
from rgt.agent import _autostop_gate as gate
from rgt.agent import _preempt, _system

WARN_AT = (80, 95)
RECHECK_S = 30.0  # after a refusal, the gate re-hashes the artifacts at most this often
TAKEOVER_S = 15.0  # a newer arming waits this long for the running watcher to hand over
STOP_TIMEOUT_S = 300.0
URGENT = (
    "autostop_blocked",
    "autostop_fired",
    "autostop_stop_failed",
    "preemption_notice",
    "budget_80",
    "budget_95",
)  # the kinds the webhook hears


class Watcher(object):
    def __init__(self, root: str, notify_url: Optional[str] = None) -> None:
        self.files = af.AutostopFiles(root)
        self.notify_url = notify_url
        self.policy = {}  # type: Dict[str, Any]
        self.state = {}  # type: Dict[str, Any]
        self.next_gate = 0.0
        self.seen_jobs = ""

    def event(
        self, kind: str, detail: Dict[str, Any], next_step: Any = None, sev: str = "info"
    ) -> None:
        record = af.event_record(kind, detail, next_step, sev)
        af.append_event(self.files, record)
        if kind in URGENT and self.notify_url:
            _notify(self.notify_url, record, self.files)

    def tick(self, now: float) -> bool:
        """One look; True when the watcher is done (disarmed, or this arming fired)."""
        policy = af.read_policy(self.files)
        if policy is None or os.path.exists(self.files.takeover):
            return True  # disarmed, or a newer arming's watcher takes over (with its webhook)
        if self.policy and policy["arm_id"] != self.policy.get("arm_id"):
            return True  # armed again: the watcher started with that arming takes over
        if policy["arm_id"] != self.policy.get("arm_id"):
            self.policy, self.state = policy, af.read_state(self.files, policy["arm_id"])
            self.next_gate = 0.0
        if af.fired_record(self.files, policy["arm_id"]) is not None:
            return True
        jobs = gate.job_states(self.files.root)
        self.preemption(jobs)
        self.budget_warnings(now)
        trigger = self.trigger(now, jobs)
        done = trigger is not None and self.settle(trigger, now, jobs)
        self.state.update(last_tick=now, watcher_pid=os.getpid())
        af.save_state(self.files, self.state)
        return done

    # -- preemption and money ----------------------------------------------------------------

    def preemption(self, jobs: List[Dict[str, Any]]) -> None:
        if self.state.get("preemption"):
            return
        notice = _preempt.poll(self.policy.get("preempt"))
        if notice is None:
            return
        self.state["preemption"] = dict(notice, seen=time.time())
        sent = _signal_agents(gate.running(jobs), signal.SIGUSR1)
        self.event(
            "preemption_notice",
            dict(notice, checkpoint_asked=sent),
            "the machine is being taken: the jobs checkpoint now; `rgt resume` them elsewhere",
            "error",
        )
        hook = self.policy.get("on_preempt")
        if hook:
            _spawn_hook(str(hook), self.files)

    def budget_warnings(self, now: float) -> None:
        budget = (self.policy.get("triggers") or {}).get("budget")
        so_far = af.spent(self.policy, now)
        if not budget or so_far is None:
            return
        amount = float(budget["amount"])
        for percent in WARN_AT:
            if so_far >= amount * percent / 100.0 and percent not in self.state["warned"]:
                self.state["warned"].append(percent)
                detail = {
                    "spent": so_far,
                    "budget": amount,
                    "percent": percent,
                    "currency": budget.get("currency"),
                }
                next_step = "at 100 % the jobs checkpoint and the machine stops"
                self.event("budget_%d" % percent, detail, next_step, "warning")

    # -- triggers --------------------------------------------------------------------------

    def trigger(self, now: float, jobs: List[Dict[str, Any]]) -> Optional[Tuple[str, bool]]:
        """(what fired, whether running jobs must checkpoint and stop first), or None."""
        triggers = self.policy.get("triggers") or {}
        budget = triggers.get("budget")
        so_far = af.spent(self.policy, now)
        if budget and so_far is not None and so_far >= float(budget["amount"]):
            return "spend cap %g %s reached (spent %.2f)" % (
                float(budget["amount"]),
                budget.get("currency") or "",
                so_far,
            ), True
        if triggers.get("at_epoch") and now >= float(triggers["at_epoch"]):
            return "the --at time %s came" % triggers.get("at"), True
        running = gate.running(jobs)
        if (
            triggers.get("after_jobs")
            and jobs
            and not running
            and all(j["state"] in gate.TERMINAL for j in jobs)
        ):
            return "every job ended", False
        return self.idle_trigger(now, triggers.get("idle_s"), running)

    def idle_trigger(
        self, now: float, idle_s: Any, running: List[Any]
    ) -> Optional[Tuple[str, bool]]:
        if not idle_s:
            return None
        if running or _gpu_busy():
            self.state["idle_since"] = None
            return None
        since = self.state.get("idle_since") or now
        self.state["idle_since"] = since
        if now - since >= float(idle_s):
            return "no job and an idle GPU for %d s" % int(now - since), False
        return None

    # -- the stop ----------------------------------------------------------------------------

    def settle(self, trigger: Tuple[str, bool], now: float, jobs: List[Dict[str, Any]]) -> bool:
        what, must_checkpoint = trigger
        running = gate.running(jobs)
        if must_checkpoint and running:
            return self.ask_checkpoint(what, now, running)
        fingerprint = repr([(j["job_id"], j["state"], j["agent_alive"]) for j in jobs])
        if now < self.next_gate and fingerprint == self.seen_jobs:
            return False
        self.seen_jobs = fingerprint
        why = gate.safe_to_stop(jobs, self.policy.get("survival") or [], self.state.get("asked_at"))
        if why:
            self.refused(what, why, now)
            return False
        return self.fire(what, now)

    def ask_checkpoint(self, what: str, now: float, running: List[Dict[str, Any]]) -> bool:
        """SIGTERM each running job's agent once (a job started later is asked too); then wait."""
        asked = self.state.setdefault("asked_jobs", [])
        new = [j for j in running if j["job_id"] not in asked]
        if new:
            self.state["asked_at"] = self.state.get("asked_at") or now
            sent = _signal_agents(new, signal.SIGTERM)
            asked.extend(j["job_id"] for j in new)
            self.event(
                "autostop_checkpoint",
                {"trigger": what, "jobs": sent},
                "the jobs save a checkpoint and stop; the machine stops after the commit",
            )
            return False
        limit = float(self.policy.get("checkpoint_wait_s") or 600)
        if now - float(self.state["asked_at"]) > limit:
            names = ", ".join(j["job_id"] for j in running)
            self.refused(
                what,
                "jobs %s did not stop within %d s of the checkpoint request" % (names, limit),
                now,
            )
        return False

    def refused(self, what: str, why: str, now: float) -> None:
        self.next_gate = now + _recheck_s()
        last = self.state.get("last_refusal") or {}
        self.state["last_refusal"] = {
            "time": _system.now_iso(),
            "trigger": what,
            "reason": why,
        }
        if last.get("reason") != why:
            # The state that explains the event is on disk before the event announces it: a
            # reader that saw the event (`rgt status`, a test) finds its reason in the state.
            af.save_state(self.files, self.state)
            self.event(
                "autostop_blocked",
                {"trigger": what, "reason": why},
                "the meter keeps running: make the results safe (or `rgt pull`, then `rgt down`)",
                "error",
            )

    def fire(self, what: str, now: float) -> bool:
        arm_id = str(self.policy["arm_id"])
        stop = self.policy.get("stop") or {}
        if not af.claim_fire(
            self.files,
            arm_id,
            {
                "time": _system.now_iso(),
                "trigger": what,
                "command": stop.get("command"),
            },
        ):
            return True
        self.event(
            "autostop_fired",
            {"trigger": what, "command": stop.get("command"), "source": stop.get("source")},
        )
        code, tail = _run_stop(str(stop.get("command") or "false"), self.files)
        self.state["stop"] = {"exit_code": code, "output": tail, "ended": time.time()}
        if code == 0:
            self.event("autostop_stop_ran", {"exit_code": 0, "output": tail})
        else:
            self.event(
                "autostop_stop_failed",
                {"exit_code": code, "output": tail},
                "the meter may still run: stop the machine in the console now",
                "error",
            )
        return True


def _recheck_s() -> float:
    try:
        return float(os.environ.get("RGT_AUTOSTOP_RECHECK_S") or RECHECK_S)
    except ValueError:
        return RECHECK_S


def _signal_agents(jobs: List[Dict[str, Any]], signum: int) -> List[str]:
    """Signal each job's agent (never the job directly: the agent forwards and records)."""
    sent = []
    for job in jobs:
        pid = job.get("agent_pid")
        if isinstance(pid, int) and pid > 1:
            try:
                os.kill(pid, signum)
                sent.append(str(job["job_id"]))
            except OSError:
                pass
    return sent


def _gpu_busy() -> bool:
    from rgt.agent.probes import gpu

    reading = gpu.read()
    return any((g.get("util_pct") or 0) > 0 for g in reading.get("gpus") or []) or bool(
        reading.get("processes")
    )


def _run_stop(command: str, files: af.AutostopFiles) -> Tuple[int, str]:
    try:
        proc = subprocess.run(
            ["sh", "-c", command],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            timeout=STOP_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return 127, str(exc)[-2000:]
    out = proc.stdout.decode("utf-8", "replace")[-2000:]
    af.log(files, "stop action exited %d: %s" % (proc.returncode, out))
    return proc.returncode, out


def _spawn_hook(command: str, files: af.AutostopFiles) -> None:
    with open(files.log, "ab") as out:
        subprocess.Popen(
            ["sh", "-c", command],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            close_fds=True,
        )


def _notify(url: str, record: Dict[str, Any], files: af.AutostopFiles) -> None:
    import urllib.request

    from rgt.agent import _webhook

    try:
        with urllib.request.urlopen(_webhook.request(url, record), timeout=10) as response:
            response.read()
    except Exception as exc:  # a dead webhook never stops the watcher
        af.log(files, "webhook POST failed (%s)" % type(exc).__name__)


# -- the process ---------------------------------------------------------------------------


def main(argv: List[str], version: str) -> int:
    """``autostop ROOT [--secrets-stdin] [--once]``: watch until disarmed or fired."""
    import argparse

    parser = argparse.ArgumentParser(prog="rgt-agent autostop")
    parser.add_argument("root", metavar="ROOT", help="<durable>/.rgt")
    parser.add_argument("--secrets-stdin", action="store_true", help="the webhook, as JSON")
    parser.add_argument("--once", action="store_true", help="one tick, in the foreground")
    parser.add_argument("--takeover", action="store_true", help="a running watcher hands over")
    args = parser.parse_args(argv)
    root = os.path.realpath(args.root)
    files = af.AutostopFiles(root)
    notify = _read_notify() if args.secrets_stdin else None
    if af.lock_watcher(files, wait_s=TAKEOVER_S if args.takeover else 0.0) is None:
        sys.stderr.write("rgt-agent: an autostop watcher already runs for %s\n" % root)
        return 0
    watcher = Watcher(root, notify)
    af.log(files, "watcher %s started (pid %d)" % (version, os.getpid()))
    while True:
        try:
            done = watcher.tick(time.time())
        except Exception:  # never die silently: the log says why, the next start resumes
            import traceback

            af.log(files, "tick failed:\n" + traceback.format_exc())
            done = False
        if done or args.once:
            return 0
        time.sleep(_tick_s(watcher.policy))


def _tick_s(policy: Dict[str, Any]) -> float:
    try:
        return max(0.2, min(5.0, float(policy.get("tick_s") or 5.0)))
    except (TypeError, ValueError):
        return 5.0


def _read_notify() -> Optional[str]:
    import json

    from rgt.agent._webhook import NOTIFY_SECRET

    try:
        doc = json.loads(sys.stdin.read() or "{}")
    except ValueError:
        return None
    url = doc.get(NOTIFY_SECRET) if isinstance(doc, dict) else None
    return url if isinstance(url, str) else None


def ensure_watcher(root: str, agent_file: str, notify_url: Optional[str] = None) -> bool:
    """Start the watcher when a policy is armed, not fired, and no watcher holds the lock: the
    job agent and ``patrol`` call this, so a watcher killed (kill -9, a reboot) comes back
    with the next job or the next `rgt status`. True when one was started."""
    files = af.AutostopFiles(root)
    policy = af.read_policy(files)
    if policy is None or af.fired_record(files, str(policy["arm_id"])) is not None:
        return False
    if af.watcher_alive(files) or not agent_file.endswith(".pyz"):
        return False
    argv = [sys.executable, "-S", agent_file, "autostop", root]
    if notify_url:
        argv.append("--secrets-stdin")
    with open(files.log, "ab") as out:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            close_fds=True,
            cwd="/",
        )
    if notify_url and proc.stdin is not None:
        import json

        from rgt.agent._webhook import NOTIFY_SECRET

        proc.stdin.write(json.dumps({NOTIFY_SECRET: notify_url}).encode())
    if proc.stdin is not None:
        proc.stdin.close()
    return True


def patrol_hook(root: str) -> Dict[str, Any]:
    """``patrol``'s autostop line (`rgt status`/`watch`), restarting a watcher that died."""
    try:
        ensure_watcher(root, sys.argv[0] if sys.argv else "")
        return af.report(root)
    except Exception as exc:  # the autostop line never breaks a patrol
        return {"armed": None, "error": "%s: %s" % (type(exc).__name__, exc)}


def job_hook(job_dir: str, notify_url: Optional[str]) -> None:
    """Called as a job's agent starts: the armed policy's watcher runs while jobs do."""
    try:
        root = os.path.dirname(os.path.dirname(os.path.realpath(job_dir)))
        ensure_watcher(root, sys.argv[0] if sys.argv else "", notify_url)
    except Exception as exc:  # never a reason for a job not to run
        sys.stderr.write("rgt-agent: autostop watcher not started (%s)\n" % exc)
