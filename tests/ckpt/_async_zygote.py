"""Forks children that train and save asynchronously until killed, for the SIGKILL fault suite.

Run as ``python _async_zygote.py CKPT_DIR``. torch is imported once, here. For each stdin line
``go <stage>`` the zygote forks a child that resumes from the newest checkpoint and saves every
step with ``asynchronous=True``; before each save it writes ``step <n>``. With a stage other
than ``-`` the child freezes its writer at that stage of its second save (``held <stage>``) so
the parent kills it mid-persist. The zygote prints the child's pid, then ``reaped <signal>``.
"""

from __future__ import annotations

import os
import sys
import time

import torch

from rgt.ckpt import Checkpointer, _persist


def state_for(step: int) -> dict[str, object]:
    # ~1 MiB: a write long enough for kills to land inside it.
    return {"step": step, "w": torch.full((512, 512), float(step)), "b": torch.arange(64) + step}


def say(line: str) -> None:
    os.write(1, f"{line}\n".encode())


def freeze_at(stage: str) -> None:
    seen = {"saves": 0}

    def hook(at: str) -> None:
        if at == "open":
            seen["saves"] += 1
        if at == stage and seen["saves"] == 2:
            say(f"held {stage}")
            time.sleep(3600)

    _persist.hold = hook


def train_forever(directory: str, stage: str) -> None:
    if stage != "-":
        freeze_at(stage)
    ckpt = Checkpointer(directory, keep_last=2, asynchronous=True)
    info = ckpt.latest_info(verify=False)
    step = info.step if info else 0
    weights = torch.zeros(64, 64)
    while True:
        step += 1
        weights.add_(1.0).mul_(0.5)  # a training step that mutates state the writer must not see
        say(f"step {step}")
        ckpt.save(state_for(step), step)


def main() -> None:
    directory = sys.argv[1]
    torch.set_num_threads(1)
    Checkpointer(directory, keep_last=2).save(state_for(0), 0)
    print("ready", flush=True)
    for line in sys.stdin:
        stage = line.split()[1]
        start_r, start_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            try:
                os.read(start_r, 1)  # the child's lines must come after its pid line
                train_forever(directory, stage)
            finally:
                os._exit(1)
        print(pid, flush=True)
        os.write(start_w, b"x")
        os.close(start_r)
        os.close(start_w)
        _, status = os.waitpid(pid, 0)
        print(f"reaped {os.WTERMSIG(status) if os.WIFSIGNALED(status) else -1}", flush=True)


if __name__ == "__main__":
    main()
