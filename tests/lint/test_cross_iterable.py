"""RGT303 across files: an IterableDataset in one module whose ``__iter__`` never asks which
worker runs it, a DataLoader with workers over it in another; clean once it shards by
``get_worker_info()``."""

from __future__ import annotations

from pathlib import Path

from tests.lint._lint import project
from tests.lint._lint import project_found as found

STREAM = """
from torch.utils.data import IterableDataset{extra}


class Lines(IterableDataset):
    def __init__(self, path):
        self.path = path

    def __iter__(self):
        for i, line in enumerate(open(self.path)):
{shard}            yield line.split()
"""
SHARD = """            info = get_worker_info()
            if info is not None and i % info.num_workers != info.id:
                continue
"""
LOADER = """
from torch.utils.data import DataLoader

from data.stream import Lines


def build_iterator(path, num_workers=4):
    dataset = Lines(path)
    return DataLoader(dataset=dataset, batch_size=8, num_workers=num_workers)
"""


def test_an_unsharded_stream_read_by_workers_in_another_module(tmp_path: Path) -> None:
    files = {"data/__init__.py": "", "data/stream.py": STREAM.format(extra="", shard=""),
             "tasks.py": LOADER}  # fmt: skip
    assert found(project(tmp_path, files)) == [("tasks.py", "RGT303", 8)]


def test_a_stream_sharded_by_worker_is_clean(tmp_path: Path) -> None:
    stream = STREAM.format(extra=", get_worker_info", shard=SHARD)
    files = {"data/__init__.py": "", "data/stream.py": stream, "tasks.py": LOADER}
    assert found(project(tmp_path, files)) == []
