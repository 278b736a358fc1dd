"""Helpers shared by the deliver tests: a loss-curve figure and runs written from the schema."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from rgt.deliver.workspace import Workspace
from rgt.results import write_results

LOSS_PLOT = """\
import csv, sys
from collections import defaultdict
import matplotlib.pyplot as plt
source, image = sys.argv[1], sys.argv[2]
curves = defaultdict(lambda: ([], []))
with open(source, newline="") as handle:
    for row in csv.DictReader(handle):
        xs, ys = curves[row["run_id"]]
        xs.append(int(row["step"])); ys.append(float(row["loss"]))
fig, ax = plt.subplots(figsize=(6.4, 4.8), dpi=100)
for run, (xs, ys) in sorted(curves.items())[:LIMIT]:
    ax.plot(xs, ys, label=run[:20])
ax.set_xlabel("step"); ax.set_ylabel("training loss"); ax.legend()
fig.savefig(image)
"""


def add_loss_figure(ws: Workspace, *, limit: int = 99, size: str = "[640, 480]") -> Path:
    folder = ws.figure_dir("loss")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "figure.toml").write_text(
        f'script = "plot.py"\nruns = "train_demo-*"\nlog = "metrics.jsonl"\n'
        f'size = {size}\nseries = "run_id"\n'
    )
    (folder / "plot.py").write_text(LOSS_PLOT.replace("LIMIT", str(limit)))
    return folder


def make_run(
    directory: Path,
    *,
    name: str = "base",
    seed: int = 0,
    metrics: dict[str, float],
    data: dict[str, str] | None = None,
    smoke: bool = False,
    with_artifact: bool = True,
) -> Path:
    """A run directory written from the schema: results.json plus one real artifact."""
    directory.mkdir(parents=True, exist_ok=True)
    artifacts: list[dict[str, Any]] = []
    if with_artifact:
        blob = f"{name} {seed} {sorted(metrics.items())}".encode()
        (directory / "model.bin").write_bytes(blob)
        digest = hashlib.sha256(blob).hexdigest()
        artifacts.append({"path": "model.bin", "sha256": digest, "bytes": len(blob)})
    write_results(
        directory,
        {
            "name": name,
            "created": "2025-01-01T00:00:00+00:00",
            "seed": seed,
            "config": {"lr": 0.001},
            "data": data or {"train": "a" * 64, "test": "b" * 64},
            "metrics": {
                k: {"value": v, "direction": "min" if "loss" in k else "max"}
                for k, v in metrics.items()
            },
            "artifacts": artifacts,
            "smoke": smoke,
        },
    )
    return directory
