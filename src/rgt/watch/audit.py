"""`rgt audit NAME`: phase 0 on a machine, before a GPU hour is billed.

One agent call takes every reading on the machine (``agent audit``); this module turns the
readings into findings (``rgt.findings.Finding``: kind = the check, severity on rgt's one scale,
message, and its fix). Nothing here changes the machine. ``--json`` prints each as
``{"severity", "check", "finding", "fix"}`` (plus ``explain``, the `rgt explain` topic, when
there is one): ``bug`` stops `rgt run` (the environment gate), ``warning`` needs a look, ``info``
is context. ``ok`` is true when no finding is a bug.

The DataLoader worker count is suggested from the cgroup memory limit, not the CPU count:
each forked worker holds its own copy of whatever the dataset keeps in RAM, so W workers
cost about (W + 1) × the per-process footprint (U9), and the kernel kills at the limit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rgt.backends import backend_for
from rgt.backends.remote import machine_call
from rgt.errors import RgtError
from rgt.findings import Finding, has_bug
from rgt.jobs import pythongate
from rgt.state.store import Store
from rgt.watch import envgate, gpu_expect, routes
from rgt.watch.envgate import finding

GIB = 1 << 30
SMALL_SHM = 1 * GIB  # Docker's default is 64 MiB; DataLoader workers pass batches through it


@dataclass(frozen=True)
class Budget:
    ckpt_gb: float = 0.0  # one checkpoint
    keep: int = 3  # how many the retention keeps
    scratch_gb: float = 0.0  # everything else the run writes
    worker_gb: float = 2.0  # RAM one DataLoader worker needs (measure it: RSS of a worker)

    @property
    def need_bytes(self) -> int:
        return int((self.ckpt_gb * self.keep + self.scratch_gb) * GIB)


def audit(
    store: Store, name: str, tiers: list[str], budget: Budget, python: str | None = None
) -> dict[str, Any]:
    """``python``: the interpreter jobs should run (default: the profile's [environment]
    python). The result is recorded for `rgt run`'s environment gate."""
    backend = backend_for(store, name)
    args = [a for tier in tiers for a in ("--path", tier)] + _job_args(store, name, python)
    readings = machine_call(backend, "audit", args, timeout=300)
    choices, route_findings = routes.choose(readings)
    findings = (
        _disk(readings, budget)
        + _memory(readings, budget)
        + _gpu(readings, name)
        + gpu_expect.findings(readings, gpu_expect.of_machine(store, name))
        + _software(readings)
        + (conda_base(readings) if store.machine(name).backend == "local" else [])
        + pythongate.findings(readings, name)
        + envgate.interpreter_findings(readings)
        + envgate.cache_findings(readings)
        + route_findings
    )
    data = {
        "machine": name,
        "readings": readings,
        "budget": {"need_bytes": budget.need_bytes, **budget.__dict__},
        "workers": workers(readings, budget),
        "routes": choices,
        "findings": [finding_json(f) for f in findings],
        "ok": not has_bug(findings),
    }
    # A Python without torch matters only to torch jobs: `rgt run` checks that by command
    # (rgt.jobs.pythongate), so it is kept out of the gate every command passes.
    kept = [finding_json(f) for f in findings if f.kind != "torch"]
    envgate.record(name, {**data, "findings": kept})
    pythongate.record(name, readings.get("interpreters") or {})
    return data


def _job_args(store: Store, name: str, python: str | None) -> list[str]:
    """``--python`` (the expected interpreter) and ``--env K=V`` (the network plan's variables,
    which decide where caches land) for the agent's audit."""
    from rgt.profiles import load_profile
    from rgt.profiles.network import NetworkPlan, machine_plan

    machine = store.machine(name)
    try:
        profile = load_profile(machine.profile).raw
        plan = machine_plan(machine.profile, machine.connection)
    except RgtError:
        profile, plan = {}, NetworkPlan(env={}, mirrors={}, source="none")
    expected = python or (profile.get("environment") or {}).get("python")
    args = ["--python", str(expected)] if expected else []
    args += [a for k, v in sorted(plan.env.items()) for a in ("--env", f"{k}={v}")]
    found = routes.candidates(profile.get("network") or {}, plan)
    return args + [a for label, url in found for a in ("--route", f"{label}={url}")]


