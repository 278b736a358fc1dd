"""Registering machines (`rgt up`) and releasing them (`rgt down`, behind the gate)."""

from __future__ import annotations

from dataclasses import dataclass
from dataclasses import replace as replace_field
from pathlib import Path
from typing import Any

from rgt.config import rgt_home
from rgt.errors import GateRefused, UnknownMachineError, UsageError
from rgt.models import MACHINE_NAME_RE, Machine
from rgt.profiles.network import machine_plan
from rgt.state.store import Store, utcnow


@dataclass(frozen=True)
class UpResult:
    machine: Machine
    notes: tuple[str, ...]  # the profile's conveniences and danger clocks, shown at first contact


def validate_name(name: str) -> str:
    if not MACHINE_NAME_RE.match(name):
        raise UsageError(
            f"bad machine name {name!r}",
            fix="use letters, digits, '.', '_' or '-' (max 64), starting with a letter or digit",
        )
    return name


def register_local(store: Store, name: str, root: Path | None = None) -> UpResult:
    """This machine: no meter. Its durable root defaults to ``$RGT_HOME/machines/<name>``."""
    validate_name(name)
    durable = (root or rgt_home() / "machines" / name).expanduser().resolve()
    durable.mkdir(parents=True, exist_ok=True)
    machine = Machine(
        name=name,
        backend="local",
        profile="local",
        connection={},
        durable_root=str(durable),
        price_per_hour=None,
        registered=utcnow(),
    )
    store.add_machine(machine)
    return UpResult(machine=machine, notes=_profile_notes("local"))


def register(
    store: Store,
    profile: str,
    name: str,
    *,
    ssh: str | None = None,
    price: float | None = None,
    root: str | None = None,
    replace: bool = False,
    vendor: Any = None,
    mirrors: dict[str, str] | None = None,
    no_mirrors: bool = False,
) -> UpResult:
    """``rgt up PROFILE --name NAME [--ssh LINE] [--price P] [--replace] [--mirror K=URL]
    [--no-mirrors]``; with ``vendor`` (a ``rgt.vendors.lifecycle.VendorUp``) the machine is
    rented through the vendor's API. The network plan (``rgt.profiles.network``) is shown in the
    notes; the choices that differ from the profile are kept in the machine's record."""
    if mirrors and no_mirrors:
        raise UsageError("--mirror and --no-mirrors contradict each other; pick one")
    result = _register(store, profile, name, ssh, price, root, replace, vendor)
    if mirrors or no_mirrors:
        choice = {"mirrors": dict(mirrors or {}), "no_mirrors": no_mirrors}
        machine = replace_field(result.machine, connection={**result.machine.connection, **choice})
        store.add_machine(machine)
        result = UpResult(machine=machine, notes=result.notes)
    plan = machine_plan(result.machine.profile, result.machine.connection)
    return UpResult(machine=result.machine, notes=(*result.notes, *plan.notes()))


def _register(
    store: Store,
    profile: str,
    name: str,
    ssh: str | None,
    price: float | None,
    root: str | None,
    replace: bool,
    vendor: Any,
) -> UpResult:
    if price is not None and price < 0:
        raise UsageError("--price must be >= 0 (currency units per hour)")
    guard_replacement(store, validate_name(name), replace=replace)
    if profile == "local":
        if ssh:
            raise UsageError(
                "the local profile takes no --ssh line",
                fix="use `rgt up generic-ssh --name NAME --ssh '…'`",
            )
        return register_local(store, name, Path(root) if root else None)
    if profile == "slurm":  # this host when sbatch is on PATH, else a login node over ssh
        from rgt.backends.slurm import register_slurm

        machine = register_slurm(store, validate_name(name), ssh=ssh, root=root)
        return UpResult(machine=machine, notes=())
    if vendor is not None and not ssh:  # rented through the vendor API, then an SSH machine
        from rgt.vendors.lifecycle import vendor_up

        machine = vendor_up(store, profile, validate_name(name), vendor, root=root)
        return UpResult(machine=machine, notes=_profile_notes(profile))
    # ssh backends (generic-ssh and every SSH rental) register through rgt.backends.ssh.
    from rgt.backends.ssh import register_ssh

    machine = register_ssh(
        store, profile, validate_name(name), ssh_line=ssh, price=price, root=root
    )
    return UpResult(machine=machine, notes=_profile_notes(profile))


def guard_replacement(store: Store, name: str, *, replace: bool) -> None:
    """An active machine with jobs is never silently replaced: its record is how rgt finds its
    jobs and stops its meter, and a forgotten rental keeps billing. ``replace`` first releases
    it through the teardown gate (ended, pulled, verified, approved by a human)."""
    try:
        old = store.machine(name)
    except UnknownMachineError:
        return
    # Jobs of this registration only: those of a machine released earlier under the name are
    # not on it.
    jobs = [j.job_id for j in store.jobs(name) if j.created >= old.registered]
    if not old.active or not jobs:
        return  # released (or never used): nothing to lose by re-registering the name
    if not replace:
        raise GateRefused(
            f"machine {name} is active with {len(jobs)} job(s); registering another machine "
            "under its name would forget it while it bills",
            [f"job {job_id} is on {name}" for job_id in jobs],
            fix=f"pull its jobs and release it (`rgt pull JOB`, `rgt approve {name}`, "
            f"`rgt down {name}`), use another --name, or add --replace to release it through "
            "the gate first",
        )
    from rgt.lifecycle.teardown import teardown

    teardown(store, name)


def _profile_notes(profile: str) -> tuple[str, ...]:
    from rgt.profiles import load_profile

    return tuple(load_profile(profile).first_contact_notes())
