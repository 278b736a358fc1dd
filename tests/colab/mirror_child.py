"""A training process that checkpoints with a durable mirror: run as a script by the tests.

    mirror_child.py LOCAL MIRROR FIRST LAST [MODE MARKERS]

saves steps FIRST..LAST with ``Checkpointer(LOCAL, mirror=MIRROR)``. MODE acts on the copy of
the LAST step only: ``kill-mid-copy`` writes MARKERS/mid-copy after the third chunk and freezes
there (the test kills it); ``late`` writes MARKERS/copied once the copy is fsync'd and waits
for the late writer (tests/colab/late_writer.py) to write MARKERS/hidden before reading back.
"""

from __future__ import annotations

import random
import sys
import time
from pathlib import Path
from typing import Any

STATE_BYTES = 1 << 20


def state(step: int) -> dict[str, Any]:
    """The deterministic state of ``step`` (a fresh process rebuilds it to compare)."""
    blob = random.Random(step).getrandbits(8 * STATE_BYTES).to_bytes(STATE_BYTES, "little")
    return {"weights": blob, "step": step, "lr": 0.1 / step}


def _hook(mode: str, markers: Path, current: list[int], last: int) -> Any:
    chunks = [0]

    def hold(stage: str) -> None:
        if current[0] != last:
            return
        if mode == "kill-mid-copy" and stage == "mirror-chunk":
            chunks[0] += 1
            if chunks[0] == 3:
                (markers / "mid-copy").write_text("")
                time.sleep(3600)
        if mode == "late" and stage == "mirror-written":
            (markers / "copied").write_text("")
            while not (markers / "hidden").exists():
                time.sleep(0.01)

    return hold


def main(argv: list[str]) -> None:
    from rgt.ckpt import Checkpointer, _persist, mirror

    local, durable, first, last = argv[0], argv[1], int(argv[2]), int(argv[3])
    mirror.CHUNK = 1 << 16  # many chunks, so a kill lands mid-copy
    current = [0]
    if len(argv) > 4:
        _persist.hold = _hook(argv[4], Path(argv[5]), current, last)
    ckpt = Checkpointer(local, mirror=durable, keep_last=3)
    for step in range(first, last + 1):
        current[0] = step
        ckpt.save(state(step), step)
    print("saved", first, last, flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
