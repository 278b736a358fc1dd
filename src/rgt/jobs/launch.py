"""Launching a job (`rgt run`), probing it, and following it until it ends.

``launch`` snapshots the code, writes the spec and starts the agent detached; ``probe`` watches
the first seconds (alive? log head? a traceback already? the log's tail when it failed) so a
typo fails in front of the user and not at 3 a.m.; ``refresh`` copies the agent's truth into
the local cache.
"""

from __future__ import annotations

import os
import secrets as pysecrets
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from rgt._log import register_secrets
from rgt.backends import backend_for, jobstatus
from rgt.backends._render.fit import box_gpus, fit
from rgt.backends.base import Backend
from rgt.errors import TransportError, UsageError
from rgt.jobs.notify import Webhook, reread
from rgt.models import TERMINAL, JobRecord, JobSpec, JobState, RetryPolicy
from rgt.profiles.session import notebook_env
from rgt.resources import Resources
from rgt.state.store import Store, utcnow
from rgt.status import cache as status_cache
from rgt.transport.snapshot import take_snapshot

TRACEBACK_MARK = "Traceback (most recent call last)"


@dataclass(frozen=True)
class LaunchOptions:
    command: tuple[str, ...]
    cwd: Path = field(default_factory=Path.cwd)
    env: dict[str, str] = field(default_factory=dict)
    secret_env: tuple[str, ...] = ()
    artifacts: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    smoke: bool = False
    notify: Webhook | None = None  # the URL travels with the secrets, never in the spec
    job_id: str | None = None
    resume_from: str | None = (
        None  # an earlier job on the same machine whose checkpoints seed this one
    )
    resume: dict[str, str] | None = None  # --resume-with / --ckpt (rgt.jobs.resume_form)
    resources: Resources | None = None  # None: the machine's defaults (Slurm, Kubernetes)


# What the probe keeps of the log: its head (what the job is doing) and, bounded, its tail (the
# traceback of a failure comes last, often after pages of config dump).
HEAD_BYTES = 4000
TAIL_BYTES = 8000


@dataclass(frozen=True)
class ProbeResult:
    state: JobState
    seconds: float
    log_head: str
    traceback: bool
    status: dict[str, Any]
    log_tail: str = ""

    @property
    def failed(self) -> bool:
        return self.state in (JobState.FAILED, JobState.CANCELLED) or self.traceback


def new_job_id(machine: str) -> str:
    stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    return f"{machine}-{stamp}-{pysecrets.token_hex(2)}"


def launch(store: Store, machine_name: str, options: LaunchOptions) -> JobRecord:
    backend = backend_for(store, machine_name)
    if not backend.machine.active:
        raise UsageError(
            f"machine {machine_name} was released",
            fix=f"register it again with `rgt up … --name {machine_name}`",
        )
    resources = fit(backend, options.resources)  # refused before anything starts
    secret_values = _read_secrets(options.secret_env)
    if options.notify:
        secret_values.update(options.notify.secrets())
    snapshot = take_snapshot(options.cwd)
    backend.push_snapshot(snapshot)
    job_id = options.job_id or new_job_id(machine_name)
    spec = build_spec(backend, options, job_id, snapshot.digest, resources)
    record = store.add_job(spec)
    try:
        if options.resume_from:
            backend.seed_checkpoints(spec.job_id, options.resume_from)
        backend.submit(spec, secret_values or None, resources)
    except BaseException:
        status_cache.never_submitted(store, [spec.job_id])
        raise
    return record


def build_spec(
    backend: Backend,
    options: LaunchOptions,
    job_id: str,
    digest: str,
    resources: Resources | None,
    node: Mapping[str, str] | None = None,
    nodes: tuple[str, ...] = (),
) -> JobSpec:
    """The spec ``backend``'s agent runs. ``node``, a fleet node's rendezvous variables
    (``rgt.jobs.fleet``), is laid over ``--env``; ``nodes``: the fleet's machines by rank."""
    return JobSpec(
        job_id=job_id,
        machine=backend.machine.name,
        command=options.command,
        code_snapshot=digest,
        env={
            **_price_env(backend.machine.price_per_hour),
            **_network_env(backend),
            **notebook_env(backend.machine.connection, job_id),
            **options.env,
            **(node or {}),
        },
        secret_env=options.secret_env,
        artifacts=options.artifacts,
        exclude=options.exclude,
        retry=options.retry,
        smoke=options.smoke,
        created=utcnow(),
        notify=options.notify.source if options.notify else None,
        resume=options.resume,
        gpus=box_gpus(backend.kind, resources),
        nodes=nodes,
    )


