"""GPU assignment on a multi-GPU box: ``rgt run --gpus [TYPE:]N`` on an ssh/local machine.

Without it every job sees every GPU, and two jobs on one 8-GPU rental both start on GPU 0 (the
second dies of CUDA OOM, or both crawl). The agent picks the GPUs before the attempt starts:

- a GPU is free when no running rgt job holds it (the lock file) and ``nvidia-smi`` shows
  little memory used on it (a process rgt did not start: someone's notebook, another user);
- the job gets ``CUDA_VISIBLE_DEVICES`` with nvidia-smi's indices and ``CUDA_DEVICE_ORDER=
  PCI_BUS_ID``: CUDA's own default order (fastest first) differs from nvidia-smi's on a box with
  mixed cards, and indices, unlike UUIDs, are understood by every launcher;
- not enough free GPUs: the attempt does not start, and the reason names the holders (job ids
  and GPUs) and the busy cards;
- ``--gpus 0``: ``CUDA_VISIBLE_DEVICES=""``, the job sees no GPU (nothing is locked).

The lock file lives on the machine's own disk (``/tmp/rgt-gpus-<uid>/``, not the durable root,
which may be a filesystem several machines share) and is changed under ``flock``. A holder is
stale, and its GPUs free again, when the machine rebooted since (boot id), or when neither its
agent nor its job's process group is alive (pid + process start time, so a reused pid is not
mistaken for the holder): a ``kill -9`` of the agent leaves the job running on its GPUs, and
they stay held until that job is gone too.

A lock that cannot be written (a full disk) refuses the attempt with that reason; it never
crashes the agent. A MIG-partitioned card counts as one GPU here (its instances are not assigned
one by one). Stdlib only, Python >= 3.8 (runs inside the agent).
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import subprocess
from typing import Any, Dict, List, Optional, Tuple

from rgt.agent import _system
from rgt.agent._classify import Decision
from rgt.agent._record import log

QUERY = "index,uuid,name,memory.used,memory.total"
BUSY_MIB = 1024.0  # more memory used than this, by no rgt job: someone else's process
LOCK_FILE = "gpus.json"


class Gpu(object):
    def __init__(self, index: int, uuid: str, name: str, used_mib: float, total_mib: float):
        self.index, self.uuid, self.name = index, uuid, name
        self.used_mib, self.total_mib = used_mib, total_mib


def parse_smi(text: str) -> List[Gpu]:
    """``nvidia-smi --query-gpu=index,uuid,name,memory.used,memory.total --format=csv,
    noheader,nounits`` lines; a value nvidia-smi cannot read ("[N/A]") counts as busy."""
    gpus = []
    for line in text.splitlines():
        cells = [cell.strip() for cell in line.split(",")]
        if len(cells) != 5 or not cells[0].isdigit():
            continue
        gpus.append(Gpu(int(cells[0]), cells[1], cells[2], _mib(cells[3]), _mib(cells[4])))
    return gpus


def _mib(cell: str) -> float:
    try:
        return float(cell)
    except ValueError:
        return float("inf")


def query_gpus() -> Optional[List[Gpu]]:
    """The machine's GPUs by nvidia-smi; None when it is missing or fails."""
    argv = ["nvidia-smi", "--query-gpu=" + QUERY, "--format=csv,noheader,nounits"]
    try:
        done = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    if done.returncode != 0:
        return None
    return parse_smi(done.stdout.decode("utf-8", "replace"))


def request_of(text: Optional[str]) -> Optional[Tuple[Optional[str], int]]:
    """The spec's ``gpus`` ("A100:2", "2", "0") as (type or None, count); None: not asked."""
    if text is None or str(text) == "":
        return None
    gpu_type, _, count = str(text).rpartition(":")
    return (gpu_type or None), int(count)


def process_start(pid: int) -> Optional[str]:
    """The process's start time in clock ticks since boot (/proc/PID/stat field 22); None
    when it is gone or a zombie."""
    try:
        with open("/proc/%d/stat" % pid, "rb") as handle:
            stat = handle.read().decode("ascii", "replace")
    except OSError:
        return None
    fields = stat[stat.rfind(")") + 2 :].split()
    if len(fields) < 20 or fields[0] in ("Z", "X"):
        return None  # a zombie holds nothing (a container's PID 1 may never reap it)
    return fields[19]


def _same_process(pid: Any, start: Any) -> bool:
    return isinstance(pid, int) and pid > 0 and process_start(pid) == start


def _group_alive(pgid: Any, start: Any) -> bool:
    """The job's process group still has a member. A pgid is never reused while its group
    lives; a new process of that pid leading its own group is not ours."""
    if not isinstance(pgid, int) or pgid <= 0:
        return False
    now = process_start(pgid)
    if now is not None and now != start:
        return False
    return _system.group_alive(pgid)


