"""RUN tools: each is the ``rgt`` command of the same name, with ``--json``.

A tool's parameters are the command's arguments and options (their types make the input
schema); its result is the document ``--json`` prints. Every tool here calls what its CLI
body calls (``rgt.verbs`` and below), never the click app. Two
tools add what a chat needs and a terminal does not: ``logs`` returns a bounded tail and the
failure's triage label, and ``watch`` waits a bounded time for a job to end instead of
streaming.
"""

from __future__ import annotations

import os
import time
from typing import Any

from rgt.agent import jobfiles
from rgt.errors import UsageError
from rgt.mcp._call import as_command, document
from rgt.mcp._invoke import CommandFailed
from rgt.state.store import Store
from rgt.verbs.run import RunRequest, forecast
from rgt.verbs.run import run as run_job

LOG_LINES = 80  # default tail of the `logs` tool
LOG_BYTES = 8000  # hard cap on the tail's characters, whatever `lines` asks for
MAX_WAIT_S = 600  # the longest one `watch` call waits
ENDED = jobfiles.TERMINAL


def profiles(name: str | None = None, stale: bool = False) -> dict[str, Any]:
    """Platform profiles (AutoDL, RunPod, Slurm, local, ...): their storage tiers, what survives
    stop/destroy, danger clocks. With NAME, one profile in full; `stale` lists old facts."""
    from datetime import date

    from rgt import profiles as found
    from rgt.verbs.profiles import listing, profile_document, stale_document

    with as_command(["profiles"], [name] if name else [], stale=stale):
        if stale:
            months, day = found.DEFAULT_MONTHS, date.today()
            return document(stale_document(found.stale_facts(months, day), months, day))
        if name:
            return document(profile_document(found.load_profile(name)))
        return document(listing(found.list_profiles()))


def offers(
    platform: str,
    gpu: str,
    spot: bool = False,
    max_price: float | None = None,
    region: str | None = None,
) -> dict[str, Any]:
    """GPU offers of a vendor API (runpod, vastai, lambda, paperspace), cheapest first.
    `gpu` is GPU[:COUNT], e.g. "A100:1"."""
    from rgt.verbs.offers import offers as find

    flags = {"gpu": gpu, "spot": spot, "max_price": max_price, "region": region}
    with as_command(["offers"], [platform], **flags):
        return document(find(platform, gpu, spot, max_price, region))


def up(
    profile: str,
    name: str,
    ssh: str | None = None,
    price: float | None = None,
    root: str | None = None,
    gpu: str | None = None,
    offer: str | None = None,
    image: str | None = None,
    disk: int | None = None,
    spot: bool = False,
    max_price: float | None = None,
    region: str | None = None,
) -> dict[str, Any]:
    """Register a machine (profile local, generic-ssh, autodl, ... with the `ssh` line the
    console shows, e.g. "ssh -p 2222 root@host"), or rent one through a vendor API with `gpu`.
    Renting starts a meter: ask the user first."""
    from rgt.platforms import UpRequest
    from rgt.verbs.up import rental
    from rgt.verbs.up import up as register

    renting: dict[str, Any] = {"gpu": gpu, "offer": offer, "image": image, "disk_gb": disk}
    renting.update(spot=spot, max_price=max_price, region=region)
    flags = {"name": name, "ssh": ssh, "price": price, "root": root, **renting, "disk": disk}
    del flags["disk_gb"]
    with as_command(["up"], [profile], **flags):
        request = UpRequest(profile, name, ssh, price, root, vendor=rental(renting))
        return document(register(request))


def audit(
    name: str,
    paths: list[str] | None = None,
    ckpt_gb: float = 0.0,
    keep: int = 3,
    scratch_gb: float = 0.0,
    worker_gb: float = 2.0,
) -> dict[str, Any]:
    """Phase 0 on machine NAME: disks and inodes of each tier, cgroup memory, GPUs, driver,
    torch, /dev/shm; the checkpoint disk budget; findings with their fixes."""
    from rgt.watch.audit import Budget
    from rgt.watch.audit import audit as run_audit

    budget = Budget(ckpt_gb=ckpt_gb, keep=keep, scratch_gb=scratch_gb, worker_gb=worker_gb)
    flags = {"ckpt_gb": ckpt_gb, "keep": keep, "scratch_gb": scratch_gb, "worker_gb": worker_gb}
    with as_command(["audit"], [name], path=paths or [], **flags):
        data = run_audit(Store.open(), name, list(paths or []), budget)
        return document(data, exit_code=0 if data["ok"] else 1)


def push(name: str, paths: list[str], to: str | None = None) -> dict[str, Any]:
    """Copy code (an immutable snapshot, honouring .gitignore/.rgtignore) and data `paths` to
    machine NAME; resumable, hash-checked."""
    from rgt.jobs.push import push as push_files

    with as_command(["push"], [name, *paths], to=to):
        for path in paths:  # as given: "data/" pushes the folder's contents, as with rsync
            if not os.path.exists(path):
                raise UsageError(f"{path!r} does not exist", fix="pass files or folders here")
        return document(push_files(Store.open(), name, paths, to=to).to_json())


