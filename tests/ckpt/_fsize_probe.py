"""Saves under a file size limit (``ulimit -f``), sync and async; prints one JSON line per case.

Run as ``python _fsize_probe.py DIR CASES SEED``. Each case commits a small checkpoint, lowers
RLIMIT_FSIZE to a random point inside the next (larger) data file, saves it, and reports the
error, whether temp files were left and which step then loads. Python ignores SIGXFSZ, so the
write fails with EFBIG instead of killing the process.
"""

from __future__ import annotations

import json
import os
import random
import resource
import sys

import torch

from rgt.ckpt import Checkpointer
from rgt.errors import RgtError


def one_case(directory: str, index: int, rng: random.Random) -> dict[str, object]:
    asynchronous = index % 2 == 1
    ckpt = Checkpointer(directory, keep_last=2, asynchronous=asynchronous)
    ckpt.save({"step": 2 * index, "w": torch.zeros(1024)}, 2 * index)
    ckpt.wait()
    limit = rng.randrange(64 << 10, 4 << 20)  # the big state is 4 MiB + framing
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
    error: RgtError | None = None
    try:
        ckpt.save({"step": 2 * index + 1, "w": torch.ones(1 << 20)}, 2 * index + 1)
        ckpt.wait()
    except RgtError as exc:
        error = exc
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    state = Checkpointer(directory).load_latest()
    return {
        "asynchronous": asynchronous,
        "limit": limit,
        "error": type(error).__name__ if error else None,
        "message": error.message if error else None,
        "fix": error.fix if error else None,
        "temp_files": [n for n in os.listdir(directory) if n.startswith(".tmp-")],
        "loaded_step": state["step"],
        "expected_step": 2 * index,
    }


def main() -> None:
    directory, cases, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    rng = random.Random(seed)
    for index in range(cases):
        print(json.dumps(one_case(directory, index, rng)), flush=True)


if __name__ == "__main__":
    main()