def finding_json(finding: Finding) -> dict[str, str]:
    """A finding as `rgt audit --json` prints it and ``$RGT_HOME/audits/`` keeps it (the keys
    since the first release: ``check`` is its kind, ``finding`` its message)."""
    data = {"severity": finding.severity, "check": finding.kind, "finding": finding.message}
    data["fix"] = finding.fix
    return data | ({"explain": finding.code} if finding.code else {})


def _disk(r: dict[str, Any], budget: Budget) -> list[Finding]:
    out = []
    for tier in r.get("tiers") or []:
        worst = max(tier.get("bytes_pct") or 0, tier.get("inodes_pct") or 0)
        if worst >= 90:
            out.append(
                finding(
                    "warning",
                    "disk",
                    f"{tier['tier']} ({tier.get('mount')}) is "
                    f"{tier.get('bytes_pct')}% full, inodes {tier.get('inodes_pct')}%",
                    "free space or inodes there, or rent a bigger disk before training",
                )
            )
    durable = (r.get("tiers") or [{}])[0]
    free = durable.get("bytes_free")
    if budget.need_bytes and free is not None and free < budget.need_bytes:
        out.append(
            finding(
                "bug",
                "checkpoint budget",
                f"checkpoints need {budget.need_bytes / GIB:.1f} GiB "
                f"(ckpt × keep + scratch), {durable.get('tier')} has {free / GIB:.1f} GiB free",
                "ask for a bigger disk or lower --keep; rgt never shrinks the experiment for you",
            )
        )
    shm = r.get("shm") or {}
    if shm.get("bytes_total") is not None and shm["bytes_total"] < SMALL_SHM:
        out.append(
            finding(
                "warning",
                "shm",
                f"/dev/shm is {shm['bytes_total'] / 2**20:.0f} MiB",
                "DataLoader workers die with a bus error: run the container with --shm-size=8g or "
                "--ipc=host, or torch.multiprocessing.set_sharing_strategy('file_system')",
            )
        )
    return out


def workers(r: dict[str, Any], budget: Budget) -> dict[str, Any]:
    cpus = r.get("cpu_quota") or r.get("cpus_online") or 1
    limit = (r.get("memory") or {}).get("limit_bytes")
    if not limit:
        return {"suggested": int(cpus), "basis": "no cgroup memory limit: CPU count"}
    by_memory = int(0.8 * limit / (budget.worker_gb * GIB)) - 1  # the main process counts too
    return {
        "suggested": max(0, min(int(cpus), by_memory)),
        "by_memory": by_memory,
        "cpus": cpus,
        "basis": f"0.8 × {limit / GIB:.1f} GiB limit / {budget.worker_gb} "
        "GiB per worker, minus the main process",
    }


def _memory(r: dict[str, Any], budget: Budget) -> list[Finding]:
    out = []
    quota, cpus = r.get("cpu_quota"), r.get("cpus_online")
    if quota and cpus and quota < cpus:
        out.append(
            finding(
                "warning",
                "cpu quota",
                f"the cgroup allows {quota:g} CPUs of {cpus} visible",
                f"export OMP_NUM_THREADS={max(1, int(quota))} (torch sizes thread pools from the "
                "host's cores and thrashes on a slice)",
            )
        )
    suggested = workers(r, budget)
    if "by_memory" in suggested and suggested["by_memory"] < int(suggested["cpus"]):
        out.append(
            finding(
                "info",
                "workers",
                f"suggested num_workers={suggested['suggested']} "
                f"(memory-bound: {suggested['basis']})",
                "size DataLoader workers from this, not from the CPU count",
            )
        )
    return out


