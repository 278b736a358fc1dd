"""GPUs through ``nvidia-smi``: utilisation, memory, temperature, clocks, ECC, throttling,
the compute processes, and Xid lines from the kernel log.

The query asks for CSV *with* its header and parses by column name, so an older driver that
lacks a field (``clocks_event_reasons`` was ``clocks_throttle_reasons`` before driver 535)
yields ``None`` for it instead of shifting every column. Values such as ``[N/A]`` or
``[Not Supported]`` are None; units (``45 %``, ``1234 MiB``) are stripped when present.

Utilisation alone lies (U21: "at least one kernel ran in the sample window"); the clocks,
power and the throttle bitmask come with it so a reader can tell busy from underfed.
"""

from __future__ import annotations

import os
import re
import subprocess
from typing import Any

# A field the driver does not know makes the whole query fail: the reader tries the current
# spelling first and retries with the pre-535 one (see ``read``).
GPU_FIELDS = (
    "index,name,uuid,driver_version,utilization.gpu,utilization.memory,memory.total,"
    "memory.used,temperature.gpu,power.draw,power.limit,clocks.sm,clocks.max.sm,pstate,"
    "ecc.errors.uncorrected.volatile.total,{reasons}.active"
)
REASON_SPELLINGS = ("clocks_event_reasons", "clocks_throttle_reasons")
APP_FIELDS = "gpu_uuid,pid,process_name,used_memory"
TIMEOUT_S = 20.0

# nvml.h clocksEventReasons bits. GPU idle and the application-clock setting are not
# slowdowns; the others mean the card runs below the clocks you are paying for.
THROTTLE_BITS = (
    (0x1, "gpu_idle"),
    (0x2, "applications_clocks_setting"),
    (0x4, "sw_power_cap"),
    (0x8, "hw_slowdown"),
    (0x10, "sync_boost"),
    (0x20, "sw_thermal_slowdown"),
    (0x40, "hw_thermal_slowdown"),
    (0x80, "hw_power_brake_slowdown"),
    (0x100, "display_clock_setting"),
)
NOT_SLOWDOWNS = frozenset(["gpu_idle", "applications_clocks_setting", "display_clock_setting"])
NO_DEVICE = "No devices were found"
NO_DRIVER = "couldn't communicate with the NVIDIA driver"
XID_RE = re.compile(r"NVRM: Xid \(PCI:([0-9a-fA-F:.]+)\): (\d+)(?:, (.*))?")
# Xid codes after which the card must not be trusted with more paid hours.
FATAL_XIDS = {
    48: "double-bit ECC error",
    79: "GPU has fallen off the bus",
    94: "contained ECC",
    95: "uncontained ECC",
    119: "GSP timeout",
    120: "GSP error",
}


def _binary() -> str:
    # RGT_NVIDIA_SMI points at another binary (tests replay recorded real outputs through it).
    return os.environ.get("RGT_NVIDIA_SMI") or "nvidia-smi"


