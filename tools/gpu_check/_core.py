"""What every step of the GPU check shares: the run's context, a step's verdict, torchrun."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
FAILURES = "failures.log"  # in $OUT: the whole output of what failed (last 256 KiB of each)


def say(line: str) -> None:
    print(line, flush=True)


@dataclass
class Context:
    """``cpu``: the dry run (gloo, CPU tensors, a recorded nvidia-smi). ``env``: what every
    process of the check gets. ``shared``: what a step leaves for a later one."""

    cpu: bool
    out: Path
    work: Path
    env: dict[str, str]
    pyz: Path
    world: int
    shared: dict[str, Any] = field(default_factory=dict)
    jobs: list[Any] = field(default_factory=list)  # AgentJobs to clean up after the step

    def copy_out(self, source: Path, name: str, limit: int = 1 << 20) -> None:
        """``source``'s last ``limit`` bytes to ``$OUT/name`` (the device returns 8 files)."""
        if source.exists():
            data = source.read_bytes()
            (self.out / name).write_bytes(data[-limit:])

    def keep_failure(self, step: Step, what: str, log: Path) -> None:
        """A failed command's output: its first traceback and its end in the log, all of it
        (up to 256 KiB) appended to ``$OUT/failures.log``."""
        text = log.read_text(errors="replace") if log.exists() else f"({log} was not written)"
        step.note(f"{what} said (whole output in $OUT/{FAILURES}):\n{excerpt(text)}")
        with open(self.out / FAILURES, "a", encoding="utf-8") as sink:
            sink.write(f"===== step {step.number}: {what}: {log}\n{text[-(256 << 10) :]}\n")


class Step:
    """One step's checks: each an ``ok``/``FAILED`` line with its evidence; PASS iff all ok."""

    def __init__(self, number: int, title: str, budget_s: float) -> None:
        self.number, self.title, self.budget_s = number, title, budget_s
        self.ok, self.evidence, self.numbers = True, [], {}  # type: ignore[var-annotated]
        self.started = time.monotonic()
        self.deadline = self.started + budget_s

    def check(self, cond: bool, what: str, detail: Any = None) -> bool:
        line = f"{'ok    ' if cond else 'FAILED'}  {what}"
        if detail not in (None, ""):
            line += f": {detail}"
        self.evidence.append(line)
        say(f"    {line}")
        self.ok = self.ok and bool(cond)
        return bool(cond)

    def note(self, text: str) -> None:
        self.evidence.append(f"note    {text}")
        say(f"    note    {text}")

    def left(self) -> float:
        return max(1.0, self.deadline - time.monotonic())

    def seconds(self) -> float:
        return time.monotonic() - self.started

    def to_json(self) -> dict[str, Any]:
        return {
            "number": self.number,
            "title": self.title,
            "ok": self.ok,
            "seconds": round(self.seconds(), 2),
            "budget_s": self.budget_s,
            "evidence": self.evidence,
            "numbers": self.numbers,
        }


def excerpt(text: str) -> str:
    """The first traceback (a rank's own error, printed before torchrun's summary of it) and
    the end of the output."""
    first = text.find("Traceback (most recent call last)")
    head = text[first : first + 2500] + "\n    [...]\n" if first >= 0 else ""
    return head + text[-1500:]


def torchrun(
    step: Step, script: str, nproc: int, env: dict[str, str], cwd: Path
) -> tuple[int, Path]:
    """``python3 -m torch.distributed.run --standalone`` of ``tools/gpu_check/<script>``;
    (exit code, its log). Killed at the step's deadline (exit code -9 then)."""
    argv = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
    argv += [f"--nproc_per_node={nproc}", str(HERE / script)]
    log = cwd / f"{Path(script).stem}.log"
    cwd.mkdir(parents=True, exist_ok=True)
    marker = f"GC_RUN={cwd}"  # torchrun starts each rank in a session of its own
    with open(log, "wb") as sink:
        proc = subprocess.Popen(
            argv,
            cwd=cwd,
            env=dict(env, GC_RUN=str(cwd)),
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            return proc.wait(timeout=step.left()), log
        except subprocess.TimeoutExpired:
            return -9, log
        finally:
            kill_carrying(marker)
            proc.wait()


def kill_carrying(marker: str) -> list[int]:
    """SIGKILL every process whose environment holds ``marker`` (a variable only the check's
    own processes carry): a timed-out torchrun's ranks, a job's ranks after its agent."""
    needle = marker.encode("utf-8", "surrogateescape")
    killed = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as handle:
                if needle not in handle.read().split(b"\0"):
                    continue
            os.kill(int(entry), signal.SIGKILL)
            killed.append(int(entry))
        except OSError:
            continue
    return killed


def gpu_list(world: int) -> str:
    return ",".join(str(i) for i in range(world))
