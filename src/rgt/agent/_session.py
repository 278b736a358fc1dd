"""The session clock of a notebook VM (Colab, Kaggle): warn before the platform takes it.

Colab and Kaggle end a notebook VM after a fixed number of hours and send no signal first, so the
agent counts down itself. ``rgt run`` on a machine registered with ``rgt up colab`` (or
``kaggle-notebook``) puts the clock in the job's environment (``rgt.profiles.session``):

    RGT_SESSION_PLATFORM   colab | kaggle-notebook
    RGT_SESSION_STARTED    when the VM booted (epoch seconds)
    RGT_SESSION_CAP_S      the platform's cap for this tier (published/observed, not a promise)
    RGT_SESSION_DURABLE    the durable folder (Drive, /kaggle/working)
    RGT_CKPT_MIRROR        where this job's checkpoints are mirrored (``rgt.ckpt.mirror``)

At 60, 30 and 10 minutes before the cap the agent writes one ``session_ending`` warning with the
newest verified checkpoint in the durable folder (``LATEST.json``) and the commands that resume
the job in a new session. An attempt that starts late warns once, for the nearest mark passed.
"""

from __future__ import annotations

import json
import os
import shlex
import time
from typing import Any, Dict, Optional

from rgt.agent._record import JobRecorder

WARN_BEFORE_S = (3600, 1800, 600)
POINTER = "LATEST.json"


def _setting(spec: Dict[str, Any], name: str) -> str:
    env = spec.get("env") or {}
    return str(os.environ.get(name) or env.get(name) or "")


class SessionClock(object):
    def __init__(self, spec: Dict[str, Any], rec: JobRecorder):
        self.spec = spec
        self.rec = rec
        self.platform = _setting(spec, "RGT_SESSION_PLATFORM")
        self.durable = _setting(spec, "RGT_SESSION_DURABLE")
        self.mirror = _setting(spec, "RGT_CKPT_MIRROR")
        self.ends = _ends(spec)
        self.warned = set()  # type: set[int]

    @property
    def active(self) -> bool:
        return bool(self.platform) and self.ends is not None

    def tick(self, now: Optional[float] = None) -> None:
        if not self.active or self.ends is None:
            return
        left = self.ends - (time.time() if now is None else now)
        passed = [mark for mark in WARN_BEFORE_S if left <= mark and mark not in self.warned]
        if not passed:
            return
        self.warned.update(mark for mark in WARN_BEFORE_S if left <= mark)
        self.warn(max(0.0, left), min(passed))

    def warn(self, left: float, mark: int) -> None:
        newest = newest_verified(self.mirror)
        detail = {
            "platform": self.platform,
            "minutes_left": int(left // 60),
            "mark_min": mark // 60,
            "durable": self.durable,
            "mirror": self.mirror,
            "newest_checkpoint": newest,
        }
        self.rec.event("session_ending", detail, self.next_step(newest), severity="warning")

    def next_step(self, newest: Optional[Dict[str, Any]]) -> str:
        machine = str(self.spec.get("machine") or "NAME")
        command = " ".join(shlex.quote(str(part)) for part in self.spec.get("command") or [])
        saved = (
            "no checkpoint has reached %s yet: save one now" % self.durable
            if newest is None
            else "the newest verified checkpoint is step %s (%s)" % (newest["step"], newest["path"])
        )
        up = "rgt up %s --name %s --drive %s" % (
            self.platform,
            shlex.quote(machine),
            shlex.quote(self.durable),
        )
        run = "rgt run %s --env %s -- %s" % (
            shlex.quote(machine),
            shlex.quote("RGT_CKPT_MIRROR=" + self.mirror),
            command,
        )
        return "%s; to resume in a new session: `%s`, then `%s`" % (saved, up, run)


def _ends(spec: Dict[str, Any]) -> Optional[float]:
    """When the platform takes the VM (epoch seconds), or None without a session clock."""
    try:
        started = float(_setting(spec, "RGT_SESSION_STARTED"))
        return started + float(_setting(spec, "RGT_SESSION_CAP_S"))
    except ValueError:
        return None


def newest_verified(mirror: str) -> Optional[Dict[str, Any]]:
    """The mirror's ``LATEST.json`` (written only after a read-back verified the copy)."""
    if not mirror:
        return None
    try:
        with open(os.path.join(mirror, POINTER), encoding="utf-8") as handle:
            data = json.load(handle)
        return {"step": int(data["step"]), "path": os.path.join(mirror, str(data["file"]))}
    except (OSError, ValueError, KeyError, TypeError):
        return None
