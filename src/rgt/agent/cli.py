"""``python3 agent-<version>.pyz run|status|cancel JOB_DIR`` - the agent's command line.

``run`` is started by a backend that has already detached it (setsid/nohup, tmux, sbatch, a
Kubernetes Job) and must keep working after whoever started it is gone: it takes a lock so
that one job never has two agents, then points its own stdout and stderr at
``JOB_DIR/agent.log`` so that it never writes into the pipe of a dead ssh session.

``patrol|audit|reap ROOT`` answer machine-wide questions in one call (``_machine``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any, Dict, List, Optional, Tuple

from rgt import _fs
from rgt.agent import _system, jobfiles
from rgt.agent._liveness import status_doc, try_lock
from rgt.agent._record import JobRecorder, log, read_status
from rgt.agent.paths import JobPaths

SPEC_SCHEMA = "rgt.spec/1"
TERMINAL = jobfiles.TERMINAL
AGENT_LOG = "agent.log"


def main(argv: Optional[List[str]] = None, version: str = "dev") -> int:
    if argv and argv[0] == "autostop":  # the machine's autostop watcher (_autostop)
        from rgt.agent import _autostop

        return _autostop.main(argv[1:], version)
    parser = argparse.ArgumentParser(prog="rgt-agent", description=__doc__)
    parser.add_argument("--version", action="version", version=version)
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="supervise the job (foreground; detach it yourself)")
    run.add_argument(
        "--secrets-stdin",
        action="store_true",
        help="read one JSON object {NAME: value} of secret env vars from stdin",
    )
    sub.add_parser("status", help="print status.json plus liveness as JSON")
    sub.add_parser("cancel", help="stop the job (whole process group); no retry")
    for name in ("run", "status", "cancel"):
        sub.choices[name].add_argument("job_dir", metavar="JOB_DIR")
    _machine_parsers(sub)
    args = parser.parse_args(argv)
    if args.command in ("patrol", "audit", "reap"):
        return cmd_machine(args, version)
    job_dir = os.path.realpath(args.job_dir)
    if not os.path.isdir(job_dir):
        sys.stderr.write("rgt-agent: no job directory %s; run `rgt run` to create it\n" % job_dir)
        return 1
    if args.command == "run":
        return cmd_run(job_dir, bool(args.secrets_stdin), version)
    return cmd_status(job_dir) if args.command == "status" else cmd_cancel(job_dir)


def cmd_run(job_dir: str, secrets_stdin: bool, version: str) -> int:
    secrets = read_secrets() if secrets_stdin else {}
    if secrets is None:
        say("rgt-agent: stdin must hold one JSON object of string values")
        return 1
    try:
        lock = try_lock(job_dir)
    except OSError as exc:  # no inode for agent.lock: without it two agents could run
        say(
            "rgt-agent: cannot create %s/agent.lock (%s); free space, then start again"
            % (job_dir, exc.strerror)
        )
        return 1
    if lock is None:
        say(
            "rgt-agent: an agent is already running for %s; not starting a "
            "second one (see `status`)" % job_dir
        )
        return 0
    redirect_stdio(job_dir)
    write_pid(job_dir)
    log("agent %s started on Python %s" % (version, sys.version.split()[0]))
    spec, problem = load_spec(job_dir)
    if problem:
        return record_bad_spec(job_dir, problem)
    from rgt.agent.supervisor import Supervisor, install_signal_handlers

    supervisor = Supervisor(job_dir, spec, secrets, version)
    install_signal_handlers(supervisor)
    try:
        return supervisor.run()
    except OSError as exc:  # a write no other layer caught: the disk, never a hang
        if exc.errno not in jobfiles.DISK_ERRNOS:
            return crashed()
        log("the disk refused a write (%s); failing the job as disk_full" % exc)
        return supervisor.finish("failed", "the disk refused a write: %s" % exc, "disk_full")
    except Exception:  # status stays non-terminal: the next agent resumes the job
        return crashed()


def crashed() -> int:
    import traceback

    log("agent crashed:\n" + traceback.format_exc())
    return 1


def write_pid(job_dir: str) -> None:
    """agent.pid helps a reader whose status.json is gone; status.json carries the pid too,
    so a full disk here is noted and survived."""
    try:
        _fs.atomic_write_bytes(os.path.join(job_dir, "agent.pid"), b"%d\n" % os.getpid())
    except OSError as exc:
        log("cannot write agent.pid (%s); status.json carries the pid" % exc)


def say(message: str) -> None:
    """A message to whoever started us; they may be gone (closed pipe), which is fine."""
    try:
        sys.stderr.write(message + "\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


def read_secrets() -> Optional[Dict[str, str]]:
    """Secrets arrive on stdin (over ssh) and live only in memory and the job's environment."""
    try:
        data = json.loads(sys.stdin.read() or "{}")
    except ValueError:
        return None
    if not isinstance(data, dict) or not all(isinstance(v, str) for v in data.values()):
        return None
    return {str(k): v for k, v in data.items()}


def redirect_stdio(job_dir: str) -> None:
    """stdin from /dev/null; stdout and stderr append to agent.log (fd level, so the
    interpreter's own messages land there too)."""
    try:
        log_fd = os.open(
            os.path.join(job_dir, AGENT_LOG), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644
        )
    except OSError:  # no inode left for agent.log: the agent runs on, without its log
        log_fd = os.open(os.devnull, os.O_WRONLY)
    null_fd = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null_fd, 0)
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    os.close(null_fd)
    os.close(log_fd)


