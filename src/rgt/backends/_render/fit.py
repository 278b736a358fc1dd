"""What each backend does with a run's resources, checked before anything starts.

``fit(backend, requested)`` runs before the code is pushed or the job recorded: a request the
machine cannot honour is refused with the fix, never dropped in silence (a job that asked for
4 GPUs and got the whole box, or a partition Kubernetes never heard of, fails at 3 a.m.).

- **slurm**: every key becomes its ``sbatch`` flag (``_render/sbatch.py``). A GPU type is
  checked against the GRES the cluster has (``sinfo``). ``--nodes N`` (N > 1) is a multi-node
  job: the agent on the allocation's first node starts one launcher per node with ``srun``
  (``rgt.agent._slurm_nodes``); ``gpus`` is per node.
- **kubernetes**: GPUs become ``nvidia.com/gpu`` limits (per pod), cpus and memory requests,
  the time an ``activeDeadlineSeconds``, ``--nodes N`` an Indexed Job of N pods
  (``_render/k8s.py``; at most ``K8S_MAX_PODS``); partition, account and qos are Slurm's and
  are refused.
- **ssh** and **local**: no scheduler. ``gpus`` is checked against the machine's
  ``nvidia-smi`` here (that many of that type at all) and honoured by the agent there, which
  picks free GPUs and sets ``CUDA_VISIBLE_DEVICES`` (``rgt.agent._gpus``); nothing on the box
  could enforce cpus, memory or a time limit, so those are refused, with partition, account,
  qos and more than one node.
- anything else (a notebook platform): its machine is what was registered; every key refused.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from rgt.errors import NotSupportedError, UsageError
from rgt.models import Machine
from rgt.resources import Resources

if TYPE_CHECKING:
    from rgt.backends.base import Backend

BOXES = ("ssh", "local")
SLURM_NATIVE = ("partition", "account", "qos")
# One GPU entry of `sinfo -o %G`: gpu:4, gpu:a100:4(S:0-1), gpu:nvidia_a100-sxm4-80gb:8.
GRES_GPU_RE = re.compile(r"(?:^|,)gpu(?::(?P<type>[^:(,]+))?:(?P<count>\d+)")
# A typo's guard (--nodes 1000 would ask the cluster for a thousand GPU pods at once), not
# a limit of Kubernetes; a bigger job is one rgt.toml edit away from being asked for on purpose.
K8S_MAX_PODS = 64
FLAGS = {
    "gpus": "--gpus",
    "cpus": "--cpus",
    "mem_gb": "--mem",
    "timeout_min": "--time",
    "partition": "--partition",
    "account": "--account",
    "qos": "--qos",
    "nodes": "--nodes",
}


def fit(backend: Backend, requested: Resources | None) -> Resources | None:
    """``requested`` unchanged when ``backend`` can honour it; else the error with the fix.
    None (no flag, no rgt.toml) stays None: the machine's defaults."""
    if requested is None or not requested.to_json():
        return requested
    CHECKS.get(backend.kind, _registered_only)(backend, requested)
    return requested


def box_gpus(kind: str, resources: Resources | None) -> str | None:
    """What the agent on an ssh/local machine assigns (``[TYPE:]N``; ``0``: hide every GPU);
    None where a scheduler assigns GPUs, or none was asked for."""
    if kind not in BOXES or resources is None or resources.gpus is None:
        return None
    return str(resources.gpus)


def _given(resources: Resources, keys: tuple[str, ...]) -> list[str]:
    return [key for key in keys if getattr(resources, key) is not None]


def _flags(keys: list[str]) -> str:
    return ", ".join(FLAGS[key] for key in keys)


def one_node(
    resources: Resources, kind: str, fix: str, why: str = "multi-node jobs are not built yet"
) -> None:
    if (resources.nodes or 1) > 1:
        raise NotSupportedError(f"--nodes {resources.nodes}", kind, why=why, fix=fix)


def _check_slurm(backend: Backend, requested: Resources) -> None:
    merged = getattr(backend, "defaults", Resources()).merged(requested)
    if (merged.nodes or 1) > 1:
        _check_slurm_nodes(backend, merged)
    gpu_type, count = merged.gpu_request()
    if count:
        _check_gres(backend, gpu_type, count)


def _check_slurm_nodes(backend: Backend, merged: Resources) -> None:
    """A partition with fewer nodes than asked for: sbatch would queue the job for ever."""
    from rgt.backends import _slurm_nodes

    result = backend.transport.run(list(_slurm_nodes.SINFO_NODES), timeout=60)
    if result.ok:
        _slurm_nodes.check_nodes(result.text(), merged.partition, merged.nodes or 1)


def _check_gres(backend: Backend, gpu_type: str | None, count: int) -> None:
    """The cluster's GPU GRES (``sinfo``): no GPU at all, or a type spelt as it does not."""
    result = backend.transport.run(["sinfo", "-h", "-o", "%G"], timeout=60)
    if result.ok:  # else sbatch will say it; the controller's answer is not ours to guess
        check_gres(result.text(), gpu_type, count)


def check_gres(sinfo: str, gpu_type: str | None, count: int) -> None:
    """Against ``sinfo -h -o %G``'s lines (``gpu:a100:4(S:0-1)``, ``gpu:2``, ``(null)``)."""
    found = [m.groupdict() for m in GRES_GPU_RE.finditer(",".join(sinfo.split()))]
    if not found:
        raise UsageError(
            f"--gpus {gpu_type + ':' if gpu_type else ''}{count}: this Slurm cluster has no GPU "
            "(`sinfo -o %G` lists no gpu GRES)",
            fix="drop --gpus (or give --gpus 0) for this cluster, or register one with GPUs",
        )
    types = sorted({str(f["type"]) for f in found if f["type"]})
    if gpu_type and gpu_type not in types:
        same = [t for t in types if t.lower() == gpu_type.lower()]
        raise UsageError(
            f"GPU type {gpu_type!r} is not one this Slurm cluster has "
            f"({', '.join(types) or 'it names no GPU types'})",
            fix=f"the cluster spells it {same[0]!r}: --gpus {same[0]}:{count}"
            if same
            else f"give one of its types (--gpus TYPE:{count}) or no type (--gpus {count})",
        )


