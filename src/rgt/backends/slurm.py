"""A Slurm cluster as a backend: the agent runs inside the allocation, started by ``sbatch``.

The machine is the place where ``sbatch`` runs: this host (when ``sbatch`` is on PATH) or a
login node over SSH. Its durable root must be on a filesystem every compute node mounts
(``$HOME`` or a project directory, never a node-local ``/tmp``): job directories, checkpoints
and the agent live there, and a requeued job may restart on another node.

``detach`` writes the rendered script (``_render/sbatch.py``) into the job directory as
``slurm.sbatch``, submits it, and records Slurm's job id and the job's resources in
``slurm.json`` (``rgt resume`` submits again with them); the read (``interpret``) merges
``scontrol show job`` with the agent's ``status.json`` (``_slurm_state.py``), both read in
one round trip (``_patrol``, ``_slurm_read.py``), and changes nothing: an end only Slurm saw
(a plain ``scancel``) is recorded by the status path (``rgt.status.read``). Nothing bills
per machine here: the allocation is the meter, and it ends with the job.

``--nodes N`` (N > 1) asks ``sbatch --nodes N --ntasks-per-node 1`` (a partition with fewer
nodes is refused first, ``_slurm_nodes.py``); the script and the one agent run on the first
node, and the agent starts the command on every node with ``srun``, with the rendezvous
variables and a log per node (``rgt.agent._slurm_nodes``). Everything a node writes lands in
the one job dir on the shared filesystem, so status, ``pull`` and the gate need nothing more;
``on_node`` serves ``rgt logs JOB --node R``. A job array (a sweep) takes ``--nodes`` per task.
"""

from __future__ import annotations

import contextlib
import json
import posixpath
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from rgt.agent.paths import JobPaths
from rgt.backends import _slurm_read
from rgt.backends._render.sbatch import SbatchJob, render_script, sbatch_argv
from rgt.backends._slurm_read import SlurmView
from rgt.backends._slurm_state import AGENT_TERMINAL, merge
from rgt.backends._slurm_up import DEFAULT_GRACE_S, _transport, register_slurm
from rgt.backends.base import Backend, jobs_of
from rgt.backends.statusdoc import JobStatus
from rgt.errors import BackendError, UsageError
from rgt.models import JobSpec, Machine
from rgt.resources import Resources
from rgt.state.store import utcnow

__all__ = ["DEFAULT_GRACE_S", "SlurmBackend", "register_slurm"]

SCRIPT_NAME = "slurm.sbatch"
RECORD_NAME = "slurm.json"


