"""Kaggle kernels as a backend: each rgt job is a private script kernel that runs the agent.

The machine is a local mirror (``$RGT_HOME/kaggle/<name>``) of what the kernels keep in
``/kaggle/working/rgt``: ``run`` snapshots the code into the mirror as on the local backend,
then ``detach`` pushes the job as a kernel version (``kaggle_kernel``). Kaggle shows a
version's files only once it has ended, so the read (``interpret``) asks the API for the
kernel's state (the API decides liveness, as Slurm does), and when a version has ended it
downloads that version's output into the mirror once; the read, ``logs``, ``pull`` and the
gate then read the agent's own files there, as on every other backend.

A version that Kaggle stopped at its run-time limit is ``preempted``: its agent recorded no
end. ``rgt resume JOB`` pushes a new version with the previous output attached as a kernel
source, and the agent resumes from the newest complete checkpoint there.

Not supported: secrets (a kernel has no private stdin), cancel (stop it on kaggle.com).
``connection``: ``owner``, ``gpu`` (T4x2, P100 or none), ``internet``, ``datasets``.
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from rgt._confine import confined, why_unsafe
from rgt.agent import jobfiles
from rgt.agent.jobfiles import parse_time
from rgt.agent.paths import JobPaths
from rgt.backends.base import jobs_of
from rgt.backends.local import LocalBackend
from rgt.backends.statusdoc import JobStatus
from rgt.errors import NotSupportedError
from rgt.models import Machine
from rgt.notebooks import kaggle_kernel
from rgt.notebooks.kaggle_api import KaggleClient, KernelStatus, OutputFile, credentials
from rgt.notebooks.kaggle_kernel import RECORD_NAME
from rgt.resources import Resources
from rgt.state.store import utcnow

# --gpu → kernel-metadata's machine_shape (docs/kernels.md: accelerator ids as of Feb 2026).
SHAPES = {"T4x2": "NvidiaTeslaT4", "P100": "NvidiaTeslaP100", "none": None}
ENDED = ("complete", "error", "cancelrequested", "cancelacknowledged")
TIME_LIMIT = re.compile(r"time ?limit|timed? ?out|maximum (run|execution) time", re.I)
QUOTA = "not reported by the API"
STALE_S = 600.0


def kernel_name(job_id: str) -> str:
    """The kernel's slug (its title lower-cased, dashes for the rest): ``rgt-<job id>``."""
    return re.sub(r"[^a-z0-9]+", "-", f"rgt-{job_id}".lower()).strip("-")[:50].rstrip("-")


