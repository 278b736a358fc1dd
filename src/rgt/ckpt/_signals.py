"""A signal hook that asks the training loop for one last checkpoint.

It is a bonus, never the safety net. Grace windows between the platform's SIGTERM and its SIGKILL
are ~0 s on vast.ai, ~5 s on RunPod spot, 30 s by default on Slurm (KillWait) and Kubernetes
(terminationGracePeriodSeconds); a host crash or an OOM kill sends nothing at all. Periodic
atomic checkpoints (``Checkpointer.due``) are what make a run survive; this hook only shortens
the work lost when a warning does arrive.

The handler only sets a flag. Saving from inside a signal handler would run torch.save in the
middle of an arbitrary bytecode (maybe inside optimizer.step(), with half-updated weights) and
could deadlock on locks the interrupted code holds. The loop checks ``should_stop`` between
steps, saves a consistent state, and exits.

Why SIGUSR1 too, and why it may not reach you: Slurm's ``sbatch --signal=USR1@120`` is the usual
way to get a warning before a time limit (SIGTERM then follows at the limit), so USR1 is a useful
early signal. But NCCL/torch.distributed and some launchers (torchrun's elastic agent, Slurm's
srun step handling) install their own handlers or consume/forward USR1, and Python allows a
handler only in the main thread, so a hook installed here can be replaced or never called.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Iterable
from types import FrameType

from rgt.errors import UsageError

DEFAULT_SIGNALS = (signal.SIGTERM, signal.SIGUSR1)


class StopRequest:
    """The flag a signal sets; the training loop reads it between steps."""

    def __init__(self) -> None:
        self.signum: int | None = None

    @property
    def requested(self) -> bool:
        return self.signum is not None

    def handle(self, signum: int, frame: FrameType | None) -> None:
        self.signum = signum

    def install(self, signals: Iterable[int] = DEFAULT_SIGNALS) -> None:
        if threading.current_thread() is not threading.main_thread():
            raise UsageError(
                "signal handlers can only be installed from the main thread",
                fix="call install_signal_handler() at the start of the script, outside threads",
            )
        for signum in signals:
            signal.signal(signum, self.handle)


def die_by(signum: int | None) -> None:
    """Die by the signal that asked us to stop, so the supervisor sees a preemption."""
    signum = signum or signal.SIGTERM
    print(f"rgt.ckpt: stopping on signal {signum}: checkpoint saved", file=sys.stderr, flush=True)
    sys.stdout.flush()
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)
