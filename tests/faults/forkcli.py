"""The real CLI (``rgt.cli.main``) in a forked process: a fresh process per call, without
paying ~0.4 s of interpreter start and imports each time (the suite makes hundreds of calls).

The child gets its own session (so a kill or a hang takes its children too), fds 0-2 on
/dev/null and two pipes, the trial's environment and working directory, and ends with
``os._exit`` so nothing of pytest runs in it. What the trial sees is what a user sees: the
exit code, stdout and stderr.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import os
import selectors
import signal
import sys
import time
import traceback
from collections.abc import Sequence

# Imported once here so each forked call starts warm.
WARM = (
    "rgt.cli",
    "rich.progress",
    "rich.live",
    "rgt.jobs.pull",
    "rgt.jobs.launch",
    "rgt.jobs.overview",
    "rgt.jobs.push",
    "rgt.watch.patrol",
    "rgt.watch.render",
    "rgt.verify.artifacts",
    "rgt.lifecycle.gate",
    "rgt.lifecycle.teardown",
    "rgt.backends.local",
    "rgt.backends.ssh",
    "rgt.transport.rsync",
    "numpy",
)


def warm_up() -> None:
    for name in WARM:
        with contextlib.suppress(ImportError):
            importlib.import_module(name)
    from rgt.cli import load_all

    load_all()  # every command registered before the first fork


class ForkedCli:
    """One running `rgt ARGS…`; ``finish(bound)`` collects it or declares a hang."""

    def __init__(self, args: Sequence[str], env: dict[str, str], cwd: str | None) -> None:
        self.args = tuple(args)
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: never returns
            os.close(out_r)
            os.close(err_r)
            _child(self.args, env, cwd, out_w, err_w)
        os.close(out_w)
        os.close(err_w)
        self.pid = pid
        self.returncode: int | None = None
        self._chunks: dict[int, list[bytes]] = {out_r: [], err_r: []}
        self._out, self._err = out_r, err_r
        self._sel = selectors.DefaultSelector()
        for fd in (out_r, err_r):
            self._sel.register(fd, selectors.EVENT_READ)

    def kill(self) -> None:
        """SIGKILL the CLI and everything in its session (what a kill -9 of a shell job does
        to the foreground pipeline; detached agents live in sessions of their own)."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.pid, signal.SIGKILL)

    def finish(self, bound: float) -> bool:
        """Read until the process ends; False (after killing it) when it outlives ``bound``."""
        deadline = time.monotonic() + bound
        while self.returncode is None:
            if time.monotonic() > deadline:
                self.kill()
                self._reap(block=True)
                self._drain(0.2)
                return False
            self._drain(0.05)
            self._reap(block=False)
        self._drain(0.3)  # what the child wrote just before it exited
        return True

    def output(self) -> tuple[str, str]:
        text = [
            b"".join(self._chunks[fd]).decode("utf-8", "replace") for fd in (self._out, self._err)
        ]
        return text[0], text[1]

    def close(self) -> None:
        for fd in (self._out, self._err):
            with contextlib.suppress(KeyError, ValueError):
                self._sel.unregister(fd)
            with contextlib.suppress(OSError):
                os.close(fd)
        self._sel.close()

    def _reap(self, block: bool) -> None:
        pid, status = os.waitpid(self.pid, 0 if block else os.WNOHANG)
        if pid:
            self.returncode = os.waitstatus_to_exitcode(status)

    def _drain(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while self._sel.get_map():
            events = self._sel.select(max(0.0, deadline - time.monotonic()))
            if not events:
                return
            for key, _ in events:
                data = os.read(key.fd, 65536)
                if data:
                    self._chunks[key.fd].append(data)
                else:
                    self._sel.unregister(key.fd)


def _child(args: tuple[str, ...], env: dict[str, str], cwd: str | None, out: int, err: int) -> None:
    code = 70
    try:
        os.setsid()
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(out, 1)
        os.dup2(err, 2)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGALRM):
            signal.signal(sig, signal.SIG_DFL)
        os.environ.clear()
        os.environ.update(env)
        if cwd:
            os.chdir(cwd)
        sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False))
        sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), write_through=True)
        sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), write_through=True)
        from rgt.cli import main

        main(list(args))
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:  # what a user would see from a real interpreter
        traceback.print_exc()
        code = 1
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)