def load_spec(job_dir: str) -> Tuple[Dict[str, Any], str]:
    try:
        spec = _fs.read_json(os.path.join(job_dir, "spec.json"))
    except (OSError, ValueError) as exc:
        return {}, "spec.json is unreadable (%s)" % exc
    if not isinstance(spec, dict) or spec.get("schema") != SPEC_SCHEMA:
        return {}, "spec.json is not a %s document" % SPEC_SCHEMA
    command = spec.get("command")
    if not command or not isinstance(command, list) or not all(isinstance(a, str) for a in command):
        return {}, "spec.json field 'command' must be a non-empty list of strings"
    if not isinstance(spec.get("job_id"), str):
        return {}, "spec.json field 'job_id' must be a string"
    return spec, ""


def record_bad_spec(job_dir: str, problem: str) -> int:
    log(problem)
    rec = JobRecorder(JobPaths(job_dir, os.path.basename(job_dir)), [])
    rec.update(state="failed", ended=_system.now_iso(), reason=problem, label="unknown")
    rec.event("failed", {"reason": problem}, "rewrite spec.json with `rgt run` and start again")
    return 1


def _machine_parsers(sub: Any) -> None:
    patrol = sub.add_parser("patrol", help="every job and the machine's readings, as JSON")
    patrol.add_argument("--events", type=int, default=8, help="last N events per running job")
    patrol.add_argument("--no-gpu", action="store_true", help="skip nvidia-smi")
    audit = sub.add_parser("audit", help="phase-0 readings of the machine, as JSON")
    audit.add_argument("--path", action="append", default=[], help="a storage tier to measure")
    audit.add_argument("--python", default=None, help="the interpreter the profile expects")
    audit.add_argument("--env", action="append", default=[], help="K=V a job gets (repeatable)")
    audit.add_argument("--route", action="append", default=[], help="KIND:LABEL=URL to time")
    reap = sub.add_parser("reap", help="GPU memory held by processes that are not jobs")
    reap.add_argument("--kill", type=int, action="append", default=[], metavar="PID")
    for name in ("patrol", "audit", "reap"):
        sub.choices[name].add_argument("root", metavar="ROOT", help="<durable>/.rgt")


def cmd_machine(args: Any, version: str) -> int:
    from rgt.agent import _machine

    root = os.path.realpath(args.root)
    if args.command == "patrol":
        return _machine.patrol(root, status_doc, args.events, not args.no_gpu, version)
    if args.command == "audit":
        env = dict(pair.partition("=")[::2] for pair in args.env)
        routes = [pair.partition("=")[::2] for pair in args.route]
        return _machine.audit(root, list(args.path), version, args.python, env, routes)
    return _machine.reap(root, list(args.kill))


def cmd_status(job_dir: str) -> int:
    sys.stdout.write(json.dumps(status_doc(job_dir), indent=2, sort_keys=True) + "\n")
    return 0


def cmd_cancel(job_dir: str) -> int:
    paths = JobPaths(job_dir, os.path.basename(job_dir))
    status = read_status(paths) or {}
    doc = {
        "job_id": status.get("job_id", paths.job_id),
        "cancel_requested": False,
        "signals_sent": [],
    }  # type: Dict[str, Any]
    if status.get("state") in TERMINAL:
        doc.update(state=status["state"], reason="the job already ended")
        return _print(doc)
    _fs.atomic_write_json(paths.cancel_request, {"time": _system.now_iso(), "pid": os.getpid()})
    doc["cancel_requested"] = True
    grace = _system.env_float("RGT_AGENT_CANCEL_GRACE_S", 10.0)
    doc["signals_sent"] = _signal_job(status.get("pid"), job_dir, grace)
    doc["state"] = _wait_end(job_dir, paths, status, grace + 5.0)
    return _print(doc)


def _signal_job(pid: Any, job_dir: str, grace: float) -> List[int]:
    if isinstance(pid, int) and _system.process_belongs_to_job(pid, job_dir):
        return _system.terminate_group(pid, grace)
    return []


def _cancel_without_agent(job_dir: str, status: Dict[str, Any]) -> str:
    spec, problem = load_spec(job_dir)
    if problem:
        return str(status.get("state", "queued"))
    from rgt.agent.supervisor import Supervisor

    supervisor = Supervisor(job_dir, spec, {})
    supervisor.rec.adopt(status)
    supervisor.finish("cancelled", "cancelled on request (no agent was running)")
    return "cancelled"


def _wait_end(job_dir: str, paths: JobPaths, status: Dict[str, Any], timeout_s: float) -> str:
    """Until the agent records the end, or lets go of the job without recording one (no agent
    was running, or it was killed before its handlers were in place): then this process
    records ``cancelled`` itself, holding the job's lock."""
    deadline = time.monotonic() + timeout_s
    while True:
        state = str((read_status(paths) or status).get("state", "queued"))
        if state in TERMINAL:
            return state
        if try_lock(job_dir) is not None:  # kept until this process exits
            now = read_status(paths) or status
            if now.get("state") in TERMINAL:
                return str(now["state"])
            return _cancel_without_agent(job_dir, now)
        if time.monotonic() >= deadline:
            return state
        time.sleep(0.1)


def _print(doc: Dict[str, Any]) -> int:
    sys.stdout.write(json.dumps(doc, indent=2, sort_keys=True) + "\n")
    return 0