def stale(holder: Dict[str, Any], boot: Optional[str]) -> bool:
    if holder.get("boot_id") != boot:
        return True
    agent, job = holder.get("agent") or {}, holder.get("job") or {}
    return not (
        _same_process(agent.get("pid"), agent.get("start"))
        or _group_alive(job.get("pgid"), job.get("start"))
    )


def lock_dir(fallback: str) -> str:
    """``$RGT_GPU_LOCK_DIR``, else ``/tmp/rgt-gpus-<uid>`` (this user's, mode 0700), else
    ``fallback`` when /tmp holds a directory of that name that is not ours."""
    chosen = os.environ.get("RGT_GPU_LOCK_DIR")
    if chosen:
        os.makedirs(chosen, exist_ok=True)
        return chosen
    path = "/tmp/rgt-gpus-%d" % os.getuid()
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    except OSError:
        return fallback
    info = os.lstat(path)
    return path if info.st_uid == os.getuid() and os.path.isdir(path) else fallback


class Holders(object):
    """The lock file, read and written under an exclusive ``flock`` (``with Holders(dir)``)."""

    def __init__(self, directory: str) -> None:
        self.path = os.path.join(directory, LOCK_FILE)
        self.holders = []  # type: List[Dict[str, Any]]
        self._fd = -1

    def __enter__(self) -> "Holders":
        self._fd = os.open(self.path + ".lock", os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(self._fd, fcntl.LOCK_EX)
        try:
            with open(self.path) as handle:
                data = json.load(handle)
            self.holders = [h for h in data.get("holders", []) if isinstance(h, dict)]
        except (OSError, ValueError, AttributeError):
            self.holders = []  # no file yet, or a cut one: nvidia-smi still guards
        boot = _system.boot_id()
        self.holders = [h for h in self.holders if not stale(h, boot)]
        return self

    def save(self) -> None:
        tmp = "%s.%d.tmp" % (self.path, os.getpid())
        with open(tmp, "w") as handle:
            json.dump({"holders": self.holders}, handle, indent=1)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, self.path)

    def __exit__(self, *exc: Any) -> None:
        fcntl.flock(self._fd, fcntl.LOCK_UN)
        os.close(self._fd)

    def others(self, job_id: str) -> List[Dict[str, Any]]:
        return [h for h in self.holders if h.get("job_id") != job_id]


def matches(gpu: Gpu, gpu_type: Optional[str]) -> bool:
    """``A100`` matches "NVIDIA A100-SXM4-80GB", ``4090`` and ``RTX4090`` "NVIDIA GeForce RTX
    4090": letters and digits only, case ignored."""
    if not gpu_type:
        return True
    squash = re.compile(r"[^a-z0-9]")
    return squash.sub("", gpu_type.lower()) in squash.sub("", gpu.name.lower())


class GpuClaim(object):
    """One job's GPUs on this machine: ``claim`` before an attempt starts, ``track`` its
    process group, ``release`` when it ended. ``env`` is what the job's environment gets."""

    def __init__(self, paths: Any, spec: Dict[str, Any]) -> None:
        self.request = request_of(spec.get("gpus"))
        self.job_id = str(paths.job_id)
        self.fallback = os.path.dirname(os.path.dirname(paths.root))  # <durable>/.rgt
        self.env = {}  # type: Dict[str, str]
        self.directory = ""

    def claim(self, rec: Any) -> Optional[Decision]:
        """None when the job may start (``env`` set); else the refusal, naming the holders."""
        if self.request is None:
            return None
        gpu_type, count = self.request
        chosen, refused = self._choose(gpu_type, count) if count else ([], None)
        if refused is not None:
            return refused
        self.env = cuda_env(chosen)
        detail = {"requested": count, "type": gpu_type, "indices": [g.index for g in chosen]}
        rec.event("gpus_assigned", dict(detail, uuids=[g.uuid for g in chosen]))
        return None

    def _choose(self, gpu_type: Optional[str], count: int) -> Tuple[List[Gpu], Optional[Decision]]:
        said = _said(gpu_type, count)
        gpus = query_gpus()
        if not gpus:
            return [], _refusal(
                "--gpus %s: nvidia-smi lists no GPU on this machine" % said,
                "drop --gpus, or check the driver: `nvidia-smi` must list the GPUs",
            )
        directory = os.environ.get("RGT_GPU_LOCK_DIR") or self.fallback
        try:
            directory = lock_dir(self.fallback)
            chosen, why = self._lock(directory, gpus, gpu_type, count)
        except OSError as exc:  # a full or read-only disk: say so, never crash the agent
            return [], _refusal(
                "--gpus %s: cannot write the GPU lock in %s: %s" % (said, directory, exc),
                "free space there, or point RGT_GPU_LOCK_DIR at a writable local directory",
            )
        if chosen is None:
            return [], _refusal(why[0], why[1], why[2:])
        self.directory = directory
        return chosen, None

    def _lock(
        self, directory: str, gpus: List[Gpu], gpu_type: Optional[str], count: int
    ) -> Tuple[Optional[List[Gpu]], List[str]]:
        with Holders(directory) as holders:
            chosen, why = pick(gpus, holders.others(self.job_id), gpu_type, count)
            if chosen is not None:
                holders.holders = [*holders.others(self.job_id), self._entry(chosen)]
                holders.save()
        return chosen, why

    def _entry(self, chosen: List[Gpu]) -> Dict[str, Any]:
        pid = os.getpid()
        return {
            "job_id": self.job_id,
            "gpus": [g.uuid for g in chosen],
            "indices": [g.index for g in chosen],
            "boot_id": _system.boot_id(),
            "agent": {"pid": pid, "start": process_start(pid)},
            "job": {},
            "since": _system.now_iso(),
        }

    def track(self, pgid: int) -> None:
        """The attempt's process group holds the GPUs too (it outlives a ``kill -9``'d agent)."""
        self._update(lambda h: h.update(job={"pgid": pgid, "start": process_start(pgid)}))

    def release(self) -> None:
        self._update(None)

    def _update(self, change: Any) -> None:
        """Change or drop this job's entry. A lock that cannot be written now goes stale on
        its own once the job and its agent are gone."""
        if not self.directory:
            return
        try:
            self._rewrite(change)
        except OSError as exc:
            log("GPU lock not updated: %s" % exc)
        if change is None:
            self.directory = ""

    def _rewrite(self, change: Any) -> None:
        with Holders(self.directory) as holders:
            mine = [h for h in holders.holders if h.get("job_id") == self.job_id]
            holders.holders = holders.others(self.job_id)
            if change is not None:
                for holder in mine:
                    change(holder)
                holders.holders += mine
            holders.save()


