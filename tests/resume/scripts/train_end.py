"""A tiny trainer that saves only when it ends (``out/model.pt``): a kill mid-run loses all.

It has a resume flag (``--init_from=resume``) like nanoGPT, which never helps it: there is no
checkpoint to resume from until the run is over.
"""

import os
import sys
import time

import torch

init_from, max_iters, sleep = "scratch", 150, 0.02
for arg in sys.argv[1:]:
    key, val = arg[2:].split("=", 1)
    globals()[key] = type(globals()[key])(val)
model = torch.nn.Linear(16, 1)
start = 0
if init_from == "resume" and os.path.exists("out/model.pt"):
    start = torch.load("out/model.pt")["iter_num"]
optimizer = torch.optim.SGD(model.parameters(), lr=1e-2)
X = torch.randn(64, 16)
for iter_num in range(start, max_iters):
    loss = torch.nn.functional.mse_loss(model(X), X.sum(1, keepdim=True))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"iter {iter_num}: loss {loss.item():.4f}", flush=True)
    time.sleep(sleep)
os.makedirs("out", exist_ok=True)
torch.save({"model": model.state_dict(), "iter_num": max_iters}, "out/model.pt")