class KaggleBackend(LocalBackend):
    kind = "kaggle"
    carries_secrets = False

    def __init__(self, machine: Machine) -> None:
        super().__init__(machine)
        self._client: KaggleClient | None = None

    def client(self) -> KaggleClient:
        if self._client is None:
            self._client = KaggleClient(credentials())
        return self._client

    def slug(self, job_id: str) -> str:
        return f"{self.machine.connection['owner']}/{kernel_name(job_id)}"

    # -- primitives ------------------------------------------------------------------------

    def detach(
        self,
        argv: Sequence[str],
        *,
        job: JobPaths,
        stdin: bytes | None = None,
        resources: Resources | None = None,
    ) -> None:
        """Push the job as a new version of its kernel: the first one from the job dir, a
        later one (``rgt resume``) on top of the previous version's output."""
        job_id = Path(job.root).name
        record = self.record(job_id)
        versions = list(record.get("versions") or [])
        text = self._kernel_text(job_id, resume=bool(versions))
        answer = self.client().save_kernel(self._push_body(job_id, text, resume=bool(versions)))
        versions.append({"version": answer.get("versionNumber"), "pushed": utcnow()})
        self._write_record(job_id, {**record, "kernel": self.slug(job_id), "versions": versions})

    def stop_meter(self) -> str:
        return "Kaggle kernels end on their own and bill nothing; the machine is marked released"

    def cancel(self, job_id: str) -> dict[str, Any]:
        raise NotSupportedError(
            "cancel",
            self.kind,
            why="rgt does not stop a running kernel version through the API",
            fix=f"stop it on https://www.kaggle.com/code/{self.slug(job_id)} (Cancel run)",
        )

    # -- status: the API decides liveness; an ended version's output is the agent's word --

    def interpret(self, docs: Mapping[str, Mapping[str, Any]]) -> dict[str, JobStatus]:
        """The mirror's documents judged by the Kaggle API: its kernel's status is the word
        on liveness (``merge``), for `rgt status`, `watch` and the gate alike (``read_jobs``).
        A kernel's version that ended is synced into the mirror first (a download into
        rgt's own copy, nothing changes on Kaggle), so its documents are read again after."""
        kernels = {j: self._observe(j) for j in docs if self.record(j).get("versions")}
        synced = jobs_of(self._patrol(0, False, list(kernels))) if kernels else {}
        out = {}
        for job_id, found in docs.items():
            doc = dict(synced.get(job_id) or found)
            if job_id in kernels:
                doc = merge(doc, kernels[job_id], self.record(job_id))
            out[job_id] = JobStatus.from_doc(doc, job_id)
        return out

    def _observe(self, job_id: str) -> KernelStatus:
        """The kernel's state; an ended version's output is downloaded into the mirror once."""
        seen = self.client().status(self.slug(job_id))
        record = self.record(job_id)
        latest = record["versions"][-1]
        if seen.status in ENDED and not latest.get("synced"):
            self._sync(job_id)
            attempt = self._attempt(job_id)
            if _stale(record["versions"], attempt):
                return KernelStatus("queued", "")
            latest.update(synced=utcnow(), status=seen.status, failure=seen.failure)
            self._write_record(
                job_id,
                {**record, "versions": [*record["versions"][:-1], {**latest, "attempt": attempt}]},
            )
        return seen

    def _attempt(self, job_id: str) -> int:
        path = Path(self.job_paths(job_id).status)
        try:
            return int(json.loads(path.read_text()).get("attempt") or 0)
        except (OSError, ValueError, TypeError, AttributeError):
            return 0

    def _sync(self, job_id: str) -> None:
        """Replace the mirror's job dir with the version's output (``rgt/.rgt/jobs/<id>/…``);
        rgt's record and the code link stay. Files outside the job dir are not needed here."""
        files, log_text = self.client().output(self.slug(job_id))
        prefix = f"rgt/.rgt/jobs/{job_id}/"
        job = Path(self.job_paths(job_id).root)
        fresh = Path(tempfile.mkdtemp(prefix=f"kaggle-sync-{job_id}-", dir=self.root.root))
        try:
            for item in files:
                rel = _inside(item, prefix)
                if rel is not None:
                    self.client().download(item.url, Path(confined(str(fresh), rel)))
            version = self.record(job_id)["versions"][-1].get("version")
            (fresh / f"kaggle-v{version}.log").write_text(log_text)
            kept = [job / RECORD_NAME, job / "code", *job.glob("kaggle-v*.log")]
            for keep in kept:  # rgt's record, the code link, earlier versions' kernel logs
                if keep.exists() or keep.is_symlink():
                    keep.rename(fresh / keep.name)
            (fresh / "logs").mkdir(exist_ok=True)
            old = fresh.with_name(fresh.name + "-old")
            job.rename(old)
            fresh.rename(job)
            shutil.rmtree(old)
        finally:
            shutil.rmtree(fresh, ignore_errors=True)

    # -- the kernel's text and metadata ----------------------------------------------------

    def _kernel_text(self, job_id: str, *, resume: bool) -> str:
        from rgt.agent.build import agent_version

        agent = f"agent-{agent_version()}.pyz"
        spec = json.loads(Path(self.job_paths(job_id).spec).read_text())
        rgt_root = Path(self.root.root)
        payload = kaggle_kernel.bundle(
            rgt_root, job_id, agent, str(spec.get("code_snapshot") or ""), first=not resume
        )
        return kaggle_kernel.script(payload, job_id, agent, kernel_name(job_id) if resume else "")

    def _push_body(self, job_id: str, text: str, *, resume: bool) -> dict[str, Any]:
        """kernel-metadata.json as SaveKernel's body (``kaggle_api`` names the source)."""
        conn = self.machine.connection
        shape = SHAPES.get(str(conn.get("gpu") or "none"))
        return {
            "slug": self.slug(job_id),
            "newTitle": kernel_name(job_id),
            "text": text,
            "language": "python",
            "kernelType": "script",
            "isPrivate": True,
            "enableGpu": shape is not None,
            "enableTpu": False,
            "enableInternet": bool(conn.get("internet")),
            "datasetDataSources": list(conn.get("datasets") or []),
            "competitionDataSources": [],
            "kernelDataSources": [self.slug(job_id)] if resume else [],
            "modelDataSources": [],
            "categoryIds": [],
            "machineShape": shape,
        }

    # -- rgt's record of the kernel (local only) --------------------------------------------

    def record(self, job_id: str) -> dict[str, Any]:
        path = Path(self.job_paths(job_id).root) / RECORD_NAME
        doc: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {}
        return doc

    def _write_record(self, job_id: str, record: dict[str, Any]) -> None:
        path = f"{self.job_paths(job_id).root}/{RECORD_NAME}"
        self.transport.write_bytes(path, json.dumps(record, indent=2).encode())