def _gpu(r: dict[str, Any], name: str) -> list[Finding]:
    gpu, out = r.get("gpu") or {}, []
    if not gpu.get("available"):
        return [
            finding(
                "bug",
                "gpu",
                f"no GPU visible: {gpu.get('error')}",
                "check the container has the GPU (--gpus all, NVIDIA Container Toolkit) and the "
                "driver is loaded before paying for the hour",
            )
        ]
    for g in gpu.get("gpus") or []:
        if g.get("ecc_uncorrected"):
            out.append(
                finding(
                    "bug",
                    "ecc",
                    f"GPU {g['index']} has {g['ecc_uncorrected']} uncorrected ECC errors",
                    "stop and rent another machine",
                )
            )
        if g.get("slowdowns") and g.get("util_pct") != 0:  # an idle card's clocks do not matter
            out.append(
                finding(
                    "warning",
                    "throttle",
                    f"GPU {g['index']} is slowed down: {', '.join(g['slowdowns'])}",
                    "a hot or power-capped card: re-rent if it persists under load",
                )
            )
        out.extend(_remap(g))
    for x in (r.get("xid") or {}).get("events") or []:
        if x.get("fatal"):
            out.append(
                finding(
                    "bug",
                    "xid",
                    f"Xid {x['xid']} ({x['meaning']}) in dmesg",
                    "the card is broken: stop and rent another machine",
                )
            )
    held = {p["gpu_uuid"] for p in gpu.get("processes") or []}
    for g in gpu.get("gpus") or []:
        if (g.get("mem_used_mib") or 0) > 512 and g.get("uuid") not in held:
            out.append(
                finding(
                    "warning",
                    "vram",
                    f"GPU {g['index']} has {g['mem_used_mib']:.0f} MiB used by no visible process",
                    f"a zombie holds VRAM: `rgt reap {name}`",
                )
            )
    return out


def _remap(g: dict[str, Any]) -> list[Finding]:
    """Row remapping (A100 and later): a pending remap takes effect only after a GPU reset, and a
    failed one means the memory cannot be repaired."""
    rows = ((g.get("detail") or {}).get("remapped_rows")) or {}
    if rows.get("failure"):
        text, fix = "a row remapping failed", "the card's memory is failing: rent another machine"
    elif rows.get("pending"):
        text = "has a row remapping pending"
        fix = "the GPU needs a reset (host access): on a rental, stop and rent another machine"
    else:
        return []
    return [finding("bug", "ecc", f"GPU {g['index']} {text}", fix)]


def _software(r: dict[str, Any]) -> list[Finding]:
    torch = r.get("torch") or {}
    gpu = (r.get("gpu") or {}).get("available")
    if not torch.get("installed"):
        return []  # said per interpreter (job_pythons)
    out = []
    if gpu and not torch.get("cuda_available"):
        out.append(
            finding(
                "bug",
                "torch cuda",
                f"torch {torch.get('torch')} sees no GPU",
                "a CPU-only torch build or a driver older than its CUDA: install the build for "
                f"the driver's CUDA {r.get('cuda_driver')}",
            )
        )
    driver, built = r.get("cuda_driver"), torch.get("cuda")
    if driver and built and _version(built) > _version(driver):
        out.append(
            finding(
                "bug",
                "cuda version",
                f"torch is built for CUDA {built}, the driver supports up to {driver}",
                "install a torch build for CUDA <= the driver's",
            )
        )
    return out


def conda_base(r: dict[str, Any]) -> list[Finding]:
    """Jobs on one's own machine that run conda's ``base``: base is conda's own environment, so
    an install for one project there can break conda and every other project, and the next
    project inherits this one's versions. Only on the local machine: a rental's image often
    *is* its base environment, and there you use it as it is (never `conda create` on a rental).
    """
    found = r.get("interpreters") or {}
    keys = ("expected", "python", "python3")
    reading: dict[str, Any] = next((found[k] for k in keys if _runs(found.get(k))), {})
    conda = reading.get("conda") or {}
    if not conda.get("base"):
        return []
    envs = conda.get("envs") or []
    where = conda.get("envs_dir") or "envs"
    use = (
        f"run jobs with one of its environments: {', '.join(envs)} "
        f"(e.g. `rgt run NAME -- {where}/{envs[0]}/bin/python train.py`)"
        if envs
        else "create one (`conda create -n train python=3.11`, install the project there) and "
        "run jobs with its python"
    )
    return [
        finding(
            "warning",
            "conda base",
            f"jobs run conda's base environment ({reading.get('executable')}, prefix "
            f"{conda.get('prefix')})",
            f"{use}; `rgt audit --python PATH` checks the one you choose",
            explain="conda_base",
        )
    ]


def _runs(reading: Any) -> bool:
    return isinstance(reading, dict) and not reading.get("error")


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in text.split(".") if p.isdigit())
