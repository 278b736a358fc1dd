"""A Slurm cluster as a backend: the agent runs inside the allocation, started by ``sbatch``.

The machine is the place where ``sbatch`` runs: this host (when ``sbatch`` is on PATH) or a
login node over SSH. Its durable root must be on a filesystem every compute node mounts
(``$HOME`` or a project directory, never a node-local ``/tmp``): job directories, checkpoints
and the agent live there, and a requeued job may restart on another node.

``detach`` writes the rendered script (``_render/sbatch.py``) into the job directory as
``slurm.sbatch``, submits it, and records Slurm's job id and the job's resources in
``slurm.json`` (``rgt resume`` submits again with them); status merges
``scontrol show job`` with the agent's ``status.json`` (``_slurm_state.py``). Nothing bills
per machine here: the allocation is the meter, and it ends with the job.
"""

from __future__ import annotations

import json
import posixpath
import shutil
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rgt.agent.paths import JobPaths
from rgt.backends._render.sbatch import SbatchJob, render_script, sbatch_argv
from rgt.backends._slurm_state import AGENT_TERMINAL, SlurmJob, merge, parse_scontrol
from rgt.backends.base import Backend
from rgt.backends.statusdoc import JobStatus
from rgt.errors import BackendError, UsageError
from rgt.models import JobSpec, Machine
from rgt.resources import Resources
from rgt.state.store import Store, utcnow
from rgt.transport.base import Transport
from rgt.transport.local import LocalTransport

DEFAULT_GRACE_S = 120
SCRIPT_NAME = "slurm.sbatch"
RECORD_NAME = "slurm.json"
# One round trip for N jobs: each job's Slurm id (from the slurm.json rgt wrote) and what
# the controller says of it, after a marker line. Job ids are arguments, never code.
SCONTROL_EACH = r"""jobs=$1; shift
for job in "$@"; do
  id=$(sed -n 's/^ *"slurm_job_id": *"\([0-9_]*\)".*/\1/p' "$jobs/$job/slurm.json" 2>/dev/null)
  [ -n "$id" ] || continue
  printf '@@rgt %s %s\n' "$job" "$id"
  scontrol show job -o "$id" 2>/dev/null
done
"""


class SlurmBackend(Backend):
    kind = "slurm"

    carries_secrets = False  # sbatch has no private stdin; the controller stores the env

    def __init__(self, machine: Machine) -> None:
        super().__init__(machine, _transport(machine))
        slurm = dict(machine.connection.get("slurm") or {})
        self.grace_s = int(slurm.get("grace_s") or DEFAULT_GRACE_S)
        self.defaults = Resources.from_mapping(slurm.get("resources") or {})
        if "host" not in machine.connection and not machine.connection.get("python"):
            self.python = sys.executable  # this host: rgt's own interpreter runs the agent

    # -- primitives ------------------------------------------------------------------------

    def detach(
        self,
        argv: Sequence[str],
        *,
        job: JobPaths,
        stdin: bytes | None = None,
        resources: Resources | None = None,
    ) -> None:
        """sbatch the agent on ``job``. Resources: the ones given, else the ones this job was
        submitted with before (its ``slurm.json``: `rgt resume`), else the machine's defaults."""
        if len(argv) < 2:
            raise BackendError("the Slurm backend only detaches the agent", backend=self.kind)
        res = self.defaults.merged(resources) if resources else self._recorded(job)
        sbatch = SbatchJob(
            name=f"rgt-{job.job_id}",
            python=argv[0],
            agent=argv[1],
            job_dirs=(job.root,),
            resources=res,
            grace_s=self.grace_s,
        )
        output = posixpath.join(job.root, "logs", "slurm.out")
        slurm_id = self._sbatch(sbatch, posixpath.join(job.root, SCRIPT_NAME), output, job.root)
        self._record(job.root, slurm_id, res)

    def _recorded(self, job: JobPaths) -> Resources:
        raw = self.transport.read_bytes(posixpath.join(job.root, RECORD_NAME))
        if not raw:
            return self.defaults
        return Resources.from_mapping(json.loads(raw).get("resources") or {})

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
        return self.interpret({job_id: super().status(job_id)})[job_id].to_doc()

    def interpret(self, docs: Mapping[str, Mapping[str, Any]]) -> dict[str, JobStatus]:
        """The agent's word merged with the controller's (``_slurm_state.merge``), asked for
        every job in one round trip. Slurm decides liveness: the agent
        runs on a compute node whose processes the host that answers cannot see."""
        ids = [j for j, d in docs.items() if d.get("exists") is not False]
        views = self._scheduler_views(ids) if ids else {}
        out = super().interpret(docs)
        for job_id, (slurm_id, job) in views.items():
            agent = dict(docs[job_id])
            merged = merge(agent, job, slurm_id)
            if merged["state"] in AGENT_TERMINAL and agent.get("state") not in AGENT_TERMINAL:
                # The agent's file was read before scontrol: it may have written its end in
                # between (its label, not the scheduler's guess). Read it once more.
                agent = dict(super().status(job_id))
                merged = merge(agent, job, slurm_id)
            # A plain `scancel` killed the agent before it could write the end: record it
            # now, with the agent's own code, so the answer survives Slurm forgetting the job.
            unrecorded = agent.get("state") not in AGENT_TERMINAL and not agent.get("agent_alive")
            if merged["state"] == "cancelled" and unrecorded:
                super().cancel(job_id)
            out[job_id] = JobStatus.from_doc(merged, job_id)
        return out

    def _scheduler_views(self, job_ids: Sequence[str]) -> dict[str, tuple[str, SlurmJob | None]]:
        """job id -> (Slurm id, what ``scontrol`` says or None) for the jobs submitted here."""
        jobs_dir = posixpath.join(self.root.root, "jobs")
        argv = ["sh", "-c", SCONTROL_EACH, "sh", jobs_dir, *job_ids]
        result = self.transport.run(argv, timeout=120)
        out: dict[str, tuple[str, SlurmJob | None]] = {}
        for section in result.text().split("@@rgt ")[1:]:
            head, _, text = section.partition("\n")
            job_id, _, slurm_id = head.partition(" ")
            out[job_id] = (slurm_id, parse_scontrol(text))
        return out

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
