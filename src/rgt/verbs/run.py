"""``rgt run``: lint → gates → launch → probe, one chain for every front end.

The chain refuses before anything starts (a lint bug with ``lint_first``, an audit error, a
torch job whose interpreter lacks torch: each a ``GateRefused``, exit 3), then launches on one
machine or a fleet (``A,B``: one node per machine) and probes the job for a while, so that an
import error or a CUDA OOM in the first seconds is caught while the user is still looking.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rgt.verbs.tell import QUIET, Tell

if TYPE_CHECKING:
    from rgt.autostop.forecast import Forecast
    from rgt.jobs.launch import LaunchOptions, ProbeResult
    from rgt.resources import Resources
    from rgt.state.store import Store


@dataclass(frozen=True)
class RunRequest:
    """What to run where: the words of ``rgt run`` and of the MCP ``run`` tool alike."""

    machine: str  # one name, or a fleet A,B,…
    command: tuple[str, ...]
    env: tuple[str, ...] = ()  # NAME=VALUE, as typed after --env
    secrets: tuple[str, ...] = ()  # names of environment variables, sent over stdin
    artifacts: tuple[str, ...] = ()
    excludes: tuple[str, ...] = ()
    retries: int = 3
    probe_seconds: float = 60
    notify_source: str | None = None
    resume_with: str | None = None
    ckpt_glob: str | None = None
    lint_first: bool = False
    force: bool = False
    resources: Resources | None = None  # the flags; rgt.toml [resources] fills the rest
    seed: int | None = None
    master_addr: str | None = None


@dataclass(frozen=True)
class RunResult:
    """A launched job and what its first seconds showed."""

    job_id: str
    machine: str
    seed: str
    probe: ProbeResult

    @property
    def failed(self) -> bool:
        return self.probe.state.value == "failed"

    def to_json(self) -> dict[str, Any]:
        probe = self.probe
        return {
            "job_id": self.job_id,
            "machine": self.machine,
            "state": probe.state.value,
            "probe_seconds": probe.seconds,
            "seed": self.seed,
            "traceback": probe.traceback,
            **({"log_tail": probe.log_tail} if probe.failed else {}),
            **({"reason": probe.status.get("reason")} if probe.failed else {}),
        }


def run(store: Store, request: RunRequest, tell: Tell = QUIET) -> RunResult:
    """Refuse what would fail (lint with ``lint_first``, the audit and python gates), then
    launch and probe for ``probe_seconds``."""
    from rgt.jobs.fleet import launch_fleet, names_of
    from rgt.jobs.launch import launch, probe

    names = names_of(request.machine)
    env = _gates(request, names, tell)
    options = launch_options(request, env)
    if len(names) > 1:
        record = launch_fleet(store, names, options, request.master_addr)
    else:
        record = launch(store, request.machine, options)
    wait = request.probe_seconds
    tell.info(f"launched {record.job_id} on {request.machine}; probing for up to {wait:g}s")
    result = probe(store, record.job_id, wait)
    return RunResult(record.job_id, request.machine, env["RGT_SEED"], result)


def forecast(store: Store, request: RunRequest) -> Forecast:
    """``--dry-run``: what would start, where, and its expected duration and cost (p50/p90 of
    this command's earlier runs on this machine type); nothing starts, no meter runs."""
    from datetime import datetime, timezone

    from rgt.autostop.forecast import forecast as estimate
    from rgt.jobs.fleet import names_of, one_machine
    from rgt.vendors.billing import machine_cost

    machine = one_machine(names_of(request.machine), "--dry-run")
    resources = resources_for(request.resources)
    wanted = resources.to_json() if resources is not None else None
    now = datetime.now(timezone.utc)
    price = machine_cost(store, store.machine(machine), now)["price_per_hour"]
    return estimate(store, machine, request.command, wanted, price)


def _gates(request: RunRequest, names: list[str], tell: Tell) -> dict[str, str]:
    """Every refusal before a machine is used; the job's environment with its seed."""
    from rgt.jobs import pythongate
    from rgt.verify.runtime import resolve_seed
    from rgt.watch.envgate import check_gate

    if request.lint_first:
        _lint(request.command, tell)
    for note in (note for name in names for note in check_gate(name, request.force)):
        tell.warn(note)
    env = env_of(request.env)
    env["RGT_SEED"] = resolve_seed(env, request.seed)  # stated, in the job's record
    for name in names:
        for note in pythongate.check(name, request.command, Path.cwd(), env, request.force):
            tell.warn(note)  # a torch job refused (exit 3) when its python lacks torch
    return env


def env_of(pairs: tuple[str, ...]) -> dict[str, str]:
    """``NAME=VALUE`` pairs as a mapping; anything else is a usage error."""
    from rgt.errors import UsageError

    env = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise UsageError(f"--env {pair!r} is not NAME=VALUE")
        env[name] = value
    return env


def _lint(command: tuple[str, ...], tell: Tell) -> None:
    from rgt.lint.preflight import lines, preflight, refuse_on_bugs

    report = preflight(command)
    refuse_on_bugs(report)  # exit 3 before anything is launched
    for line in lines(report):
        tell.warn(line)


def launch_options(request: RunRequest, env: dict[str, str]) -> LaunchOptions:
    from rgt.jobs.launch import LaunchOptions
    from rgt.jobs.notify import resolve
    from rgt.jobs.resume_form import resume_spec
    from rgt.models import RetryPolicy

    return LaunchOptions(
        command=request.command,
        env=env,
        secret_env=request.secrets,
        artifacts=request.artifacts,
        exclude=request.excludes,
        retry=RetryPolicy(max_retries=request.retries),
        notify=resolve(request.notify_source) if request.notify_source else None,
        resume=resume_spec(request.resume_with, request.ckpt_glob),
        resources=resources_for(request.resources),  # flags over rgt.toml [resources]
    )


def resources_for(flags: Resources | None) -> Resources | None:
    """The flags over the project's ``rgt.toml`` ``[resources]``; None when neither gives
    anything (the machine's defaults then apply)."""
    from rgt.resources import Resources

    merged = Resources.from_settings().merged(flags or Resources())
    return merged if merged.to_json() else None
