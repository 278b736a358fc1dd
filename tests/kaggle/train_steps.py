"""A small CPU torch training loop with rgt.ckpt: STEPS steps, a checkpoint after each, and a
result file at the end that says where it started (0, or the step it resumed from)."""

import json
import os
import sys
import time

import torch

from rgt.ckpt import Checkpointer

STEPS, PAUSE = int(sys.argv[1]), float(sys.argv[2])
ckpt = Checkpointer.from_env()
state = ckpt.load_latest() or {"step": 0, "w": torch.zeros(4)}
started = state["step"]
print(f"starting at step {started}", flush=True)
while state["step"] < STEPS:
    time.sleep(PAUSE)
    step = state["step"] + 1
    state = {"step": step, "w": state["w"] + step}
    ckpt.save(state, step=step)
    print(f"step {step}", flush=True)
out = os.environ.get("RGT_OUTPUT_DIR") or "outputs"
os.makedirs(out, exist_ok=True)
with open(os.path.join(out, "result.json"), "w") as f:
    total = float(state["w"][0])
    json.dump({"started_at": started, "steps": state["step"], "total": total}, f)
