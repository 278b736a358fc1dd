"""`rgt up slurm`: register a Slurm cluster (this host, or a login node over SSH) after
checking that its controller answers and that the durable root can be created."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from rgt.errors import BackendError, UsageError
from rgt.models import Machine
from rgt.resources import Resources
from rgt.state.store import Store, utcnow
from rgt.transport.base import Transport
from rgt.transport.local import LocalTransport

DEFAULT_GRACE_S = 120


def _transport(machine: Machine) -> Transport:
    if "host" not in machine.connection:
        return LocalTransport()
    from rgt.transport.ssh import SshTarget, SshTransport

    return SshTransport(SshTarget.from_connection(machine.name, machine.connection))


def register_slurm(
    store: Store,
    name: str,
    *,
    ssh: str | None = None,
    root: str | None = None,
    grace_s: int = DEFAULT_GRACE_S,
    resources: Resources | None = None,
) -> Machine:
    """``rgt up slurm --name NAME [--ssh LOGIN-NODE]``: this host when sbatch is here."""
    slurm = {"grace_s": grace_s, "resources": (resources or Resources()).to_json()}
    connection: dict[str, Any] = {"slurm": slurm}
    if ssh:
        connection.update(_ssh_connection(name, ssh))
    elif shutil.which("sbatch") is None:
        raise UsageError(
            "sbatch is not on PATH here",
            fix="run on the cluster's login node, or give it: --ssh 'ssh user@login'",
        )
    durable = root or _default_root(name, ssh)
    machine = Machine(
        name=name,
        backend="slurm",
        profile="slurm",
        connection=connection,
        durable_root=durable,
        registered=utcnow(),
    )
    _check_cluster(_transport(machine), durable)
    store.add_machine(machine)
    return machine


def _ssh_connection(name: str, line: str) -> dict[str, Any]:
    from rgt.transport._ssh_line import parse_ssh_line
    from rgt.transport.ssh import SshTarget, known_hosts_path

    found = parse_ssh_line(line)
    target = SshTarget(
        name=name,
        host=found["host"],
        known_hosts=str(known_hosts_path(name)),
        port=found.get("port"),
        user=found.get("user"),
        identity_file=found.get("identity_file"),
        ssh_options=tuple(found.get("ssh_options") or ()),
    )
    return target.to_connection()


def _default_root(name: str, ssh: str | None) -> str:
    if ssh:
        raise UsageError(
            "a Slurm login node needs --root",
            fix="give a directory every compute node mounts, e.g. --root /home/me/rgt",
        )
    from rgt.config import rgt_home

    return str(Path(rgt_home() / "machines" / name).resolve())


def _check_cluster(transport: Transport, durable: str) -> None:
    """Slurm answers and the durable root can be created."""
    result = transport.run(["sinfo", "-h", "-o", "%P %a"], timeout=60)
    if not result.ok:
        raise BackendError(
            "sinfo failed: the Slurm controller does not answer",
            backend="slurm",
            returncode=result.returncode,
            stderr_tail=result.stderr_tail(),
            fix="check `sinfo` on that machine (slurmctld up? munge running?)",
        )
    transport.mkdir(durable)