def pick(
    gpus: List[Gpu], others: List[Dict[str, Any]], gpu_type: Optional[str], count: int
) -> Tuple[Optional[List[Gpu]], List[str]]:
    """The ``count`` lowest-index free GPUs; else None and (cause, remedy, evidence…)."""
    taken = {}  # type: Dict[str, Dict[str, Any]]
    for holder in others:
        for uuid in holder.get("gpus") or []:
            taken[str(uuid)] = holder
    kind = [g for g in gpus if matches(g, gpu_type)]
    busy_mib = _system.env_float("RGT_GPU_BUSY_MIB", BUSY_MIB)
    free = [g for g in kind if g.uuid not in taken and g.used_mib <= busy_mib]
    if len(free) >= count:
        return sorted(free, key=lambda g: g.index)[:count], []
    evidence = _holders_said(kind, taken) + [
        "GPU %d (%s): %.0f of %.0f MiB used by a process rgt did not start"
        % (g.index, g.name, g.used_mib, g.total_mib)
        for g in kind
        if g.uuid not in taken and g.used_mib > busy_mib
    ]
    names = sorted({g.name for g in gpus})
    cause = "--gpus %s: %d of this machine's %d %s free (%s)" % (
        _said(gpu_type, count),
        len(free),
        len(kind),
        "%s GPU(s)" % gpu_type if gpu_type else "GPU(s)",
        "; ".join(evidence) if evidence else "it has: %s" % ", ".join(names),
    )
    remedy = (
        "wait for the holders to end (`rgt status`), cancel one (`rgt cancel JOB`), or ask "
        "for fewer GPUs (--gpus N)"
        if kind
        else "give a type this machine has (%s), or none: --gpus %d" % (", ".join(names), count)
    )
    return None, [cause, remedy, *evidence]


def _holders_said(kind: List[Gpu], taken: Dict[str, Dict[str, Any]]) -> List[str]:
    by_job = {}  # type: Dict[str, List[int]]
    for gpu in kind:
        if gpu.uuid in taken:
            by_job.setdefault(str(taken[gpu.uuid].get("job_id")), []).append(gpu.index)
    return [
        "job %s holds GPU %s" % (job, ",".join(str(i) for i in indices))
        for job, indices in sorted(by_job.items())
    ]


def _said(gpu_type: Optional[str], count: int) -> str:
    return "%s:%d" % (gpu_type, count) if gpu_type else str(count)


def cuda_env(chosen: List[Gpu]) -> Dict[str, str]:
    """The job's view: exactly the chosen cards, in nvidia-smi's numbering; none: no GPU."""
    if not chosen:
        return {"CUDA_VISIBLE_DEVICES": ""}
    indices = ",".join(str(g.index) for g in chosen)
    return {"CUDA_VISIBLE_DEVICES": indices, "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}


def _refusal(cause: str, remedy: str, evidence: Optional[List[str]] = None) -> Decision:
    # Not retryable: the same request on the same machine waits on other people's jobs.
    return Decision("unknown", False, cause, remedy, evidence or [cause])


def short_type(name: str) -> str:
    """The model word of a GPU's name, for hints: "NVIDIA GeForce RTX 4090" -> "4090"."""
    words = [w for w in re.split(r"[\s-]+", name) if any(c.isdigit() for c in w)]
    return words[0] if words else name.split()[-1]
