"""Turning `rgt approve NAME --autostop …` into the policy document the machine's watcher reads.

Everything is checked here, before the human is asked and before anything reaches the machine:
a bad duration, a budget that is not a positive amount in the machine's currency, a time in the
past, a platform whose stop keeps billing: each is an error naming the fix, and nothing is armed.

The stop action is the reversible one that keeps the disk: ``rgt up … --self-stop CMD`` (the
user's declaration for this machine) wins over the profile's ``[self_stop]`` default. A command
that releases, terminates or destroys is refused: autostop never deletes anything.
"""

from __future__ import annotations

import os
import re
import secrets
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from rgt.errors import GateRefused, UsageError
from rgt.models import Machine
from rgt.profiles.profile import Profile

SCHEMA = "rgt.autostop/1"
DEFAULT_CURRENCY = "USD"
CURRENCIES = frozenset((
    "USD", "CNY", "EUR", "GBP", "JPY", "HKD", "SGD", "KRW", "INR", "CAD", "AUD", "CHF", "TWD",
    "RUB", "BRL", "SEK", "NOK", "DKK", "PLN",
))  # fmt: skip
SYMBOLS = {"$": "USD", "¥": "CNY", "￥": "CNY", "元": "CNY", "€": "EUR", "£": "GBP"}
_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*(d|h|m|s|min)?", re.IGNORECASE)
_UNITS = {"d": 86400.0, "h": 3600.0, "m": 60.0, "min": 60.0, "s": 1.0, None: 60.0}
# Words of the irreversible actions: autostop runs only a stop that keeps the disk.
DESTRUCTIVE = re.compile(r"\b(terminate|destroy|release|remove|delete|rm)\b|释放|销毁", re.I)
CHECKPOINT_WAIT_S = 600.0


@dataclass(frozen=True)
class Options:
    """What the human asked for at the terminal (the CLI's options, parsed)."""

    idle: str | None = None
    after_jobs: bool = False
    at: str | None = None
    budget: str | None = None
    on_preempt: str | None = None


@dataclass(frozen=True)
class Budget:
    amount: float
    currency: str


def parse_duration(text: str, flag: str = "--idle") -> float:
    """``30m``, ``2h``, ``90s``, ``1h30m``; a bare number is minutes. Must be > 0."""
    parts = _DURATION.findall(text.strip())
    rebuilt = "".join(n + (u or "") for n, u in parts)
    if not parts or rebuilt.lower() != re.sub(r"\s+", "", text).lower():
        raise UsageError(f"{flag} {text!r} is not a duration", fix=f"e.g. {flag} 30m or 2h")
    seconds = sum(float(n) * _UNITS[(u or None) and u.lower()] for n, u in parts)
    if seconds <= 0:
        raise UsageError(f"{flag} must be longer than 0", fix=f"e.g. {flag} 30m")
    return seconds


def parse_budget(text: str, currency: str) -> Budget:
    """``20``, ``20 USD``, ``$20``, ``150CNY``, ``¥150``: a positive amount in the machine's
    currency (rgt converts nothing)."""
    raw = text.strip()
    symbol = next((s for s in SYMBOLS if raw.startswith(s) or raw.endswith(s)), None)
    code = SYMBOLS[symbol] if symbol else None
    number = raw.strip("".join(SYMBOLS)).strip() if symbol else raw
    found = re.fullmatch(r"([-+]?\d+(?:\.\d+)?)\s*([A-Za-z]*)", number)
    if not found:
        raise UsageError(f"--budget {text!r} is not an amount", fix="e.g. --budget 20 or 150CNY")
    amount, word = float(found.group(1)), found.group(2).upper()
    if word and word not in CURRENCIES:
        raise UsageError(
            f"unknown currency {found.group(2)!r} in --budget {text!r}",
            fix=f"give the amount in {currency} (the machine's prices), e.g. --budget 20{currency}",
        )
    given = word or code or currency
    if given != currency:
        raise UsageError(
            f"--budget is in {given} but this machine's prices are in {currency}",
            fix=f"give the budget in {currency}; rgt converts no currency",
        )
    if amount <= 0:
        raise UsageError("--budget must be more than 0", fix="e.g. --budget 20")
    return Budget(amount, currency)


def parse_at(text: str, now: datetime | None = None) -> float:
    """``HH:MM`` (this computer's local time, the next one to come) or an ISO date-time."""
    now = now or datetime.now().astimezone()
    try:
        if re.fullmatch(r"\d{1,2}:\d{2}", text.strip()):
            hour, minute = (int(p) for p in text.strip().split(":"))
            when = now.replace(hour=hour, minute=minute, second=0, microsecond=0)
            when = when if when > now else when + timedelta(days=1)
        else:
            when = datetime.fromisoformat(text.strip())
            when = when if when.tzinfo else when.astimezone()
    except ValueError as exc:
        raise UsageError(f"--at {text!r} is not a time ({exc})", fix="e.g. --at 23:30") from exc
    if when <= now:
        raise UsageError(f"--at {text!r} is in the past", fix="give a time still to come")
    return when.timestamp()


