"""What every fault trial shares: the seeded RNG, the bounded CLI call, the tree snapshot and
the four verdicts a trial asserts (untouched surroundings, a clear error, no hang, no false
success). A trial injects one fault, runs the real CLI, and calls these; nothing is mocked.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import rgt
from tests.faults.forkcli import ForkedCli, warm_up

# One seed drives every random choice of the suite (offsets, kill points, sizes); RELIABILITY.md
# names it. Another seed: RGT_FAULTS_SEED=N pytest -m faults.
SEED = int(os.environ.get("RGT_FAULTS_SEED", "20261201"))
SRC = Path(rgt.__file__).resolve().parents[1]
PY = sys.executable
# The fixed bound of one CLI call in a trial: past it, the call is a hang (a failed trial).
CALL_BOUND_S = 15.0
warm_up()


def rng(*parts: object) -> random.Random:
    """A generator of its own for each trial, so adding a trial never shifts the others."""
    return random.Random(":".join([str(SEED), *map(str, parts)]))


@dataclass(frozen=True)
class Outcome:
    argv: tuple[str, ...]
    code: int
    stdout: str
    stderr: str
    seconds: float

    def doc(self) -> Any:
        try:
            return json.loads(self.stdout)
        except ValueError:
            return None

    def __str__(self) -> str:
        return (
            f"rgt {' '.join(self.argv)} -> exit {self.code} in {self.seconds:.1f}s\n"
            f"stdout: {self.stdout[-1500:]}\nstderr: {self.stderr[-1500:]}"
        )


def env_for(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RGT_")}
    env.update(RGT_HOME=str(home), PYTHONPATH=str(SRC), RGT_AGENT_HEARTBEAT_S="0.2")
    env.update(extra)
    return env


def start(home: Path, *args: str, cwd: Path | None = None, **env: str) -> ForkedCli:
    """The CLI in a process of its own session, so a kill or a hang takes its children."""
    return ForkedCli(args, env_for(home, **env), str(cwd) if cwd else None)


def rgt(
    home: Path, *args: str, cwd: Path | None = None, bound: float = CALL_BOUND_S, **env: str
) -> Outcome:
    """Run the real CLI; a call that outlives ``bound`` is killed and the trial fails (hang)."""
    began = time.monotonic()
    proc = start(home, *args, cwd=cwd, **env)
    try:
        ended = proc.finish(bound)
        out, err = proc.output()
    finally:
        proc.close()
    if not ended:
        raise AssertionError(
            f"hang: `rgt {' '.join(args)}` gave no answer within {bound:g}s\n{err[-1500:]}"
        )
    assert proc.returncode is not None
    return Outcome(tuple(args), proc.returncode, out, err, time.monotonic() - began)


def kill_group(proc: subprocess.Popen[Any]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def wait_until(predicate: Callable[[], bool], bound: float, step: float = 0.1) -> bool:
    deadline = time.monotonic() + bound
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return predicate()


# -- verdicts ------------------------------------------------------------------------------


def assert_clear_error(out: Outcome, *, names: Iterable[str] = ()) -> dict[str, Any]:
    """Exit non-zero with rgt's own error (message and fix), never a traceback or an
    ``InternalError`` (rgt's word for "this is a bug in rgt")."""
    assert out.code != 0, f"expected a failure, got success:\n{out}"
    assert "Traceback (most recent call last)" not in out.stderr, f"raw traceback:\n{out}"
    doc = out.doc()
    assert isinstance(doc, dict) and doc.get("error"), f"no rgt error document:\n{out}"
    assert doc["error"] != "InternalError", (
        f"an unhandled exception, not a clear error ({str(doc.get('message'))[:160]}):\n{out}"
    )
    assert doc.get("fix"), f"the error names no fix:\n{out}"
    text = json.dumps(doc)
    for name in names:
        assert name in text, (
            f"the error does not name {name!r} ({doc['error']}: {str(doc.get('message'))[:160]})"
            f":\n{out}"
        )
    return doc


def assert_refused_pull(out: Outcome) -> None:
    """A pull that must not succeed: rgt's clear error, or a verification report saying which
    file failed and why (exit 1)."""
    assert out.code != 0, f"a pull of tampered or missing artifacts exited 0:\n{out}"
    assert "Traceback (most recent call last)" not in out.stderr, f"raw traceback:\n{out}"
    doc = out.doc()
    assert isinstance(doc, dict), f"no JSON document:\n{out}"
    if "error" in doc:
        assert_clear_error(out)
        return
    verify = doc.get("verify") or {}
    assert doc.get("ok") is False and verify, f"neither an error nor a failed report:\n{out}"
    bad = [f for f in verify.get("files", []) if not f.get("ok")]
    assert bad or verify.get("missing") or verify.get("unexpected"), f"no reason given:\n{out}"


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def assert_pulled_exactly(dest: Path, expected: dict[str, str]) -> None:
    """No false success: every artifact is in ``dest`` as a regular file with its hash."""
    for rel, digest in expected.items():
        path = dest / rel
        assert path.is_file() and not path.is_symlink(), f"{rel} missing after a successful pull"
        assert sha256(path) == digest, f"{rel} has the wrong content after a successful pull"
    assert_confined(dest)


def assert_confined(dest: Path) -> None:
    """No link under ``dest`` leads out of it (a later write or read would go outside)."""
    real = dest.resolve()
    for path in dest.rglob("*"):
        if path.is_symlink():
            target = path.resolve()
            assert target == real or real in target.parents, f"{path} -> {target} escapes"


# -- the tree around the destination ---------------------------------------------------------

Snapshot = dict[str, tuple[Any, ...]]


def snapshot(root: Path, skip: Sequence[Path] = ()) -> Snapshot:
    """Every entry under ``root`` (links not followed): type, mode, size, mtime, content hash or
    link target. ``skip`` names subtrees that may change (the destination itself)."""
    skipped = {str(p) for p in skip}
    seen: Snapshot = {}
    for top, dirs, files in os.walk(root, followlinks=False):
        dirs[:] = [d for d in dirs if os.path.join(top, d) not in skipped]
        for name in [*dirs, *files]:
            path = os.path.join(top, name)
            if path in skipped:
                continue
            seen[os.path.relpath(path, root)] = _entry(path)
    return seen


def _entry(path: str) -> tuple[Any, ...]:
    st = os.lstat(path)
    if os.path.islink(path):
        return ("link", os.readlink(path))
    if os.path.isdir(path):
        return ("dir", st.st_mode)
    with open(path, "rb") as handle:
        digest = hashlib.sha256(handle.read()).hexdigest()
    return ("file", st.st_mode, st.st_size, st.st_mtime_ns, digest)


def assert_untouched(before: Snapshot, after: Snapshot, where: Path) -> None:
    changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
    assert not changed, f"files outside the destination changed under {where}: {changed[:10]}"


def kill_processes_of(job_dirs: Sequence[str]) -> None:
    """SIGKILL the processes whose command line or environment names one of ``job_dirs``
    (agents, trainers): a trial's own processes only, never another trial's."""
    if not job_dirs:
        return
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        with contextlib.suppress(OSError):
            seen = (entry / "cmdline").read_bytes() + (entry / "environ").read_bytes()
            if any(job.encode() in seen for job in job_dirs):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(entry.name), signal.SIGKILL)