def fetch(
    name: str,
    source: str,
    includes: list[str] | None = None,
    to: str | None = None,
    sha256: str | None = None,
    max_bytes: int | None = None,
    wait_s: float = 0,
) -> dict[str, Any]:
    """Download hf://ORG/MODEL[@REV] or an https:// URL ON machine NAME (a job; resumable,
    sizes and hashes checked; `sha256`: a URL's expected hash; `max_bytes`: refuse a larger
    file) into `to` (default: the durable models folder), over files already there. A gated or
    private repo needs the human's token: ask them to run `rgt fetch NAME SOURCE
    --token-stdin` in their terminal."""
    from rgt.fetch import FetchRequest
    from rgt.verbs.fetch import fetch as start

    flags = {"include": includes or [], "to": to, "sha256": sha256, "max_bytes": max_bytes}
    with as_command(["fetch"], [name, source], **flags, wait=wait_s):
        if max_bytes is not None and max_bytes < 1:
            raise UsageError(f"max_bytes {max_bytes} is below 1", fix="a positive byte count")
        request = FetchRequest(source, tuple(includes or ()), to, None, sha256, max_bytes)
        data = start(Store.open(), name, request, wait_s)
        return document(data, exit_code=1 if data.get("state") == "failed" else 0)


def smoke(
    command: list[str],
    timeout: float = 600,
    resume_with: str | None = None,
    ckpt: str | None = None,
    kill_after_seconds: float = 120,
    kill_after_lines: int = 2000,
) -> dict[str, Any]:
    """Run the training `command` here on CPU for 1-2 batches, kill it, resume it, and check
    the resumed state equals the uninterrupted one. Do this before every GPU run."""
    from rgt.verbs.smoke import options
    from rgt.verbs.smoke import smoke as run_smoke

    limits = {"kill_after_seconds": kill_after_seconds, "kill_after_lines": kill_after_lines}
    with as_command(["smoke"], command, timeout=timeout, resume_with=resume_with, ckpt=ckpt,
                    **limits):  # fmt: skip
        how = options(resume_with, ckpt, kill_after_seconds, kill_after_lines)
        done = run_smoke(command, how, timeout)
        return document(done.to_json(), exit_code=1 if done.failed else 0)


def run(
    machine: str,
    command: list[str],
    env: dict[str, str] | None = None,
    secrets: list[str] | None = None,
    artifacts: list[str] | None = None,
    excludes: list[str] | None = None,
    retries: int = 3,
    probe_seconds: float = 60,
    resume_with: str | None = None,
    ckpt: str | None = None,
    dry_run: bool = False,
) -> dict[str, Any]:
    """Launch `command` detached on `machine` under rgt's agent; probe it for `probe_seconds`
    and return its job id and state. `secrets` are names of environment variables of this
    server whose values go over stdin, never stored; `env` is plain, never secret. With
    `dry_run` nothing starts: what would start, where, and its expected duration and cost."""
    pairs = [f"{k}={v}" for k, v in (env or {}).items()]
    flags: dict[str, object] = {
        "env": pairs,
        "secret": secrets or [],
        "artifact": artifacts or [],
        "exclude": excludes or [],
        "retries": retries,
        "probe_seconds": probe_seconds,
        "resume_with": resume_with,
        "ckpt": ckpt,
    }
    with as_command(["run"], [machine, *command], **flags, dry_run=dry_run):
        request = RunRequest(
            machine=machine,
            command=tuple(command),
            env=tuple(pairs),
            secrets=tuple(secrets or ()),
            artifacts=tuple(artifacts or ()),
            excludes=tuple(excludes or ()),
            retries=retries,
            probe_seconds=probe_seconds,
            resume_with=resume_with,
            ckpt_glob=ckpt,
        )
        if dry_run:  # nothing starts, no meter: the forecast
            return document(forecast(Store.open(), request).to_json())
        result = run_job(Store.open(), request)
        return document(result.to_json(), exit_code=1 if result.failed else 0)


def status(target: str | None = None) -> dict[str, Any]:
    """Machines and jobs (TARGET: a machine name or a job id): states, triage labels."""
    from rgt.verbs.status import report, shown

    with as_command(["status"], [target] if target else []):
        return document(shown(report(Store.open(), target)))


def watch(
    target: str | None = None, wait_s: float = 0, interval_s: float = 5, full: bool = False
) -> dict[str, Any]:
    """One patrol report of machines and jobs (events, heartbeats, disk, GPU idle, not pulled),
    cut to the fields that matter unless `full`. With a job id and `wait_s`, wait up to that
    long (at most 600 s) for the job to end, then return its report. Call it on a schedule;
    never loop on sleep."""
    deadline = time.monotonic() + min(max(wait_s, 0), MAX_WAIT_S)
    while True:  # the CLI's compact form (rgt.watch.compact) unless `full`
        report = _watch_once(target, full)
        if not _waiting(report) or time.monotonic() >= deadline:
            break
        time.sleep(max(min(interval_s, deadline - time.monotonic()), 0.1))
    return report


