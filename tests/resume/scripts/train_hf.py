"""A tiny trainer in the shape of the Hugging Face examples (run_clm.py and friends).

``--output_dir out`` gets ``checkpoint-<global_step>/`` folders every ``--save_steps`` (weights,
optimizer, then ``trainer_state.json`` last, as the Trainer does; the oldest beyond
``--save_total_limit`` deleted); ``--resume_from_checkpoint out/checkpoint-N`` continues from
its ``global_step`` and says so the way the Trainer does. RGT_SMOKE is ignored.
"""

import argparse
import json
import os
import shutil
import time

import torch

parser = argparse.ArgumentParser()
parser.add_argument("--output_dir", required=True)
parser.add_argument("--resume_from_checkpoint")
parser.add_argument("--max_steps", type=int, default=200)
parser.add_argument("--save_steps", type=int, default=20)
parser.add_argument("--logging_steps", type=int, default=10)
parser.add_argument("--save_total_limit", type=int, default=2)
parser.add_argument("--sleep", type=float, default=0.02)
args = parser.parse_args()

torch.manual_seed(42)
model = torch.nn.Linear(16, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=1e-2)
global_step, log_history = 0, []
if args.resume_from_checkpoint:
    ckpt = args.resume_from_checkpoint
    model.load_state_dict(torch.load(os.path.join(ckpt, "pytorch_model.bin")))
    optimizer.load_state_dict(torch.load(os.path.join(ckpt, "optimizer.pt")))
    with open(os.path.join(ckpt, "trainer_state.json")) as handle:
        state = json.load(handle)
    global_step, log_history = state["global_step"], state["log_history"]
    print("  Continuing training from checkpoint, will skip to saved global_step")
    print(f"  Continuing training from global step {global_step}", flush=True)
print("***** Running training *****")
print(f"  Total optimization steps = {args.max_steps}", flush=True)
X = torch.randn(256, 16, generator=torch.Generator().manual_seed(0))
Y = X.sum(1, keepdim=True)
steps_this_run = 0
while global_step < args.max_steps:
    loss = torch.nn.functional.mse_loss(model(X), Y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    global_step += 1
    steps_this_run += 1
    if global_step % args.logging_steps == 0:
        log = {"loss": round(loss.item(), 4), "learning_rate": 0.01, "step": global_step}
        log_history.append(log)
        print(log, flush=True)
    if global_step % args.save_steps == 0:
        out = os.path.join(args.output_dir, f"checkpoint-{global_step}")
        os.makedirs(out, exist_ok=True)
        torch.save(model.state_dict(), os.path.join(out, "pytorch_model.bin"))
        torch.save(optimizer.state_dict(), os.path.join(out, "optimizer.pt"))
        with open(os.path.join(out, "trainer_state.json"), "w") as handle:
            json.dump({"global_step": global_step, "log_history": log_history}, handle)
        names = [n for n in os.listdir(args.output_dir) if n.startswith("checkpoint-")]
        for old in sorted(names, key=lambda n: int(n.split("-")[1]))[: -args.save_total_limit]:
            shutil.rmtree(os.path.join(args.output_dir, old))
    time.sleep(args.sleep)
torch.save(model.state_dict(), os.path.join(args.output_dir, "pytorch_model.bin"))
print({"train_steps_this_run": steps_this_run, "global_step": global_step}, flush=True)
