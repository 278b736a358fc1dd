"""A job that holds the GPUs the agent gave it (tools/gpu_check step 1).

Writes ``cuda.txt`` (``CUDA_VISIBLE_DEVICES|CUDA_DEVICE_ORDER`` as the agent set them) to
``RGT_OUTPUT_DIR``; with ``GC_TORCH_PROBE=1`` also ``torch.json``: what CUDA shows this process
(device count, names, UUIDs; no CUDA context is made). Then waits until the check writes ``STOP``
in the job directory (at most 120 s).
"""

from __future__ import annotations

import json
import os
import time

OUT = os.environ["RGT_OUTPUT_DIR"]


def publish(name: str, text: str) -> None:
    path = os.path.join(OUT, name)
    with open(path + ".tmp", "w", encoding="utf-8") as handle:
        handle.write(text)
    os.replace(path + ".tmp", path)


def probe() -> dict[str, object]:
    import torch

    count = torch.cuda.device_count()
    props = [torch.cuda.get_device_properties(i) for i in range(count)]
    return {
        "device_count": count,
        "names": [p.name for p in props],
        "uuids": [str(getattr(p, "uuid", "")) for p in props],
    }


def main() -> None:
    if os.environ.get("GC_TORCH_PROBE") == "1":
        publish("torch.json", json.dumps(probe()))
    given = os.environ.get("CUDA_VISIBLE_DEVICES", "<unset>")
    publish("cuda.txt", f"{given}|{os.environ.get('CUDA_DEVICE_ORDER', '')}")
    stop = os.path.join(os.environ["RGT_JOB_DIR"], "STOP")
    deadline = time.time() + 120
    while not os.path.exists(stop) and time.time() < deadline:
        time.sleep(0.05)


if __name__ == "__main__":
    main()
