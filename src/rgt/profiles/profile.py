"""The records a loaded platform profile is made of, and the notes it teaches the user.

A profile is data (one TOML file per platform, validated by ``schemas/profile.schema.json``);
these frozen records are its typed view. Every fact record keeps a :class:`Stamp`: the month it
was last checked and whether the source material marks it verified, unverified or in conflict.
Survival flags are ``True``/``False`` where known, or the strings ``"unknown"`` / ``"n/a"`` (a
platform with no stop action has no "survives stop" answer).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

Survival = bool | str


@dataclass(frozen=True)
class Stamp:
    """When a fact was last checked, how sure the source is, and where it came from."""

    verified: str
    status: str
    source: str
    note: str | None = None

    @property
    def doubtful(self) -> bool:
        return self.status != "verified"

    def suffix(self) -> str:
        """`` (verified 2026-06)``, or ``(conflict, 2026-08: why)`` for doubtful facts."""
        if self.doubtful:
            return f" ({self.status}, {self.verified}: {self.note})"
        return f" (verified {self.verified})"


@dataclass(frozen=True)
class StorageTier:
    name: str
    path: str
    speed: str
    size_cap: str
    inode_cap: str | None
    survives_stop: Survival
    survives_destroy: Survival
    bills_when_stopped: Survival
    stamp: Stamp


@dataclass(frozen=True)
class Clock:
    """A danger clock: a timer or trap on the platform that costs money, data or a run."""

    name: str
    when: str  # running · stopped · always · destroyed
    trigger: str
    duration: str
    consequence: str
    stamp: Stamp
    duration_s: float | None = None


@dataclass(frozen=True)
class MeterStop:
    """The action that really ends compute billing, and what keeps billing after it."""

    action: str
    irreversible: bool
    command: str
    still_bills: tuple[str, ...]
    destroy: str | None
    stamp: Stamp


@dataclass(frozen=True)
class Detach:
    primitive: str  # setsid · tmux · sbatch · k8s-job
    survives_restart: bool
    stamp: Stamp


@dataclass(frozen=True)
class Spot:
    available: bool
    grace_s: float | None
    signal: str | None
    stamp: Stamp


@dataclass(frozen=True)
class Profile:
    """One platform. ``raw`` is the validated TOML document, for fields without a typed view."""

    name: str
    title: str
    kind: str
    backend: str
    verified: str
    storage: tuple[StorageTier, ...]
    clocks: tuple[Clock, ...]
    meter_stop: MeterStop
    detach: Detach
    spot: Spot
    ssh_patterns: tuple[re.Pattern[str], ...]
    conveniences: tuple[str, ...]
    dirs: Mapping[str, str]
    raw: dict[str, Any]
    path: str
    origin: str  # "bundled" or "user"
    overrides_bundled: bool = False

    @property
    def durable_dir(self) -> str:
        """Where rgt keeps jobs and checkpoints on the machine (``~/`` = the remote home)."""
        return self.dirs["DURABLE_DIR"]

    def durable_dir_for(self, home: str) -> str:
        """``durable_dir`` with a leading ``~`` replaced by the remote user's ``home``."""
        return expand_home(self.durable_dir, home)

    def match_ssh(self, line: str) -> dict[str, str] | None:
        """The named groups (``user``, ``host``, ``port``) of the first pattern that matches."""
        flat = " ".join(line.split())
        for pattern in self.ssh_patterns:
            found = pattern.search(flat)
            if found:
                return {k: v for k, v in found.groupdict().items() if v is not None}
        return None

    def first_contact_notes(self) -> list[str]:
        """Shown once at ``up``: where the facts come from, conveniences, danger clocks."""
        notes = self.origin_notes()
        notes += [f"{self.title} convenience: {text}" for text in self.conveniences]
        notes += [_clock_line(self.title, clock) for clock in self.clocks]
        notes.append(_meter_line(self.meter_stop))
        return notes

    def teardown_notes(self) -> list[str]:
        """Shown at ``down``: what survives the meter stop, what is lost, what keeps billing."""
        stop = self.meter_stop
        notes = [*self.origin_notes(), _meter_line(stop)]
        for tier in self.storage:
            kept = tier.survives_destroy if stop.irreversible else tier.survives_stop
            notes.append(_survival_line(tier, kept))
        notes += [f"keeps billing after {stop.action}: {item}" for item in stop.still_bills]
        notes += [_clock_line(self.title, c) for c in self.clocks if c.when != "running"]
        if stop.destroy and not stop.irreversible:
            notes.append(f"to end all billing later (irreversible): {stop.destroy}")
        return notes

    def origin_notes(self) -> list[str]:
        if self.origin != "user":
            return []
        if self.overrides_bundled:
            return [
                f"using your profile file {self.path}; it overrides the bundled "
                f"{self.name!r} profile"
            ]
        return [f"using your profile file {self.path}"]


def expand_home(path: str, home: str) -> str:
    if path == "~":
        return home
    if path.startswith("~/"):
        return home.rstrip("/") + path[1:]
    return path


def _clock_line(title: str, clock: Clock) -> str:
    return (
        f"danger clock ({title}): {clock.trigger} [{clock.duration}] -> "
        f"{clock.consequence}{clock.stamp.suffix()}"
    )


def _meter_line(stop: MeterStop) -> str:
    kind = "irreversible, deletes data" if stop.irreversible else "reversible"
    return f"to stop the meter: {stop.action} ({kind}) via {stop.command}{stop.stamp.suffix()}"


def _survival_line(tier: StorageTier, kept: Survival) -> str:
    label = f"{tier.path} ({tier.name}, {tier.size_cap})"
    if kept is True:
        return f"kept: {label}"
    if kept is False:
        return f"LOST: {label}"
    return f"{kept}: {label}{tier.stamp.suffix()}"


def survival_word(value: Survival) -> str:
    """The survival matrix cell: yes / no / unknown / n/a."""
    if value is True:
        return "yes"
    if value is False:
        return "no"
    return str(value)
