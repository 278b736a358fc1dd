"""Machine-wide agent subcommands: one call answers a whole question in one round trip.

    patrol ROOT          every job's status, liveness, last events and progress, plus the
                         machine's disk, memory, /dev/shm and GPUs (what `rgt watch` shows)
    audit ROOT [--path P]...   phase-0 readings: every storage tier, cgroup limits, CPU quota,
                         GPUs and driver, Xid lines, Python/torch/CUDA of the image
    reap ROOT [--kill PID]...  processes holding GPU memory that are not running jobs; with
                         --kill, stop exactly those PIDs (re-checked now, never a running job)

ROOT is ``<durable>/.rgt``. Output is one JSON document on stdout.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from typing import Any, Dict, List, Tuple

from rgt.agent import _autostop, _system, jobfiles
from rgt.agent._record import read_status
from rgt.agent.paths import JobPaths
from rgt.agent.probes import cgroup, disk, gpu, host, progress, pyenv, routes

TERMINAL = jobfiles.TERMINAL
EVENTS_TAIL_BYTES = 32 * 1024
TORCH_PROBE = (
    "import json, torch; print(json.dumps({'torch': torch.__version__, "
    "'cuda': torch.version.cuda, 'cuda_available': torch.cuda.is_available(), "
    "'device_count': torch.cuda.device_count()}))"
)


def emit(doc: Dict[str, Any]) -> int:
    sys.stdout.write(json.dumps(doc, indent=2, sort_keys=True, default=str) + "\n")
    return 0


def job_dirs(root: str) -> List[JobPaths]:
    jobs = os.path.join(root, "jobs")
    try:
        names = sorted(os.listdir(jobs))
    except OSError:
        return []
    return [
        JobPaths(os.path.join(jobs, n), n) for n in names if os.path.isdir(os.path.join(jobs, n))
    ]


def tail_events(paths: JobPaths, count: int) -> Tuple[List[Dict[str, Any]], int]:
    """The last ``count`` events and how many lines of the tail were not events (cut by a
    full disk, or not JSON objects); the tail's first line, cut by the read, is not counted."""
    text = progress.read_tail(paths.events, EVENTS_TAIL_BYTES)
    if len(text.encode("utf-8")) >= EVENTS_TAIL_BYTES:
        text = text.split("\n", 1)[-1]
    events, skipped = jobfiles.parse_events(text)
    return (events[len(events) - count :] if count > 0 else []), skipped


def job_report(paths: JobPaths, status_of: Any, events: int) -> Dict[str, Any]:
    doc = status_of(paths.root)  # type: Dict[str, Any]
    attempt = int(doc.get("attempt") or 0)
    log_path = paths.log(max(attempt, 1))
    try:
        doc["log_age_s"] = round(time.time() - os.stat(log_path).st_mtime, 1)
    except OSError:
        doc["log_age_s"] = None
    doc["progress"] = progress.latest(log_path, paths.output_dir)
    tail = events if doc.get("state") not in TERMINAL else 3
    doc["events"], doc["events_skipped"] = tail_events(paths, tail)
    return doc


def patrol(root: str, status_of: Any, events: int, with_gpu: bool, version: str) -> int:
    durable = os.path.dirname(root.rstrip("/"))
    machine = host.readings()
    machine.update(disk=disk.usage(durable), memory=cgroup.memory(None))
    machine["gpu"] = gpu.read() if with_gpu else None
    jobs = [job_report(p, status_of, events) for p in job_dirs(root)]
    return emit(
        {
            "schema": "rgt.patrol/1",
            "time": _system.now_iso(),
            "agent_version": version,
            "host": _system.hostname(),
            "machine": machine,
            "jobs": jobs,
            "autostop": _autostop.patrol_hook(root),
        }
    )


