"""The host: boot id and uptime (a restart vs a crash), /dev/shm, and VRAM held by
processes that are not running jobs.

A detached job that vanished with a clean log has four usual causes (U3): host reboot, OOM
kill, the hangup of a foreground launch, an over-broad kill. A boot id that changed and a low
uptime settle the first one without guessing. A process that holds a CUDA context after its
job ended (a DataLoader worker of a crashed DDP run, a notebook kernel) makes the next job
OOM on a GPU whose process list looks empty (U11); ``vram_holders`` names them.
"""

from __future__ import annotations

import glob
import os
import time
from typing import Any

from rgt.agent.probes import disk

BOOT_ID_FILE = "/proc/sys/kernel/random/boot_id"
SHM = "/dev/shm"
# The device nodes a CUDA context keeps open (not nvidiactl/nvidia-uvm, which tools open too).
NVIDIA_DEVICES = "/dev/nvidia[0-9]*"
JOB_MARKER = b"RGT_JOB_DIR="


def boot_id() -> str:
    # Tests point RGT_AGENT_BOOT_ID_FILE at a file to play a host restart.
    path = os.environ.get("RGT_AGENT_BOOT_ID_FILE") or BOOT_ID_FILE
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read().strip()
    except OSError:
        return "unknown"


def uptime_s() -> float | None:
    try:
        with open("/proc/uptime", encoding="ascii") as handle:
            return float(handle.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def shm() -> dict[str, Any]:
    """Docker's default /dev/shm is 64 MiB: DataLoader workers die of a bus error in it."""
    return disk.usage(SHM) if os.path.isdir(SHM) else {"path": SHM, "error": "no /dev/shm"}


def readings() -> dict[str, Any]:
    return {
        "boot_id": boot_id(),
        "uptime_s": uptime_s(),
        "shm": shm(),
        "time": time.time(),
        "cpus_online": os.cpu_count(),
    }


def _device_glob() -> str:
    # RGT_NVIDIA_DEVICES lets tests point the scan at files they hold open.
    return os.environ.get("RGT_NVIDIA_DEVICES") or NVIDIA_DEVICES


def device_holders() -> dict[int, list[str]]:
    """pid -> the NVIDIA device nodes it holds open (scans /proc/*/fd; needs same user or root)."""
    devices = set(glob.glob(_device_glob()))
    holders = {}  # type: dict[int, list[str]]
    if not devices:
        return holders
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        held = sorted(set(_fd_targets(int(name))) & devices)
        if held:
            holders[int(name)] = held
    return holders


def _fd_targets(pid: int) -> list[str]:
    directory = "/proc/%d/fd" % pid
    try:
        names = os.listdir(directory)
    except OSError:
        return []
    out = []
    for fd in names:
        try:
            out.append(os.readlink(os.path.join(directory, fd)))
        except OSError:
            continue
    return out


def process_info(pid: int) -> dict[str, Any]:
    """Command line, age and the rgt job directory a process was started for (if any)."""
    info = {"pid": pid, "cmdline": None, "age_s": None, "job_dir": None}  # type: dict[str, Any]
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as handle:
            info["cmdline"] = handle.read().replace(b"\0", b" ").decode("utf-8", "replace")[:300]
        with open("/proc/%d/environ" % pid, "rb") as handle:
            for item in handle.read().split(b"\0"):
                if item.startswith(JOB_MARKER):
                    info["job_dir"] = item[len(JOB_MARKER) :].decode("utf-8", "surrogateescape")
        info["age_s"] = _age(pid)
    except OSError:
        pass
    return info


def _age(pid: int) -> float | None:
    try:
        with open("/proc/%d/stat" % pid, encoding="utf-8", errors="replace") as handle:
            fields = handle.read().rsplit(")", 1)[-1].split()
        ticks = os.sysconf("SC_CLK_TCK")
        up = uptime_s()
        return None if up is None else round(up - int(fields[19]) / ticks, 1)
    except (OSError, ValueError, IndexError):
        return None
