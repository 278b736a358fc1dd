"""Loading a checkpoint holds one copy of the state in memory, not two: the data file is
memory-mapped, hashed and parsed in place. Shown in a real memory cgroup whose limit fits the
loaded state plus half of it, where reading the file into memory first is OOM-killed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from rgt.ckpt import Checkpointer
from tests.cgroups import in_cgroup, memory_cgroup, peak_bytes, remove_cgroup

STATE_BYTES = 192 << 20

HOLD_STATE = f"""
import torch, rgt.ckpt
state = [torch.ones({STATE_BYTES // 4 // 4}) for _ in range(4)]
print("held")
"""
LOAD = """
import sys
from rgt.ckpt import Checkpointer
state = Checkpointer(sys.argv[1]).load_latest()
print("loaded", sum(t.numel() for t in state["w"]))
"""
READ_THEN_LOAD = """
import sys
from rgt.ckpt import Checkpointer
from rgt.ckpt._format import parse
info = Checkpointer(sys.argv[1]).latest_info(verify=False)
data = open(info.path, "rb").read()  # the whole file in memory, then the tensors
state = parse(data)
print("loaded", sum(t.numel() for t in state["w"]))
"""


def run_limited(
    tmp_path: Path, name: str, limit: int, code: str, *args: str
) -> tuple[int, str, int | None]:
    cgroup = memory_cgroup(tmp_path / name, limit)
    try:
        argv = in_cgroup(cgroup, [sys.executable, "-c", code, *args])
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=180)
        return proc.returncode, proc.stdout, peak_bytes(cgroup)
    finally:
        remove_cgroup(cgroup)


@pytest.mark.slow
def test_load_fits_in_the_state_plus_half_of_it(tmp_path: Path) -> None:
    directory = tmp_path / "ckpt ü $(x)"
    Checkpointer(directory).save({"w": [torch.randn(STATE_BYTES // 4 // 4) for _ in range(4)]}, 1)
    for name in ("a", "b", "c"):
        (tmp_path / name).mkdir()
    # What the interpreter, torch and the loaded tensors alone take, measured the same way.
    code, out, held = run_limited(tmp_path, "a", 4 << 30, HOLD_STATE)
    assert code == 0 and "held" in out and held is not None
    limit = held + STATE_BYTES // 2
    code, out, _ = run_limited(tmp_path, "b", limit, LOAD, str(directory))
    assert code == 0 and f"loaded {STATE_BYTES // 4}" in out
    # The same limit kills a load that first reads the file into memory: the limit is tight.
    code, out, _ = run_limited(tmp_path, "c", limit, READ_THEN_LOAD, str(directory))
    assert code == -9 and "loaded" not in out
