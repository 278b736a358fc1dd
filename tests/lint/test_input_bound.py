"""Input-bound detection on real torch DataLoaders: a Dataset that sleeps in ``__getitem__``
(the steps wait on data: ``input_bound``) vs a compute-bound model (no event), in the overfit
smoke and, through ``timed_loader`` and the log's Data/Time meters, in the agent's sentinel."""

from __future__ import annotations

import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from rgt.agent.probes import input_wait

torch = pytest.importorskip("torch")
nn = torch.nn
SRC = str(Path(__file__).resolve().parents[2] / "src")
torch.set_num_threads(1)


class Slow(torch.utils.data.Dataset):  # type: ignore[misc]
    """Each sample costs 10 ms to "read" (a network file system, a JPEG decode)."""

    def __len__(self) -> int:
        return 64

    def __getitem__(self, index: int) -> Any:
        time.sleep(0.01)
        return torch.randn(8), index % 5


def _overfit(model: Any, loader: Any, x: Any, y: Any) -> Any:
    from rgt.smoke import overfit

    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    criterion = nn.CrossEntropyLoss()
    return overfit(model, optimizer, lambda: criterion(model(x), y), steps=5, loader=loader)


@pytest.mark.slow  # torch's first DataLoader and autograd use warm up for ~10 s under load
def test_a_sleeping_dataset_is_input_bound_in_the_overfit_smoke() -> None:
    loader = torch.utils.data.DataLoader(Slow(), batch_size=4)
    report = _overfit(nn.Linear(8, 5), loader, torch.randn(4, 8), torch.tensor([0, 1, 2, 3]))
    assert report.input_wait["input_bound"] and report.input_wait["wait_pct"] > 80
    assert report.input_wait["samples"] == 8
    (event,) = report.events
    assert event["kind"] == "input_bound" and event["severity"] == "warning"
    assert "num_workers" in event["next"] and "local disk" in event["next"]
    assert report.to_json()["events"][0]["kind"] == "input_bound"


def test_a_compute_bound_model_gets_no_event() -> None:
    # ~20 ms of compute a step: one stalled draw on a loaded machine stays far below half
    data = torch.utils.data.TensorDataset(torch.randn(512, 1024), torch.randint(0, 5, (512,)))
    loader = torch.utils.data.DataLoader(data, batch_size=64)
    model = nn.Sequential(*(nn.Linear(1024, 1024) for _ in range(4)), nn.Linear(1024, 5))
    x, y = next(iter(loader))
    report = _overfit(model, loader, x, y)
    assert not report.input_wait["input_bound"] and report.input_wait["wait_pct"] < 50
    assert report.events == ()


def test_the_meters_log_lines_are_read() -> None:
    # pytorch/examples imagenet ProgressMeter, and the MetricLogger of DETR/DeiT/DINO
    log = (
        "Epoch: [0][ 10/500]\tTime  0.512 ( 0.498)\tData  0.401 ( 0.390)\tLoss 6.9 (6.9)\n"
        "Epoch: [0]  [ 20/500]  eta: 0:04:01  lr: 0.000100  loss: 2.1  time: 0.5120  "
        "data: 0.0040  max mem: 1200\n"
        "Time elapsed: 30 s, data: cifar10\n"
    )
    assert input_wait.from_log(log) == [(0.401, 0.512), (0.004, 0.512)]


PIPELINE = """
import time
from rgt.smoke import timed_loader

def batches():  # a loader: each batch takes {sleep} s to read
    for index in range(60):
        time.sleep({sleep})
        yield index

for batch in timed_loader(batches(), every=10):
    time.sleep({compute})  # the step's forward, backward and optimizer step
print("done", flush=True)
"""


def _job(make_job: Any, job_id: str, sleep: float, compute: float) -> Any:
    script = textwrap.dedent(PIPELINE.format(sleep=sleep, compute=compute))
    job = make_job(job_id).write(script)
    job.start(PYTHONPATH=SRC, RGT_WATCH_PROBE_S="0.2")
    assert job.finish(timeout=60) == 0, job.agent_log()
    return job


@pytest.mark.slow  # two real jobs under the agent, ~8 s
def test_the_agent_raises_input_bound_from_timed_loader_records(make_job: Any) -> None:
    waits = _job(make_job, "waits", sleep=0.02, compute=0.002)
    (event,) = waits.events("input_bound")
    assert event["severity"] == "warning" and event["detail"]["source"] == "metrics.jsonl"
    assert event["detail"]["wait_pct"] >= 50 and "prefetch_factor" in event["next"]
    computes = _job(make_job, "computes", sleep=0.002, compute=0.02)
    assert computes.events("input_bound") == []
    records = (computes.dir / "outputs" / "metrics.jsonl").read_text().splitlines()
    assert len(input_wait.from_records(records)) >= 5  # it did measure, and judged compute-bound


@pytest.mark.slow  # > 1 s on two cores
def test_the_agent_reads_the_data_time_of_the_log(make_job: Any) -> None:
    lines = [f"Epoch: [0][{i}/9]\\tTime  0.300 ( 0.300)\\tData  0.250 ( 0.250)" for i in range(9)]
    body = "\n".join(f'print("{line}", flush=True)' for line in lines)
    job = make_job("log").write(f"{body}\nimport time\ntime.sleep(1)\n")
    job.start(RGT_WATCH_PROBE_S="0.2")
    assert job.finish(timeout=60) == 0, job.agent_log()
    (event,) = job.events("input_bound")
    assert event["detail"]["source"] == "log" and event["detail"]["wait_pct"] == 83.3