def _check_kubernetes(backend: Backend | None, requested: Resources) -> None:
    native = _given(requested, SLURM_NATIVE)
    if native:
        raise UsageError(
            f"{_flags(native)}: partition, account and qos are Slurm resources",
            fix="drop them for a Kubernetes machine (use the cluster's namespace and "
            "quotas instead)",
        )
    check_pods(requested)


def check_pods(resources: Resources) -> None:
    """A Kubernetes job's pod count (``--nodes``): one Indexed Job pod per node, capped."""
    if (resources.nodes or 1) > K8S_MAX_PODS:
        raise UsageError(
            f"--nodes {resources.nodes}: over {K8S_MAX_PODS} pods for one Kubernetes job",
            fix=f"ask for at most {K8S_MAX_PODS} nodes (more GPUs per pod: --gpus N), or "
            "split the work into several jobs",
        )


def _check_box(backend: Backend, requested: Resources) -> None:
    one_node(
        requested,
        backend.kind,
        "run on one machine (--nodes 1; --gpus N picks GPUs on it), or list one machine per "
        "node: `rgt run A,B -- CMD` (a fleet: RGT_NNODES, RGT_NODE_RANK, RGT_MASTER_ADDR and "
        "RGT_MASTER_PORT on each)",
        why="multi-node jobs on one machine: a machine is one node",
    )
    refused = _given(requested, (*SLURM_NATIVE, "cpus", "mem_gb", "timeout_min"))
    if refused:
        raise NotSupportedError(
            _flags(refused),
            backend.kind,
            why="there is no scheduler on the machine: the job gets the whole box, and "
            "nothing there would enforce them",
            fix="drop them for this machine (only --gpus is honoured here: rgt picks free "
            "GPUs and sets CUDA_VISIBLE_DEVICES), or use a Slurm or Kubernetes machine",
        )
    gpu_type, count = requested.gpu_request()
    if count:
        _check_box_gpus(backend, gpu_type, count)


def _check_box_gpus(backend: Backend, gpu_type: str | None, count: int) -> None:
    """The machine has that many GPUs of that type at all (``nvidia-smi``, one round trip);
    which of them are free is the agent's to say when the job starts (``rgt.agent._gpus``)."""
    from rgt.agent import _gpus

    query = f"nvidia-smi --query-gpu={_gpus.QUERY} --format=csv,noheader,nounits"
    result = backend.transport.run(["sh", "-c", query], timeout=60)
    gpus = _gpus.parse_smi(result.text()) if result.ok else []
    said = f"--gpus {gpu_type + ':' if gpu_type else ''}{count}"
    if not gpus:
        raise UsageError(
            f"{said}: nvidia-smi lists no GPU on {backend.machine.name}",
            fix="drop --gpus (--gpus 0 for a CPU-only job), or check the driver there: "
            "`nvidia-smi` must list the GPUs",
        )
    kind = [g for g in gpus if _gpus.matches(g, gpu_type)]
    if len(kind) < count:
        names = ", ".join(sorted({g.name for g in gpus}))
        raise UsageError(
            f"{said}: {backend.machine.name} has {len(kind)} such GPU(s) ({len(gpus)} in "
            f"all: {names})",
            fix=f"ask for at most {len(kind)}"
            if kind
            else "give a type in those names "
            f"(e.g. --gpus {_gpus.short_type(gpus[0].name)}:{count}) or none (--gpus {count})",
        )


def _registered_only(backend: Backend, requested: Resources) -> None:
    raise NotSupportedError(
        _flags(_given(requested, Resources.keys())),
        backend.kind,
        why="the machine is what was registered",
        fix="drop the resource options for this machine (`rgt up` chose its hardware)",
    )


def check_defaults(profile: str, defaults: Resources | None) -> None:
    """Before ``rgt up PROFILE`` registers anything: may this profile keep ``defaults``?"""
    if defaults is not None:
        _with_defaults(profile, {}, defaults)


def with_defaults(machine: Machine, defaults: Resources | None) -> Machine:
    """``rgt up slurm|kubernetes --gpus … --partition …``: the machine with ``defaults`` in
    its record (every run on it starts from them; its own flags win key by key)."""
    if defaults is None:
        return machine
    connection = _with_defaults(machine.backend, machine.connection, defaults)
    return dataclasses.replace(machine, connection=connection)


def _with_defaults(
    backend: str, connection: Mapping[str, Any], defaults: Resources
) -> dict[str, Any]:
    out = dict(connection)
    if backend == "slurm":
        out["slurm"] = {**out.get("slurm", {}), "resources": defaults.to_json()}
    elif backend == "kubernetes":
        _check_kubernetes(None, defaults)
        out["resources"] = defaults.to_json()
    else:
        raise UsageError(
            f"resource defaults are for Slurm and Kubernetes machines, not {backend}",
            fix="drop them from `rgt up`; on an ssh/local machine give --gpus N to `rgt run`",
        )
    return out


CHECKS: dict[str, Callable[[Backend, Resources], None]] = {
    "slurm": _check_slurm,
    "kubernetes": _check_kubernetes,
    "ssh": _check_box,
    "local": _check_box,
}