def merge(doc: dict[str, Any], seen: KernelStatus, record: dict[str, Any]) -> dict[str, Any]:
    """The agent's files (from the last ended version) with the API's word on the kernel now."""
    out = dict(doc)
    state = str(doc.get("state") or "queued")
    out["liveness"] = "kaggle"
    out["kaggle"] = {
        "kernel": record.get("kernel"),
        "status": seen.status,
        "failure": seen.failure or None,
        "version": record["versions"][-1].get("version"),
        "versions": len(record["versions"]),
        "gpu_quota": QUOTA,
    }
    out.update(agent_alive=seen.status == "running", waiting=seen.status not in ENDED)
    version = f"version {out['kaggle']['version']} of {record.get('kernel')}"
    if seen.status == "running":  # the API's RUNNING is the heartbeat: files come at the end
        out.update(state="running", heartbeat=utcnow(), waiting=False)
        out["reason"] = f"Kaggle runs {version}; weekly GPU quota: {QUOTA}"
    elif seen.status not in ENDED:
        out["reason"] = f"Kaggle has {version} {seen.status}; weekly GPU quota: {QUOTA}"
    elif state not in jobfiles.TERMINAL:
        out.update(_unrecorded_end(seen, state, out.get("kaggle", {}).get("kernel")))
    return out


def _unrecorded_end(seen: KernelStatus, state: str, kernel: Any) -> dict[str, Any]:
    """The version ended and its agent recorded no end: Kaggle stopped it."""
    if TIME_LIMIT.search(seen.failure):
        return {
            "state": state if state != "queued" else "running",
            "label": "preempted",
            "reason": f"Kaggle stopped the kernel at its run-time limit ({seen.failure}): "
            "`rgt resume JOB` pushes a new version that resumes from the newest checkpoint",
        }
    return {
        "state": "failed",
        "label": "unknown",
        "done": True,
        "reason": f"the kernel {kernel} ended ({seen.status}: {seen.failure or 'no message'}) "
        "before the agent recorded an end; read its log (`rgt logs JOB`)",
    }


def _stale(versions: list[dict[str, Any]], attempt: int) -> bool:
    """Right after a push the API may still answer for the previous version (ended): its
    output shows no new attempt. Trusted anyway after ``STALE_S`` (an agent that never
    started in the new version must not leave the job queued for ever)."""
    if len(versions) < 2 or attempt > int(versions[-2].get("attempt") or 0):
        return False
    pushed = parse_time(versions[-1].get("pushed"))
    return pushed is not None and (datetime.now(timezone.utc) - pushed).total_seconds() < STALE_S


def _inside(item: OutputFile, prefix: str) -> str | None:
    """The path of an output file under the job dir, or None (elsewhere, or unsafe)."""
    if not item.name.startswith(prefix):
        return None
    rel = item.name[len(prefix) :]
    if why_unsafe(rel) is not None:  # rgt._confine: absolute, '..', NUL, backslash, empty part
        return None
    return None if rel.split("/")[0] in (RECORD_NAME, "code") else rel
