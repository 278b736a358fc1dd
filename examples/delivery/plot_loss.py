"""Loss curves of the recorded runs: `rgt deliver figure loss` runs this with matplotlib (Agg).

    python plot_loss.py source_data.csv loss.png

``source_data.csv`` is built by rgt from the cited runs' ``metrics.jsonl`` (columns run_id,
step, loss, …); the figure is reopened and pixel-checked after it is saved.
"""

import csv
import sys
from collections import defaultdict

import matplotlib.pyplot as plt

source, image = sys.argv[1], sys.argv[2]
curves: dict[str, tuple[list[int], list[float]]] = defaultdict(lambda: ([], []))
with open(source, newline="") as handle:
    for row in csv.DictReader(handle):
        xs, ys = curves[row["run_id"]]
        xs.append(int(row["step"]))
        ys.append(float(row["loss"]))
# Well-separated hues: rgt reopens the image and counts the coloured series it can see.
COLOURS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#e377c2"]
fig, ax = plt.subplots(figsize=(6.4, 4.8), dpi=100)
for i, (run, (xs, ys)) in enumerate(sorted(curves.items())):
    ax.plot(xs, ys, label=run[:24], color=COLOURS[i % len(COLOURS)])
ax.set_xlabel("step")
ax.set_ylabel("training loss")
ax.legend(fontsize=7)
fig.savefig(image)
