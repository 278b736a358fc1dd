"""A Slurm cluster as a backend: the agent runs inside the allocation, started by ``sbatch``.

The machine is the place where ``sbatch`` runs: this host (when ``sbatch`` is on PATH) or a
login node over SSH. Its durable root must be on a filesystem every compute node mounts
(``$HOME`` or a project directory, never a node-local ``/tmp``): job directories, checkpoints
and the agent live there, and a requeued job may restart on another node.

``detach`` writes the rendered script (``_render/sbatch.py``) into the job directory as
``slurm.sbatch``, submits it, and records Slurm's job id in ``slurm.json``; status merges
``scontrol show job`` with the agent's ``status.json`` (``_slurm_state.py``). Nothing bills
per machine here: the allocation is the meter, and it ends with the job.
"""

from __future__ import annotations

import json
import posixpath
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rgt.agent.paths import JobPaths
from rgt.backends._render.sbatch import SbatchJob, render_script, sbatch_argv
from rgt.backends._slurm_state import AGENT_TERMINAL, merge, parse_scontrol
from rgt.backends.base import Backend
from rgt.errors import BackendError, UsageError
from rgt.models import JobSpec, Machine
from rgt.resources import Resources
from rgt.state.store import Store, utcnow
from rgt.transport.base import Transport
from rgt.transport.local import LocalTransport

DEFAULT_GRACE_S = 120
SCRIPT_NAME = "slurm.sbatch"
RECORD_NAME = "slurm.json"