def currency_of(profile: Profile) -> str:
    return str(profile.raw.get("currency") or DEFAULT_CURRENCY)


def stop_action(machine: Machine, profile: Profile) -> dict[str, Any]:
    """The command that stops this machine's meter from inside, keeping the disk, and where it
    comes from; ``GateRefused`` where the platform has none (with the profile's reason)."""
    declared = machine.connection.get("self_stop")
    if declared:
        return {"command": str(declared), "source": "--self-stop (declared at `rgt up`)"}
    spec = profile.raw.get("self_stop") or {}
    if spec.get("mode") == "command":
        stamp = f"{spec['status']} {spec['verified']}, {spec['source']}"
        return {"command": spec["command"], "source": f"profile {profile.name} ({stamp})"}
    reason = spec.get("reason") or f"the {profile.title} profile documents no stop from inside"
    raise GateRefused(
        f"autostop cannot stop {machine.name} ({profile.title})",
        [reason],
        fix=f"declare the command that stops this machine's meter from inside, keeping its disk: "
        f"`rgt up {profile.name} --name {machine.name} --replace --self-stop CMD …`"
        if spec.get("mode") is None
        else "stop it yourself (`rgt down`) when the results are pulled",
    )


def check_self_stop(command: str) -> str:
    """``--self-stop CMD``: a reversible stop, never a release/terminate/destroy."""
    if not command.strip():
        raise UsageError("--self-stop is empty", fix="give the command, e.g. 'shutdown -h now'")
    if DESTRUCTIVE.search(command):
        raise UsageError(
            f"--self-stop {command!r} looks like a release/terminate/destroy",
            fix="give the reversible stop that keeps the disk; rgt never deletes a machine "
            "by itself (`rgt down` does, behind the gate)",
        )
    return command


def survival(machine: Machine, profile: Profile) -> list[dict[str, Any]]:
    """The survival matrix the watcher judges artifacts by: the profile's tiers, and the
    durable root when ``--self-stop`` declared that this stop keeps it."""
    tiers = [
        {"name": t.name, "path": t.path, "survives_stop": t.survives_stop} for t in profile.storage
    ]
    if machine.connection.get("self_stop"):
        tiers.append({"name": "durable-root", "path": machine.durable_root, "survives_stop": True})
    return tiers


def triggers(options: Options, currency: str) -> dict[str, Any]:
    after = options.after_jobs or not (options.idle or options.at or options.budget)
    budget = parse_budget(options.budget, currency) if options.budget else None
    return {
        "after_jobs": after,
        "idle_s": parse_duration(options.idle) if options.idle else None,
        "at": options.at,
        "at_epoch": parse_at(options.at) if options.at else None,
        "budget": {"amount": budget.amount, "currency": budget.currency} if budget else None,
    }


def build(
    machine: Machine, profile: Profile, options: Options, money: dict[str, Any]
) -> dict[str, Any]:
    """The policy document (``money``: price per hour and spend so far, from the ledger)."""
    currency = currency_of(profile)
    trig = triggers(options, currency)
    if trig["budget"] and money.get("price_per_hour") is None:
        raise UsageError(
            f"--budget needs the price of {machine.name}",
            fix=f"register it with a price: `rgt up {profile.name} --name {machine.name} "
            "--replace --price P …`",
        )
    spent = float(money.get("spent_at_arm") or 0.0)
    if trig["budget"] and spent >= trig["budget"]["amount"]:
        raise UsageError(
            f"{machine.name} has already spent {spent:.2f} {currency}, over --budget "
            f"{trig['budget']['amount']:g}",
            fix="give a budget above what was spent, or `rgt down` the machine",
        )
    now = time.time()
    return {
        "schema": SCHEMA,
        "arm_id": time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now)) + "-" + secrets.token_hex(3),
        "armed_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now)),
        "machine": machine.name,
        "triggers": trig,
        "money": dict(money, currency=currency, since_epoch=now),
        "stop": stop_action(machine, profile),
        "survival": survival(machine, profile),
        "preempt": _preempt(profile),
        "on_preempt": options.on_preempt,
        "tick_s": float(os.environ.get("RGT_AUTOSTOP_TICK_S") or 5.0),
        "checkpoint_wait_s": CHECKPOINT_WAIT_S,
    }


def _preempt(profile: Profile) -> dict[str, Any] | None:
    spec = profile.raw.get("preemption")
    if not spec:
        return None
    return {"kind": spec["kind"], "url": spec["url"], "headers": dict(spec.get("headers") or {})}