def _watch_once(target: str | None, full: bool) -> dict[str, Any]:
    """``rgt watch --once --no-gpu [TARGET]``: one patrol, no nvidia-smi."""
    from rgt.verbs.watch import once, patrol_options

    words = [target] if target else []
    with as_command(["watch"], words, once=True, no_gpu=True, full=full):
        return document(once(Store.open(), target, patrol_options(gpu=False)).document(full))


def _waiting(report: dict[str, Any]) -> bool:
    """A single job's report that has not ended and is not stuck (lost agent, bad file)."""
    if "job_id" not in report:
        return False
    return report.get("state") not in ENDED and not (
        report.get("heartbeat_lost") or report.get("problem")
    )


def logs(job_id: str, lines: int = LOG_LINES) -> dict[str, Any]:
    """The last `lines` lines (at most 8000 characters) of the job's latest log, with the
    triage label, cause and remedy when the job failed."""
    from rgt.jobs.diagnose import job_evidence
    from rgt.state.store import Store

    store = Store.open()
    evidence = job_evidence(store, _job(store, job_id))
    tail, cut = _bounded(evidence.log_tail, lines)
    verdict = triage(evidence.job_id) if evidence.state == "failed" else None
    return {
        "job_id": evidence.job_id,
        "attempt": evidence.attempt,
        "state": evidence.state,
        "tail": tail,
        "truncated": cut,
        "triage": _label(verdict) if verdict else None,
    }


def _job(store: Any, ref: str) -> str:
    from rgt.errors import RgtError

    try:
        return str(store.resolve_job(ref))
    except RgtError as exc:
        raise CommandFailed({**exc.to_dict(), "exit_code": exc.exit_code}) from None


def _bounded(text: str, lines: int) -> tuple[str, bool]:
    kept = text.splitlines()[-max(lines, 1) :]
    tail = "\n".join(kept)[-LOG_BYTES:]
    return tail, tail != text.rstrip("\n")


def _label(verdict: dict[str, Any]) -> dict[str, Any]:
    keys = ("label", "cause", "remedy", "retryable", "secondary")
    return {k: verdict[k] for k in keys if k in verdict}


def triage(target: str, exit_code: int | None = None, signal: int | None = None) -> dict[str, Any]:
    """Classify a failed job (a job id, or a log file) into one fixed label with its root cause,
    remedy, and whether a retry can help. Never retry a label that says it cannot."""
    from rgt.verbs.triage import triage as classify

    with as_command(["triage"], [target], exit_code=exit_code, signal=signal):
        return document(classify(target, exit_code, signal))


def pull(job_id: str, to: str | None = None) -> dict[str, Any]:
    """Copy a job's artifacts here (default ./rgt-pulls/JOB_ID), check every sha256 and
    load-verify each file. The gate of `down` needs this for every job."""
    from rgt.verbs.pull import destination
    from rgt.verbs.pull import pull as pull_job

    with as_command(["pull"], [job_id], to=to):
        store = Store.open()
        job_id = store.resolve_job(job_id)
        if to is not None and to.startswith("hf://"):  # the verified artifacts to the Hub
            from rgt.fetch.publish import publish

            return document(publish(store, job_id, to, None))
        pulled = pull_job(store, job_id, destination(job_id, to))
        return document(pulled.to_json(), exit_code=0 if pulled.result.ok else 1)


def cancel(job_id: str) -> dict[str, Any]:
    """Stop a job (its process group); it ends as `cancelled` and is never retried."""
    from rgt.jobs.fleet import cancel as cancel_job

    with as_command(["cancel"], [job_id]):
        store = Store.open()
        return document(cancel_job(store, store.job(store.resolve_job(job_id))))


def ckpt_list(directory: str) -> dict[str, Any]:
    """The checkpoints rgt.ckpt committed in a local `directory` (e.g. a pulled ckpt/), newest
    last, each with step, metric, bytes and whether its hash still verifies."""
    from dataclasses import asdict
    from pathlib import Path

    from rgt.ckpt._store import is_intact, list_committed

    if not Path(directory).is_dir():
        raise CommandFailed(
            {
                "error": "UsageError",
                "message": f"{directory!r} is not a directory",
                "fix": "pass the checkpoint directory (RGT_CKPT_DIR), e.g. a pulled job's ckpt/",
                "exit_code": 2,
            }
        )
    infos = list_committed(directory)
    rows = [{**asdict(info), "intact": is_intact(info)} for info in infos]
    return {"directory": directory, "checkpoints": rows}
