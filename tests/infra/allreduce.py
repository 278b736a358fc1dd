"""A 2-node gloo job's worker, started by torchrun on every node: each rank adds rank + 1 in
one all-reduce and prints one JSON line (its rank, the world size, the sum, and where it ran).
The tests parse those lines with ``ranks``; with N ranks the sum is N * (N + 1) / 2."""

from __future__ import annotations

import json
import os
import socket
from typing import Any

MARK = "ALLREDUCE "


def main() -> None:
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo")
    value = torch.tensor([float(dist.get_rank() + 1)])
    dist.all_reduce(value)
    line = {
        "rank": dist.get_rank(),
        "world_size": dist.get_world_size(),
        "sum": value.item(),
        "host": socket.gethostname(),
        "netns": os.readlink("/proc/self/ns/net"),
        "node_rank": int(os.environ["GROUP_RANK"]),
        "master": os.environ["MASTER_ADDR"],
    }
    print(MARK + json.dumps(line), flush=True)
    dist.destroy_process_group()


def ranks(text: str) -> list[dict[str, Any]]:
    """The workers' records in ``text``, by rank. Each is read where its mark starts, not per
    line: two ranks of one node share the pipe, and a record may land mid-line after the
    other's bytes (seen once in a loaded run); a record is still one whole JSON object."""
    decoder, found = json.JSONDecoder(), []
    start = text.find(MARK)
    while start >= 0:
        record, end = decoder.raw_decode(text, start + len(MARK))
        found.append(record)
        start = text.find(MARK, end)
    return sorted(found, key=lambda line: int(line["rank"]))


if __name__ == "__main__":
    main()