class SlurmBackend(Backend):
    kind = "slurm"

    carries_secrets = False  # sbatch has no private stdin; the controller stores the env
    arrays = True  # a sweep's cells are one job array

    def __init__(self, machine: Machine) -> None:
        super().__init__(machine, _transport(machine))
        slurm = dict(machine.connection.get("slurm") or {})
        self.grace_s = int(slurm.get("grace_s") or DEFAULT_GRACE_S)
        self.defaults = Resources.from_mapping(slurm.get("resources") or {})
        self._node: int | None = None  # on_node: whose log ``log`` reads (None: the job's)
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

    def submit_many(
        self, specs: Sequence[JobSpec], resources: Resources | None = None, limit: int = 0
    ) -> str:
        """One Slurm job array, one task per spec (task i runs specs[i]), at most ``limit``
        running at once (0: no limit); returns its id."""
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
            max_parallel=limit or None,
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

    def on_node(self, job_id: str, rank: int) -> SlurmBackend:
        """This backend reading node ``rank``'s own log of a multi-node job (``rgt logs JOB
        --node R``: ``logs/attempt-N/node-R.log``, which that node's launcher tees); a job on
        one node has one log. A rank the job does not have is refused."""
        raw = self.transport.read_bytes(posixpath.join(self.job_paths(job_id).root, RECORD_NAME))
        nodes = Resources.from_mapping(json.loads(raw).get("resources") or {}).nodes if raw else 1
        nodes = nodes or 1
        if not 0 <= rank < nodes:
            raise UsageError(
                f"job {job_id} has no node {rank} (it runs on {nodes} node(s): "
                f"nodes 0..{nodes - 1})",
                fix=f"give --node 0 to {nodes - 1}",
            )
        if nodes == 1:
            return self
        view = SlurmBackend(self.machine)
        view._node = rank
        return view

    def log(self, job_id: str, attempt: int, offset: int = 0) -> bytes:
        if self._node is None:
            return super().log(job_id, attempt, offset)
        root = self.job_paths(job_id).root
        path = posixpath.join(root, "logs", f"attempt-{attempt}", f"node-{self._node}.log")
        result = self.transport.run(["tail", "-c", f"+{offset + 1}", "--", path])
        return result.stdout if result.ok else b""

    def slurm_id(self, job_id: str) -> str | None:
        raw = self.transport.read_bytes(posixpath.join(self.job_paths(job_id).root, RECORD_NAME))
        return str(json.loads(raw)["slurm_job_id"]) if raw else None

    def _patrol(self, events: int, gpu: bool, job_ids: Sequence[str]) -> dict[str, Any]:
        """The agent's patrol and the controller's word on each job (``job_ids``, or every
        job dir) in one ``sh -c`` (``_slurm_read``); each job's document carries what the
        controller said under ``slurm_view`` for ``interpret``. The agent is installed (and
        patrol run again) only when its file is missing."""
        from rgt.backends.remote import _agent_version, machine_call

        agent = self.root.agent_file(_agent_version())
        argv = _slurm_read.argv(self.python, agent, self.root.root, events, gpu, job_ids)
        read = _slurm_read.parse(self.transport.run(argv, timeout=120).text())
        doc = None
        if read.patrol is not None:
            with contextlib.suppress(json.JSONDecodeError):
                doc = json.loads(read.patrol)
        if not isinstance(doc, dict):
            args = ["--events", str(events)] + ([] if gpu else ["--no-gpu"])
            doc = machine_call(self, "patrol", args, timeout=60)
        for job_id, job in jobs_of(doc).items():
            if not job_ids or job_id in job_ids:  # asked: no view means no slurm.json
                view = read.views.get(job_id)
                job["slurm_view"] = view.to_json() if view is not None else None
        return doc

    def interpret(self, docs: Mapping[str, Mapping[str, Any]]) -> dict[str, JobStatus]:
        """The agent's documents with the controller's word, merged (``_slurm_state.merge``).
        Slurm decides liveness: the agent runs on a compute node whose processes the host
        that answers cannot see. A controller that cannot be asked leaves the agent's word.
        The controller's word comes with the patrol (``_patrol``); a document without it is
        asked about here (one more round trip for all of them)."""
        launched = {j: d for j, d in docs.items() if d.get("exists") is not False}
        unasked = [j for j, d in launched.items() if "slurm_view" not in d]
        views = self._scheduler_views(unasked) if unasked else {}
        for job_id, doc in launched.items():
            said = doc.get("slurm_view")
            if isinstance(said, Mapping):
                views[job_id] = SlurmView.from_json(said)
        out = super().interpret({j: _agent_part(d) for j, d in docs.items()})
        for job_id, view in views.items():
            if job_id in launched:
                out[job_id] = self._merged(job_id, _agent_part(launched[job_id]), view)
        return out

    def _merged(self, job_id: str, agent: dict[str, Any], view: SlurmView) -> JobStatus:
        """One job: the agent's word merged with the controller's."""
        if view.error is not None:
            agent["slurm"] = {"job_id": view.slurm_id, "state": "UNKNOWN", "error": view.error}
            return JobStatus.from_doc(agent, job_id)
        merged = merge(agent, view.job, view.slurm_id)
        if merged["state"] in AGENT_TERMINAL and agent.get("state") not in AGENT_TERMINAL:
            # The agent's file was read before scontrol: it may have written its end in
            # between (its label, not the scheduler's guess). Read it once more.
            agent = self.agent_call("status", job_id)
            merged = merge(agent, view.job, view.slurm_id)
        # A plain `scancel` killed the agent before it could write the end: said here, and
        # recorded by the status path (``rgt.status.read``: ``cancel``), never by a read.
        unrecorded = agent.get("state") not in AGENT_TERMINAL and not agent.get("agent_alive")
        merged["unrecorded_end"] = merged["state"] == "cancelled" and unrecorded
        return JobStatus.from_doc(merged, job_id)

    def _scheduler_views(self, job_ids: Sequence[str]) -> dict[str, SlurmView]:
        """job id -> what the controller says, for the jobs submitted here (no patrol)."""
        argv = _slurm_read.argv(self.python, "/nonexistent", self.root.root, 0, False, job_ids)
        return _slurm_read.parse(self.transport.run(argv, timeout=120).text()).views

    def cancel(self, job_id: str) -> dict[str, Any]:
        """The agent ends the job and records ``cancelled``; then Slurm drops the allocation
        or the queue entry (a requeued job must not start again). After a plain `scancel`
        (its agent was killed with the allocation) this records the end the agent could not:
        ``rgt.status.read`` calls it for a status with ``unrecorded_end``."""
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


def _agent_part(doc: Mapping[str, Any]) -> dict[str, Any]:
    """The agent's own document, without the controller's word that came along with it."""
    return {k: v for k, v in doc.items() if k != "slurm_view"}
