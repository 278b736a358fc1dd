"""A tiny trainer in the shape of karpathy/nanoGPT's train.py (not written for rgt).

Globals overridden by ``--key=value``; checkpoints go to ``out_dir/ckpt.pt`` relative to the
working directory, written in place with torch.save every ``eval_interval`` iterations;
``--init_from=resume`` loads it and continues from its ``iter_num``. RGT_SMOKE is ignored.
"""

import os
import sys
import time

import torch

out_dir = "out"
init_from = "scratch"
max_iters = 300
eval_interval = 25
sleep = 0.02
for arg in sys.argv[1:]:
    key, val = arg[2:].split("=", 1)
    assert key in globals(), f"unknown config key {key}"
    print(f"Overriding: {key} = {val}")
    globals()[key] = type(globals()[key])(val)

torch.manual_seed(1337)
model = torch.nn.Linear(16, 1)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
iter_num, best_val_loss = 0, 1e9
if init_from == "scratch":
    print("Initializing a new model from scratch")
elif init_from == "resume":
    print(f"Resuming training from {out_dir}")
    checkpoint = torch.load(os.path.join(out_dir, "ckpt.pt"), map_location="cpu")
    model.load_state_dict(checkpoint["model"])
    optimizer.load_state_dict(checkpoint["optimizer"])
    iter_num, best_val_loss = checkpoint["iter_num"], checkpoint["best_val_loss"]
os.makedirs(out_dir, exist_ok=True)
X = torch.randn(256, 16, generator=torch.Generator().manual_seed(0))
Y = X.sum(1, keepdim=True)
while True:
    if iter_num % eval_interval == 0:
        with torch.no_grad():
            val = torch.nn.functional.mse_loss(model(X), Y).item()
        print(f"step {iter_num}: train loss {val:.4f}, val loss {val:.4f}", flush=True)
        if iter_num > 0:
            best_val_loss = min(best_val_loss, val)
            checkpoint = {
                "model": model.state_dict(),
                "optimizer": optimizer.state_dict(),
                "model_args": {"n_in": 16},
                "iter_num": iter_num,
                "best_val_loss": best_val_loss,
                "config": {"out_dir": out_dir, "max_iters": max_iters},
            }
            print(f"saving checkpoint to {out_dir}", flush=True)
            torch.save(checkpoint, os.path.join(out_dir, "ckpt.pt"))
    if iter_num >= max_iters:
        break
    loss = torch.nn.functional.mse_loss(model(X), Y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"iter {iter_num}: loss {loss.item():.4f}, time 1.00ms", flush=True)
    iter_num += 1
    time.sleep(sleep)
