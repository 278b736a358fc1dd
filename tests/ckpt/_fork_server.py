"""The fork server the exact-resume zygotes share: import and warm up once, then one forked
child per training run, so a run costs ~1 s instead of a fresh interpreter's imports.

Protocol on stdin/stdout: the zygote prints ``ready``; each stdin line is one run's
tab-separated arguments; after the child exits (or is killed), ``reaped <code>`` is printed,
``<code>`` being the exit status or minus the signal number.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from rgt.ckpt import _persist


def kill_in_persist(save: int) -> None:
    """SIGKILL this process while its ``save``-th checkpoint is being written (the data file
    is still a temporary, no record committed): the writer's test hook, in either mode."""
    opened = 0

    def hold(stage: str) -> None:
        nonlocal opened
        opened += stage == "open"
        if stage == "data" and opened == save:
            os.kill(os.getpid(), signal.SIGKILL)

    _persist.hold = hold


def serve(run: Callable[[list[str]], int]) -> None:
    """Answer runs until stdin closes; ``run`` gets one line's fields, returns an exit code."""
    print("ready", flush=True)
    for line in sys.stdin:
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                code = run(line.rstrip("\n").split("\t"))
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
        print(f"reaped {code}", flush=True)


class Client:
    """The test side: starts ``script`` (with ``args``), waits for ``ready``, sends runs."""

    def __init__(
        self, script: Path, *args: str, quiet: bool = False, env: dict[str, str] | None = None
    ) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(script), *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL if quiet else None,
            text=True,
            env=env,
        )
        assert self.answer("ready") == "ready"

    def send(self, *fields: object) -> int:
        """One run; its exit code (minus the signal number if it was killed)."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write("\t".join(map(str, fields)) + "\n")
        self.proc.stdin.flush()
        return int(self.answer("reaped ").split()[1])

    def answer(self, prefix: str) -> str:
        """The zygote's next protocol line. Libraries may talk on stdout first (DeepSpeed,
        once installed, is imported by accelerate and logs its accelerator choice there)."""
        assert self.proc.stdout is not None
        for _ in range(100):
            line = self.proc.stdout.readline()
            assert line, f"the zygote ended before answering {prefix.strip()!r}"
            if line.startswith(prefix):
                return line.strip()
        raise AssertionError(f"no {prefix.strip()!r} in the zygote's first 100 lines")

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=60)