def audit(
    root: str,
    tiers: List[str],
    version: str,
    expected: Any = None,
    env: Any = None,
    route_urls: Any = (),
) -> int:
    """``expected``: the interpreter the profile names; ``env``: what jobs get on top of this
    (non-interactive ssh) environment, e.g. the network plan's variables; ``route_urls``:
    ``(KIND:LABEL, URL)`` download routes to time."""
    os.environ.update(env or {})  # one-shot process: probes below see what a job sees
    job_env = dict(os.environ)
    durable = os.path.dirname(root.rstrip("/"))
    paths = [durable, *tiers]
    doc = {
        "schema": "rgt.audit/1",
        "time": _system.now_iso(),
        "agent_version": version,
        "host": _system.hostname(),
    }  # type: Dict[str, Any]
    doc.update(host.readings())
    doc["tiers"] = [dict(disk.usage(p), tier=p) for p in paths]
    doc["memory"] = cgroup.memory(None)
    doc["cpu_quota"] = cgroup.cpu_quota()
    doc["gpu"] = gpu.read()
    doc["xid"] = gpu.read_xids()
    doc["cuda_driver"] = _driver_cuda()
    doc["python"] = {"executable": sys.executable, "version": sys.version.split()[0]}
    doc["interpreters"] = pyenv.interpreters(expected, job_env)
    job_python = pyenv.job_python(doc["interpreters"])
    doc["torch"] = _torch(job_python) if job_python else {"installed": False, "error": "no python"}
    doc["torch"]["python"] = job_python
    prefix = doc["interpreters"].get("expected") or doc["interpreters"].get("python3") or {}
    home = job_env.get("HOME") or os.path.expanduser("~")
    doc["caches"] = pyenv.caches(job_env, home, prefix.get("prefix"))
    doc["routes"] = [_route(name, url) for name, url in route_urls]
    return emit(doc)


def _route(name: str, url: str) -> Dict[str, Any]:
    kind, _sep, label = name.partition(":")
    hook = os.environ.get("RGT_PROXY_HOOK", "") if label == "accelerator" else None
    reading = dict(routes.probe(url, hook=hook))  # type: Dict[str, Any]
    reading.update(kind=kind, label=label, url=url)
    return reading


def _driver_cuda() -> Any:
    """The highest CUDA the driver supports, from the nvidia-smi banner."""
    _code, text = gpu._run([])
    for line in text.splitlines():
        if "CUDA Version:" in line:
            return line.split("CUDA Version:", 1)[1].strip(" |").split()[0]
    return None


def _torch(python: str) -> Dict[str, Any]:
    """torch as the job's interpreter has it; importing it takes seconds, so in a child with a
    timeout."""
    try:
        proc = subprocess.run(
            [python, "-c", TORCH_PROBE],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            timeout=120,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return {"installed": False, "error": str(exc)}
    if proc.returncode != 0:
        last = (proc.stderr.decode("utf-8", "replace").strip().splitlines() or ["?"])[-1]
        return {"installed": False, "error": last[:300]}
    data = json.loads(proc.stdout.decode("utf-8", "replace").strip().splitlines()[-1])
    data["installed"] = True
    return dict(data)


def vram_suspects(root: str) -> List[Dict[str, Any]]:
    """Processes with a CUDA context (device fd or nvidia-smi compute app) that are not
    processes of a running job under ``root``."""
    holders = host.device_holders()
    reading = gpu.read()
    used = {app["pid"]: app for app in reading["processes"]}
    suspects = []
    for pid in sorted(set(holders) | set(used)):
        info = host.process_info(pid)
        why = _not_a_job(info, root)
        if why is None or pid == os.getpid():
            continue
        info.update(
            devices=holders.get(pid, []), used_mib=used.get(pid, {}).get("used_mib"), why=why
        )
        suspects.append(info)
    return suspects


def _not_a_job(info: Dict[str, Any], root: str) -> Any:
    job_dir = info.get("job_dir")
    if not job_dir:
        return "not started by rgt"
    jobs = os.path.join(root, "jobs") + "/"
    if not job_dir.startswith(jobs):
        return "a job of another rgt root (%s)" % job_dir
    status = read_status(JobPaths(job_dir, os.path.basename(job_dir))) or {}
    if status.get("state") in TERMINAL:
        return "its job %s ended (%s)" % (os.path.basename(job_dir), status["state"])
    return None


def reap(root: str, kill: List[int]) -> int:
    suspects = vram_suspects(root)
    doc = {
        "schema": "rgt.reap/1",
        "suspects": suspects,
        "killed": [],
        "refused": [],
    }  # type: Dict[str, Any]
    allowed = {s["pid"]: s for s in suspects}
    for pid in kill:
        if pid not in allowed:
            doc["refused"].append({"pid": pid, "why": "not a suspect now (gone, or a running job)"})
            continue
        doc["killed"].append({"pid": pid, "signals": _stop(pid)})
    return emit(doc)


def _stop(pid: int) -> List[int]:
    sent = []
    for signum, wait_s in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 2.0)):
        try:
            os.kill(pid, signum)
        except (ProcessLookupError, PermissionError):
            break
        sent.append(int(signum))
        deadline = time.monotonic() + wait_s
        while _system.pid_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        if not _system.pid_alive(pid):
            break
    return sent