def _run(args: list[str]) -> tuple[int, str]:
    try:
        proc = subprocess.run(
            [_binary(), *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            timeout=TIMEOUT_S,
            check=False,
        )
    except OSError as exc:
        return 127, "nvidia-smi not runnable: %s" % exc.strerror
    except subprocess.TimeoutExpired:
        return 124, "nvidia-smi did not answer within %ds (a hung driver)" % TIMEOUT_S
    return proc.returncode, proc.stdout.decode("utf-8", "replace")


def read() -> dict[str, Any]:
    """Every GPU and every compute process; ``available`` False with ``error`` otherwise."""
    code, text = 1, ""
    for spelling in REASON_SPELLINGS:
        fields = GPU_FIELDS.format(reasons=spelling)
        code, text = _run(["--query-gpu=" + fields, "--format=csv,nounits"])
        if code == 0 or "not a valid field" not in text.lower():
            break
    result = parse_gpus(text, code)
    if _table_may_answer(text, code):
        from rgt.agent.probes import gpu_detail

        table = gpu_detail.read_table()
        result = (
            dict(table, source="table", csv_error=result["error"]) if table["available"] else result
        )
    if result["available"] and result.get("source") != "table":
        app_code, apps = _run(["--query-compute-apps=" + APP_FIELDS, "--format=csv,nounits"])
        result["processes"] = parse_apps(apps) if app_code == 0 else []
        from rgt.agent.probes import gpu_detail  # imports this module: loaded here, not at the top

        gpu_detail.enrich(result)  # `nvidia-smi -q` only when the CSV could not say enough
    return result


def _table_may_answer(text: str, code: int) -> bool:
    """A query that failed for another reason than no driver, no device or no binary (a
    driver that knows none of the fields asked): the plain table may still list the GPUs."""
    return code not in (0, 124, 127) and NO_DEVICE not in text and NO_DRIVER not in text


def parse_gpus(text: str, returncode: int = 0) -> dict[str, Any]:
    """Parse ``--query-gpu`` CSV (header required; units optional)."""
    problem = _problem(text, returncode)
    if problem:
        return {"available": False, "error": problem, "gpus": [], "processes": []}
    rows = _csv(text)
    gpus = [_gpu(row) for row in rows]
    return {
        "available": bool(gpus),
        "error": None if gpus else NO_DEVICE,
        "gpus": gpus,
        "processes": [],
    }


def _problem(text: str, returncode: int) -> str | None:
    if NO_DEVICE in text:
        return NO_DEVICE
    if NO_DRIVER in text:
        return "nvidia-smi cannot talk to the driver (driver not loaded, or no GPU passed in)"
    if returncode != 0:
        first = (text.strip().splitlines() or ["no output"])[0]
        return "nvidia-smi failed (exit %d): %s" % (returncode, first[:200])
    return None


def _csv(text: str) -> list[dict[str, str]]:
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        return []
    header = [_column(name) for name in lines[0].split(",")]
    return [dict(zip(header, [v.strip() for v in line.split(",")])) for line in lines[1:]]


def _column(name: str) -> str:
    """``utilization.gpu [%]`` -> ``utilization.gpu``; reason columns lose their prefix."""
    name = name.strip().split(" [", 1)[0]
    for spelling in REASON_SPELLINGS:
        if name.startswith(spelling + "."):
            return "reasons." + name[len(spelling) + 1 :]
    return name


def _num(value: str | None) -> float | None:
    if value is None:
        return None
    token = value.strip().split(" ")[0]
    try:
        return float(token)
    except ValueError:
        return None  # [N/A], [Not Supported], [Requested functionality has been deprecated]


def _int(value: str | None) -> int | None:
    number = _num(value)
    return None if number is None else int(number)


def _gpu(row: dict[str, str]) -> dict[str, Any]:
    reasons = decode_reasons(row.get("reasons.active"))
    return {
        "index": _int(row.get("index")),
        "name": row.get("name"),
        "uuid": row.get("uuid"),
        "driver": row.get("driver_version"),
        "util_pct": _num(row.get("utilization.gpu")),
        "mem_util_pct": _num(row.get("utilization.memory")),
        "mem_total_mib": _num(row.get("memory.total")),
        "mem_used_mib": _num(row.get("memory.used")),
        "temp_c": _num(row.get("temperature.gpu")),
        "power_w": _num(row.get("power.draw")),
        "power_limit_w": _num(row.get("power.limit")),
        "sm_clock_mhz": _num(row.get("clocks.sm") or row.get("clocks.current.sm")),
        "sm_clock_max_mhz": _num(row.get("clocks.max.sm")),
        "pstate": row.get("pstate"),
        "ecc_uncorrected": _int(row.get("ecc.errors.uncorrected.volatile.total")),
        "throttle_mask": row.get("reasons.active"),  # as printed; [N/A] or None: unknown
        "throttle_reasons": reasons,
        "slowdowns": [r for r in reasons if r not in NOT_SLOWDOWNS],
    }


def decode_reasons(value: str | None) -> list[str]:
    """The hex bitmask (``0x0000000000000004``) as reason names; [] when unknown."""
    try:
        mask = int((value or "").strip(), 16)
    except ValueError:
        return []
    return [name for bit, name in THROTTLE_BITS if mask & bit]


def parse_apps(text: str) -> list[dict[str, Any]]:
    """Parse ``--query-compute-apps`` CSV: one entry per process holding a CUDA context."""
    out = []
    for row in _csv(text):
        pid = _int(row.get("pid"))
        if pid is None:
            continue
        out.append(
            {
                "pid": pid,
                "gpu_uuid": row.get("gpu_uuid"),
                "name": row.get("process_name"),
                "used_mib": _num(row.get("used_memory") or row.get("used_gpu_memory")),
            }
        )
    return out


def xid_events(text: str) -> list[dict[str, Any]]:
    """``NVRM: Xid (PCI:…): N, …`` lines of a kernel log; ``fatal`` for codes that mean
    the card is broken (re-rent another machine)."""
    found = []
    for line in text.splitlines():
        match = XID_RE.search(line)
        if match:
            code = int(match.group(2))
            found.append(
                {
                    "pci": match.group(1),
                    "xid": code,
                    "fatal": code in FATAL_XIDS,
                    "meaning": FATAL_XIDS.get(code),
                    "line": line.strip()[:300],
                }
            )
        elif "fallen off the bus" in line:
            found.append(
                {
                    "pci": None,
                    "xid": 79,
                    "fatal": True,
                    "meaning": FATAL_XIDS[79],
                    "line": line.strip()[:300],
                }
            )
    return found


def read_xids() -> dict[str, Any]:
    """Xid lines from ``dmesg``; unreadable (no CAP_SYSLOG in most containers) is said so."""
    try:
        proc = subprocess.run(
            ["dmesg"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            timeout=TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return {"readable": False, "error": str(exc), "events": []}
    if proc.returncode != 0:
        error = proc.stderr.decode("utf-8", "replace").strip()[:200]
        return {"readable": False, "error": error or "dmesg failed", "events": []}
    return {
        "readable": True,
        "error": None,
        "events": xid_events(proc.stdout.decode("utf-8", "replace"))[-20:],
    }