class SlurmBackend(Backend):
    kind = "slurm"

    def __init__(self, machine: Machine) -> None:
        super().__init__(machine, _transport(machine))
        slurm = dict(machine.connection.get("slurm") or {})
        self.grace_s = int(slurm.get("grace_s") or DEFAULT_GRACE_S)
        self.defaults = Resources.from_mapping(slurm.get("resources") or {})
        self.next_resources = self.defaults
        if "host" not in machine.connection and not machine.connection.get("python"):
            self.python = sys.executable  # this host: rgt's own interpreter runs the agent

    # -- primitives ------------------------------------------------------------------------

    def submit(
        self,
        spec: JobSpec,
        secrets: dict[str, str] | None = None,
        resources: Resources | None = None,
    ) -> JobPaths:
        """``Backend.submit`` with this job's resources (the machine's defaults otherwise)."""
        if secrets:
            raise UsageError(
                "secrets cannot be handed to a Slurm job yet: sbatch has no private stdin, and "
                "the job's environment is stored by the controller",
                fix="drop --secret for this job, or read the secret from a file only you can read",
            )
        self.next_resources = self.defaults.merged(resources or Resources())
        return super().submit(spec, None)

    def detach(self, argv: Sequence[str], *, stdin: bytes | None = None) -> None:
        job_dir = _job_dir_of(argv)
        job = SbatchJob(
            name=f"rgt-{posixpath.basename(job_dir)}",
            python=argv[0],
            agent=argv[1],
            job_dirs=(job_dir,),
            resources=self.next_resources,
            grace_s=self.grace_s,
        )
        output = posixpath.join(job_dir, "logs", "slurm.out")
        slurm_id = self._sbatch(job, posixpath.join(job_dir, SCRIPT_NAME), output, job_dir)
        self._record(job_dir, slurm_id, self.next_resources)

    def stop_meter(self) -> str:
        return (
            "a Slurm cluster bills per allocation and every rgt job's allocation has "
            "ended; nothing else to stop (no file was deleted)"
        )

    # -- arrays (sweeps) -------------------------------------------------------------------

    def submit_array(
        self,
        specs: Sequence[JobSpec],
        resources: Resources | None = None,
        max_parallel: int | None = None,
    ) -> str:
        """One Slurm job array, one task per spec (task i runs specs[i]); returns its id."""
        if not specs:
            raise UsageError("an array needs at least one job", fix="give one spec per cell")
        agent = self.install_agent()
        dirs = tuple(self._prepare(spec) for spec in specs)
        res = self.defaults.merged(resources or Resources())
        job = SbatchJob(
            name=f"rgt-array-{specs[0].job_id}",
            python=self.python,
            agent=agent,
            job_dirs=dirs,
            resources=res,
            grace_s=self.grace_s,
            max_parallel=max_parallel,
        )
        slurm_dir = posixpath.join(self.root.root, "slurm")
        self.transport.mkdir(slurm_dir)
        script = posixpath.join(slurm_dir, f"array-{specs[0].job_id}.sbatch")
        array_id = self._sbatch(job, script, posixpath.join(slurm_dir, "%A_%a.out"), slurm_dir)
        for index, job_dir in enumerate(dirs):
            self._record(job_dir, f"{array_id}_{index}", res)
        return array_id

    def _prepare(self, spec: JobSpec) -> str:
        """What ``Backend.submit`` does before detaching: the job dir, code link, spec."""
        return self.prepare(spec).root

    # -- derived, with Slurm's view --------------------------------------------------------

    def slurm_id(self, job_id: str) -> str | None:
        raw = self.transport.read_bytes(posixpath.join(self.job_paths(job_id).root, RECORD_NAME))
        return str(json.loads(raw)["slurm_job_id"]) if raw else None

    def status(self, job_id: str) -> dict[str, Any]:
        agent = super().status(job_id)
        slurm_id = self.slurm_id(job_id)
        if slurm_id is None:
            return agent
        result = self.transport.run(["scontrol", "show", "job", "-o", slurm_id])
        merged = merge(agent, parse_scontrol(result.text()) if result.ok else None, slurm_id)
        # A plain `scancel` killed the agent before it could write the end: record it now,
        # with the agent's own code, so the answer survives Slurm forgetting the job.
        unrecorded = agent.get("state") not in AGENT_TERMINAL and not agent.get("agent_alive")
        if merged["state"] == "cancelled" and unrecorded:
            super().cancel(job_id)
        return merged

    def cancel(self, job_id: str) -> dict[str, Any]:
        """The agent ends the job and records ``cancelled``; then Slurm drops the allocation
        or the queue entry (a requeued job must not start again)."""
        result = super().cancel(job_id)
        slurm_id = self.slurm_id(job_id)
        if slurm_id is not None:
            self.transport.run(["scancel", slurm_id])
            result["slurm_job_id"] = slurm_id
        return result

    # -- helpers ---------------------------------------------------------------------------

    def _sbatch(self, job: SbatchJob, script: str, output: str, workdir: str) -> str:
        self.transport.write_bytes(script, render_script(job).encode())
        result = self.transport.run(sbatch_argv(script, output, workdir), timeout=120)
        slurm_id = result.text().strip().split(";")[0]
        if not result.ok or not slurm_id.isdigit():
            raise BackendError(
                f"sbatch refused {job.name}",
                backend=self.kind,
                returncode=result.returncode,
                stderr_tail=result.stderr_tail(),
                fix="read Slurm's message above: a partition, account, qos or GPU type the "
                "cluster does not have is the usual cause (`sinfo -s` lists partitions)",
            )
        return slurm_id

    def _record(self, job_dir: str, slurm_id: str, resources: Resources) -> None:
        record = {
            "slurm_job_id": slurm_id,
            "submitted": utcnow(),
            "grace_s": self.grace_s,
            "resources": resources.to_json(),
        }
        data = json.dumps(record, indent=2).encode()
        self.transport.write_bytes(posixpath.join(job_dir, RECORD_NAME), data)


def _job_dir_of(argv: Sequence[str]) -> str:
    """``Backend.submit`` detaches ``[python, agent, "run", JOB_DIR, …]``."""
    if len(argv) < 4 or argv[2] != "run":
        raise BackendError("the Slurm backend only detaches the agent", backend="slurm")
    return argv[3]


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
    _check_cluster(SlurmBackend(machine).transport, durable)
    store.add_machine(machine)
    return machine


def _ssh_connection(name: str, line: str) -> dict[str, Any]:
    from rgt.transport.ssh import SshTarget, known_hosts_path, parse_ssh_line

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
