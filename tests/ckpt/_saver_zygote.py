"""Forks children that save checkpoints in a tight loop, for the kill -9 atomicity test.

Run as ``python _saver_zygote.py CKPT_DIR``. torch is imported once, here; for each line read on
stdin the zygote forks a child that saves checkpoints of increasing steps until it is killed,
prints ``<pid>``, waits for the child to die and prints ``reaped <signal>``. So each kill costs
a fork, not a fresh interpreter importing torch.
"""

from __future__ import annotations

import os
import sys

import torch

from rgt.ckpt import Checkpointer


def state_for(step: int) -> dict[str, object]:
    # ~1 MiB: long enough that random kills land inside the write, the fsyncs and the rename.
    return {"step": step, "w": torch.full((512, 512), float(step)), "b": torch.arange(64) + step}


def save_forever(directory: str) -> None:
    ckpt = Checkpointer(directory, keep_last=2)
    info = ckpt.latest_info(verify=False)
    step = info.step if info else 0
    while True:
        step += 1
        ckpt.save(state_for(step), step, metric=float(step % 7))


def main() -> None:
    directory = sys.argv[1]
    torch.set_num_threads(1)
    Checkpointer(directory, keep_last=2).save(state_for(0), 0)  # one committed checkpoint
    print("ready", flush=True)
    for _line in sys.stdin:
        pid = os.fork()
        if pid == 0:
            try:
                save_forever(directory)
            finally:
                os._exit(1)
        print(pid, flush=True)
        _, status = os.waitpid(pid, 0)
        print(f"reaped {os.WTERMSIG(status) if os.WIFSIGNALED(status) else -1}", flush=True)


if __name__ == "__main__":
    main()
