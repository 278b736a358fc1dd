"""Fork server for examples/train_demo.py: torch and the script's imports load once, then each
run is a forked child that executes the script as ``__main__``, killed on cue.

Each stdin line is ``WORKDIR OUT_FILE KILL ARG…`` (tab-separated). The child trains in WORKDIR
(``ckpt/`` and ``outputs/`` under it), writes its stdout and stderr to OUT_FILE, and dies by
SIGKILL at KILL: ``-`` (never), ``step:N`` (right after it logged step N), ``persist:N`` (inside
the writer, while save N's data file is half written) or ``after-save:N`` (rgt.ckpt's own
``RGT_SMOKE_KILL_AFTER_SAVE``: right after save N is committed). Prints ``reaped <code>``.
"""

from __future__ import annotations

import io
import os
import random
import runpy
import signal
import sys
from pathlib import Path

import numpy
import torch
from _fork_server import kill_in_persist, serve  # this directory: the zygote runs as a script

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "train_demo.py"


class KillAfterLine(io.TextIOBase):
    """The child's stdout: writes through unbuffered, SIGKILLs the process once a whole line
    starting with ``prefix`` is out (the test reads that line back, as it would from a pipe)."""

    def __init__(self, raw: io.TextIOBase, prefix: str | None) -> None:
        self.raw, self.prefix, self.line = raw, prefix, ""

    def write(self, text: str) -> int:
        self.raw.write(text)
        self.raw.flush()
        self.line += text
        while "\n" in self.line:
            done, self.line = self.line.split("\n", 1)
            if self.prefix is not None and done.startswith(self.prefix):
                os.kill(os.getpid(), signal.SIGKILL)
        return len(text)


def child(workdir: str, out_file: str, kill: str, *args: str) -> int:
    os.chdir(workdir)
    fd = os.open(out_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    raw = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding="utf-8")
    kind, _, at = kill.partition(":")
    sys.stdout = sys.stderr = KillAfterLine(raw, f"step {at} " if kind == "step" else None)
    os.environ["RGT_CKPT_DIR"] = os.path.join(workdir, "ckpt")
    os.environ["RGT_OUTPUT_DIR"] = os.path.join(workdir, "outputs")
    if kind == "after-save":
        os.environ["RGT_SMOKE_KILL_AFTER_SAVE"] = at
    if kind == "persist":
        kill_in_persist(int(at))
    random.seed()  # as a fresh interpreter: unseeded global state differs from run to run
    numpy.random.seed()
    sys.argv = [str(EXAMPLE), *args]
    try:
        runpy.run_path(str(EXAMPLE), run_name="__main__")
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 1
    except BaseException as exc:  # reported through the exit code and the output file
        print(f"child failed: {exc!r}", flush=True)
        return 1
    finally:
        sys.stdout.flush()
    return 0


def main() -> None:
    torch.set_num_threads(1)  # before forking: no OpenMP pool in the parent
    runpy.run_path(str(EXAMPLE), run_name="demo_zygote")  # the script's imports, once
    serve(lambda fields: child(*fields))


if __name__ == "__main__":
    main()
