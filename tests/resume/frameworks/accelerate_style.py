"""accelerate's examples' layout without accelerate: save_state-like folders
output/step_N/ every step, --resume_from_checkpoint DIR continues after N."""

import argparse
import os
import time

parser = argparse.ArgumentParser()
parser.add_argument("--resume_from_checkpoint")
args = parser.parse_args()
start = (
    int(args.resume_from_checkpoint.rstrip("/").rsplit("_", 1)[1])
    if args.resume_from_checkpoint
    else 0
)
for step in range(start + 1, start + 30):
    print(f"step {step}: loss {1.0 / step:.3f}", flush=True)
    folder = os.path.join("output", f"step_{step}")
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "model.safetensors"), "wb") as handle:
        handle.write(b"weights %d" % step)
    time.sleep(0.2)
