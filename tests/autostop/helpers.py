"""Shared pieces of the autostop tests: a recorded stop, a project, arming at a real terminal,
and a user profile whose survival matrix and stop action the test chooses."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rgt.agent._autostop_files import AutostopFiles
from tests.clirun import ok, rgt
from tests.ttys import PtyRgt

BUNDLED = Path(__file__).resolve().parents[2] / "src" / "rgt" / "profiles" / "generic-ssh.toml"
TICK = {"RGT_AUTOSTOP_TICK_S": "0.5", "RGT_AUTOSTOP_RECHECK_S": "1"}


def recorder(path: Path) -> str:
    """A stop action that only records that it ran (one line per run)."""
    return f"date +%s.%N >> '{path}'"


def stops(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def wait_for(check: Callable[[], Any], timeout: float, step: float = 0.2) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(step)
    return None


def project(tmp_path: Path, script: str, name: str = "train.py") -> Path:
    folder = tmp_path / "proj"
    folder.mkdir(exist_ok=True)
    (folder / name).write_text(script)
    return folder


def run_job(machine: str, folder: Path, *command: str, extra: tuple[str, ...] = ()) -> str:
    argv = ("run", machine, "--json", "--probe-seconds", "1", *extra, "--", *command)
    doc = ok(rgt(*argv, cwd=folder, timeout=180))
    return str(doc["job_id"])


def job_state(machine: str, job_id: str) -> str:
    proc = rgt("status", job_id, "--json")
    jobs = [j for j in json.loads(proc.stdout)["jobs"] if j["job_id"] == job_id]
    return str(jobs[0]["state"]) if jobs else "?"


def wait_ended(machine: str, job_id: str, timeout: float = 120) -> str:
    ended = ("succeeded", "failed", "cancelled")
    return str(wait_for(lambda: (s := job_state(machine, job_id)) in ended and s, timeout, 0.5))


def arm(name: str, *options: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    """`rgt approve NAME --autostop OPTIONS…` typed by a human at a real terminal."""
    proc = PtyRgt("approve", name, "--autostop", *options, env={**TICK, **(env or {})})
    proc.expect(f"Type {name} to approve")
    proc.type(name)
    code = proc.wait()
    return code, proc.seen.decode("utf-8", "replace")


def files(root: Path) -> AutostopFiles:
    return AutostopFiles(str((root / ".rgt").resolve()))


def events(root: Path) -> list[dict[str, Any]]:
    path = Path(files(root).events)
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def kinds(root: Path) -> list[str]:
    return [e["kind"] for e in events(root)]


def state(root: Path) -> dict[str, Any]:
    path = Path(files(root).state)
    return dict(json.loads(path.read_text())) if path.exists() else {}


def user_profile(
    home: Path,
    name: str,
    tiers: list[tuple[str, Path, bool]],
    stop: str,
    preemption: dict[str, Any] | None = None,
    detach: str = "setsid",
) -> str:
    """A user profile (``$RGT_HOME/profiles/NAME.toml``) from the generic SSH one, with the
    test's tiers (name, path, survives_stop), its ``[self_stop]`` and ``[preemption]``."""
    text = BUNDLED.read_text().replace('name = "generic-ssh"', f'name = "{name}"')
    text = text.replace('primitive = "setsid"', f'primitive = "{detach}"')
    start, end = text.index("[[storage]]"), text.index("[meter_stop]")
    blocks = [_tier(*tier) for tier in tiers]
    text = text[:start] + "\n".join(blocks) + "\n" + text[end:]
    text += _table("self_stop", {"mode": "command", "command": stop})
    if preemption:
        text += _table("preemption", preemption)
    folder = home / "profiles"
    folder.mkdir(exist_ok=True)
    (folder / f"{name}.toml").write_text(text)
    return name


def _tier(name: str, path: Path, survives: bool) -> str:
    return (
        f'[[storage]]\nname = "{name}"\npath = "{path}"\nspeed = "test"\nsize_cap = "test"\n'
        f"survives_stop = {str(survives).lower()}\nsurvives_destroy = false\n"
        'bills_when_stopped = false\nverified = "2026-08"\nstatus = "verified"\n'
        'source = "R:generic"\n'
    )


def _table(title: str, fields: dict[str, Any]) -> str:
    lines = [f"\n[{title}]"]
    for key, value in fields.items():
        if isinstance(value, dict):
            continue
        lines.append(f"{key} = {json.dumps(value)}")
    lines += ['verified = "2026-08"', 'status = "verified"', 'source = "R:generic"']
    for key, value in fields.items():
        if isinstance(value, dict):
            lines.append(f"\n[{title}.{key}]")
            lines += [f"{k} = {json.dumps(v)}" for k, v in value.items()]
    return "\n".join(lines) + "\n"


def kill9(pid: int) -> None:
    os.kill(pid, 9)
