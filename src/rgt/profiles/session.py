"""Notebook session clocks: how long a Colab or Kaggle notebook VM lives, and how long it idles.

Neither platform gives a signal before it takes the VM, and neither publishes every limit, so
each number says what it rests on (``basis``): ``published`` where the platform's own help pages
state it, ``observed`` where only users' reports do (shared/reference/platform-facts.md §13,
stamped 2026-06). The clock starts when the VM booted (``rgt up`` reads it), and the agent warns
at ``WARN_BEFORE_S`` before the cap with the newest verified checkpoint and the resume command.
"""

from __future__ import annotations

import posixpath
import time
from dataclasses import dataclass
from typing import Any

from rgt.errors import UsageError

WARN_BEFORE_S = (3600, 1800, 600)
VERIFIED = "2026-06"


@dataclass(frozen=True)
class SessionFacts:
    """One platform tier's clocks; each ``*_basis`` is ``published`` or ``observed``."""

    platform: str  # colab | kaggle-notebook
    tier: str  # free | pro
    cap_s: int
    cap_basis: str
    idle_s: int
    idle_basis: str
    source: str
    note: str = ""


FACTS = {
    ("colab", "free"): SessionFacts(
        "colab", "free", 12 * 3600, "published", 90 * 60, "observed", "P:colab; R:generic",
        "limits vary with load and are not guaranteed",
    ),
    ("colab", "pro"): SessionFacts(
        "colab", "pro", 24 * 3600, "published", 90 * 60, "observed", "P:colab; R:generic",
        "Pro/Pro+ sessions last up to about 24 h; background execution keeps them without a tab",
    ),
    ("kaggle-notebook", "free"): SessionFacts(
        "kaggle-notebook", "free", 12 * 3600, "published", 60 * 60, "observed",
        "D:kaggle; R:generic",
        "sources disagree on 9 h vs 12 h for GPU sessions: read the limit on the notebook page",
    ),
}  # fmt: skip
TIERS = ("free", "pro")


def session_facts(platform: str, tier: str) -> SessionFacts:
    """The facts for ``platform`` at ``tier``; Kaggle has one tier."""
    key = (platform, "free" if platform == "kaggle-notebook" else tier)
    if key not in FACTS:
        raise UsageError(
            f"no session facts for {platform} tier {tier!r}",
            fix=f"use --tier {' or --tier '.join(TIERS)} (Kaggle notebooks have one tier)",
        )
    return FACTS[key]


def session_env(connection: dict[str, Any]) -> dict[str, str]:
    """The job environment the agent's session clock reads (``rgt.agent._session``)."""
    facts = session_facts(str(connection["notebook"]), str(connection.get("tier", "free")))
    return {
        "RGT_SESSION_PLATFORM": facts.platform,
        "RGT_SESSION_STARTED": f"{float(connection['session_started']):.0f}",
        "RGT_SESSION_CAP_S": str(facts.cap_s),
        "RGT_SESSION_DURABLE": str(connection["durable"]),
    }


def notebook_env(connection: dict[str, Any], job_id: str) -> dict[str, str]:
    """A job on a notebook machine: the session clock, and its checkpoints mirrored to
    ``<durable>/<job_id>/ckpt`` (``rgt.ckpt.mirror``); nothing for any other machine."""
    if "notebook" not in connection:
        return {}
    mirror = posixpath.join(str(connection["durable"]), job_id, "ckpt")
    return {**session_env(connection), "RGT_CKPT_MIRROR": mirror}


def session_view(connection: dict[str, Any], now: float | None = None) -> dict[str, Any] | None:
    """What ``watch`` shows for a notebook machine (``None`` for any other machine)."""
    if "notebook" not in connection:
        return None
    facts = session_facts(str(connection["notebook"]), str(connection.get("tier", "free")))
    started = float(connection["session_started"])
    left = started + facts.cap_s - (time.time() if now is None else now)
    return {
        "platform": facts.platform,
        "tier": facts.tier,
        "started": started,
        "cap_s": facts.cap_s,
        "cap_basis": facts.cap_basis,
        "idle_s": facts.idle_s,
        "idle_basis": facts.idle_basis,
        "left_s": max(0, round(left)),
        "durable": connection["durable"],
        "verified": VERIFIED,
    }


def describe(view: dict[str, Any]) -> str:
    """One line for humans: ``colab free: 3h12m left of ~12h (published); idle ~90 min``."""
    return (
        f"{view['platform']} {view['tier']}: {_hm(view['left_s'])} left of "
        f"~{view['cap_s'] // 3600}h ({view['cap_basis']}); idle disconnect after "
        f"~{view['idle_s'] // 60} min ({view['idle_basis']}); durable: {view['durable']}"
    )


def _hm(seconds: int) -> str:
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