def _network_env(backend: Backend) -> dict[str, str]:
    """The machine's mirrors and no_proxy (``rgt.profiles.network``); ``--env`` wins over them."""
    from rgt.profiles.network import machine_plan

    machine = backend.machine
    return machine_plan(machine.profile, machine.connection, machine.name, machine.registered).env


def _price_env(price: float | None) -> dict[str, str]:
    """The agent's idle-GPU sentinel warns only where a meter runs (rgt.agent._sentinel)."""
    return {"RGT_PRICE_PER_HOUR": f"{price:g}"} if price else {}


def resume(store: Store, job_id: str) -> dict[str, Any]:
    """Start the agent again on a job whose agent is gone (heartbeat lost, host rebooted), or
    restart a failed job from its newest valid checkpoint (a new attempt with the job's command
    and resume form; ``ok`` False with the reason when it has none).

    The agent counts the interrupted attempt, stops any leftover process of it, and starts the
    next attempt with the same spec (its resume form when a checkpoint is found, ``_resume``).
    Secrets are read again from this process's environment, by the names in the spec, and
    the webhook URL from its recorded source (``rgt.jobs.notify.reread``). Whether the agent
    really came up and stayed up is checked before this says so (``revive``)."""
    from rgt.agent.supervisor import REOPEN_REQUEST
    from rgt.jobs.revive import confirm, reopen

    record = store.job(job_id)
    if len(record.spec.nodes) > 1:
        raise UsageError(
            f"job {job_id} is a fleet ({', '.join(record.spec.nodes)}): `rgt resume` restarts "
            "one machine's agent and would leave the others out of the group's rendezvous",
            fix="launch it again with `rgt run A,B …` (each node's agent restarts the group "
            "by itself after a retryable failure)",
        )
    backend = backend_for(store, record.machine)
    status = refresh(store, job_id, backend)
    if status.get("exists") is False:
        why = (status.get("problem") or {}).get("detail") or f"job {job_id} is not on the machine"
        raise UsageError(f"{why} ({record.machine})", fix="launch it again with `rgt run`")
    if status.get("agent_alive") or status.get("waiting"):
        said = "its agent is running" if status.get("agent_alive") else "it waits in the queue"
        said += f" ({status['liveness']} says so)" if status.get("liveness") != "agent" else ""
        return {**status, "resumed": False, "ok": True, "reason": said}
    failed = status.get("state") == JobState.FAILED.value
    if jobstatus.ended(status) and not failed:  # recorded, or proven by events.jsonl/DONE
        ended = {"resumed": False, "ok": True, "reason": f"the job has ended ({status['state']})"}
        return {**status, **ended}
    secrets = _read_secrets(record.spec.secret_env)
    webhook, note = reread(record.spec.notify)
    secrets.update(webhook.secrets() if webhook else {})
    paths = backend.job_paths(job_id)
    if failed:  # the agent restarts it from its newest valid checkpoint, or says why not
        backend.transport.write_bytes(f"{paths.root}/{REOPEN_REQUEST}", b"{}\n")
    backend.start_agent(backend.install_agent(), paths, secrets or None)
    if failed:
        done = reopen(store, backend, job_id, status)
    else:
        done = confirm(store, backend, job_id, since=status.get("now"))
    if note:
        done["reason"] += f"; {note}"
    return {**done, "webhook": note or record.spec.notify}


