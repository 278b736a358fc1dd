"""A FUSE-like late writer, run as its own process: the copy's bytes become visible late.

    late_writer.py MIRROR MARKERS DELAY_S

Waits for MARKERS/copied (the mirror's copy is written and fsync'd), then does what a lagging
Drive mount shows a reader: the temp copy holds only its first half (MARKERS/hidden). After
DELAY_S it writes the rest back (MARKERS/restored); a negative DELAY_S never does.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path


def main(mirror: Path, markers: Path, delay: float) -> None:
    while not (markers / "copied").exists():
        time.sleep(0.01)
    (temp,) = [p for p in mirror.iterdir() if p.name.startswith(".tmp-")]
    data = temp.read_bytes()
    os.truncate(temp, len(data) // 2)
    (markers / "hidden").write_text(str(len(data)))
    if delay < 0:
        return
    time.sleep(delay)
    with open(temp, "r+b") as handle:
        handle.seek(len(data) // 2)
        handle.write(data[len(data) // 2 :])
        handle.flush()
        os.fsync(handle.fileno())
    (markers / "restored").write_text("")


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]), float(sys.argv[3]))