def _read_secrets(names: Sequence[str]) -> dict[str, str]:
    """Secrets travel by name: the value is read from this process's environment and sent to
    the agent over stdin, never in argv, a file on the machine, or the state DB."""
    missing = [n for n in names if n not in os.environ]
    if missing:
        raise UsageError(
            f"secret(s) {missing} are not set in the environment",
            fix="export them first; rgt sends them over stdin, never in argv",
        )
    register_secrets(os.environ[n] for n in names)  # never in a debug log line
    return {n: os.environ[n] for n in names}


def refresh(store: Store, job_id: str, backend: Backend | None = None) -> dict[str, Any]:
    """Read the job's status from the machine and update the local cache.

    The read goes through the one status path (``status_cache.observe``: the backend's
    batched read, ``read_jobs``, which decides liveness, then the one cache writer): only a proven
    state is cached, a vanished job dir keeps its last known state, a damaged status.json
    shows ``unknown`` with ``problem`` naming the file and the fix. ``heartbeat_lost`` says
    whether its agent is gone (``jobstatus.judge``: the same rule as ``rgt watch``)."""
    record = store.job(job_id)
    backend = backend or backend_for(store, record.machine)
    status = status_cache.observe(store, backend, [record])[job_id]
    doc = status.to_doc()
    doc["machine"] = record.machine
    return jobstatus.judge(doc, status.now, jobstatus.heartbeat_limit_s())


def probe(
    store: Store,
    job_id: str,
    seconds: float,
    *,
    poll: float = 0.5,
    on_tick: Callable[[dict[str, Any]], None] | None = None,
) -> ProbeResult:
    """Watch a fresh job for up to ``seconds``; return early when it ends. A traceback in the
    log does not end the probe by itself (a script may print a caught one and go on)."""
    backend = backend_for(store, store.job(job_id).machine)
    start = time.monotonic()
    while True:
        status = refresh(store, job_id, backend)
        attempt = int(status.get("attempt") or 1)
        log = backend.log(job_id, attempt)
        head, tail = log[:HEAD_BYTES].decode("utf-8", "replace"), log_tail(log)
        if status["state"] == jobstatus.UNKNOWN:
            raise jobstatus.problem_error(status)
        state = JobState(status["state"])
        if on_tick:
            on_tick(status)
        elapsed = time.monotonic() - start
        if state in TERMINAL or elapsed >= seconds:
            return ProbeResult(
                state=state,
                seconds=round(elapsed, 2),
                log_head=head,
                traceback=TRACEBACK_MARK in head or TRACEBACK_MARK in tail,
                status=status,
                log_tail=tail,
            )
        time.sleep(poll)


def log_tail(log: bytes, limit: int = TAIL_BYTES) -> str:
    """The last ``limit`` bytes of a log, from a line boundary (the whole log if shorter)."""
    if len(log) <= limit:
        return log.decode("utf-8", "replace")
    cut = log[-limit:]
    newline = cut.find(b"\n")
    return cut[newline + 1 if 0 <= newline < len(cut) - 1 else 0 :].decode("utf-8", "replace")


def wait(
    store: Store,
    job_id: str,
    *,
    timeout: float | None = None,
    poll: float = 1.0,
    on_tick: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Follow a job until it ends (or ``timeout``); returns the last status read.

    A lost connection is not a lost job: the agent keeps running it. ``wait`` reports the
    machine as unreachable, backs off (up to 30 s between tries) and reconnects."""
    backend = backend_for(store, store.job(job_id).machine)
    start = time.monotonic()
    delay = poll
    while True:
        try:
            status = refresh(store, job_id, backend)
            delay = poll
        except TransportError as exc:
            status = _unreachable(store, job_id, exc)
            delay = min(delay * 2, 30.0)
        if on_tick:
            on_tick(status)
        if jobstatus.ended(status) or jobstatus.stuck(status):
            return status
        if timeout is not None and time.monotonic() - start >= timeout:
            return status
        time.sleep(delay)


def _unreachable(store: Store, job_id: str, exc: TransportError) -> dict[str, Any]:
    record = store.job(job_id)
    return {
        "job_id": job_id,
        "machine": record.machine,
        "state": record.state.value,
        "attempt": record.attempts,
        "unreachable": exc.message,
        "reason": f"machine unreachable ({exc.message}); the job is not affected, retrying",
    }
