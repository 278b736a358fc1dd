"""RGT204 on a loss kept across steps through a meter, a logger or a dict entry: the meter's
``update`` adds what a graph-keeping call made of its argument (``allreduce(val.cpu())``), the
loop hands it an entry of the dict the backward ran on (``meter.update(out["loss"])``), a list
keeps such an entry; never once the meter or the loop makes a number of it first."""

from __future__ import annotations

from pathlib import Path

from tests.lint._lint import project
from tests.lint._lint import project_found as found

METER = """
import torch
import torch.distributed as dist


class Meter:
    def __init__(self):
        self.sum = torch.tensor(0.0)
        self.n = 0

    def update(self, val, n=1):
{first}        self.sum += dist_mean(val{cut}) * n
        self.n += n


def dist_mean(t):
    dist.all_reduce(t)
    return t / dist.get_world_size()


def train(model, loader, opt, criterion):
    meter = Meter()
    for x, y in loader:
        opt.zero_grad()
        out = criterion(model(x), y)
        out["loss"].backward()
        opt.step()
        meter.update(out["loss"])
    return meter.sum / meter.n
"""


def test_a_meter_fed_the_loss_entry_of_the_dict_backward_ran_on(tmp_path: Path) -> None:
    code = METER.format(first="", cut=".cpu()")
    assert found(project(tmp_path, {"train.py": code})) == [("train.py", "RGT204", 27)]


def test_a_meter_that_detaches_or_makes_a_number_first_is_clean(tmp_path: Path) -> None:
    detached = METER.format(first="", cut=".detach().cpu()")
    assert found(project(tmp_path / "a", {"train.py": detached})) == []
    number = "        if torch.is_tensor(val):\n            val = val.detach().item()\n"
    assert found(project(tmp_path / "b", {"train.py": METER.format(first=number, cut="")})) == []


LISTED = """
import torch


def fit(model, batches, opt, metric):
    for epoch in range(3):
        losses = []
        for batch in batches:
            output = model(batch)
            opt.zero_grad()
            output[metric].backward()
            opt.step()
            losses.append(output[metric]{cut})
        print(torch.mean(torch.stack(losses)))
"""


def test_a_list_keeping_the_entry_backward_ran_on(tmp_path: Path) -> None:
    code = LISTED.format(cut="")
    assert found(project(tmp_path, {"fit.py": code})) == [("fit.py", "RGT204", 12)]
    clean = LISTED.format(cut=".detach()")
    assert found(project(tmp_path / "b", {"fit.py": clean})) == []


UNTRACKED = """
import torch


def train(model, loader, opt, criterion):
    total = torch.zeros(2)
    for x, y in loader:
        out = model(x)
        loss = criterion(out, y)
        loss.backward()
        opt.step()
        opt.zero_grad()
{guard}            total[0] += loss * out.size(0)
    return total
"""


def test_a_total_kept_under_no_grad_records_no_graph(tmp_path: Path) -> None:
    guarded = UNTRACKED.format(guard="        with torch.no_grad():\n")
    assert found(project(tmp_path / "a", {"train.py": guarded})) == []
    bare = UNTRACKED.format(guard="        if True:\n")
    assert found(project(tmp_path / "b", {"train.py": bare})) == [("train.py", "RGT204", 13)]


HISTORY = """
import torch


def fit(model, loader, opt, criterion):
    history = {{"train_loss": []}}
    for x, y in loader:
        opt.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        opt.step()
        history["train_loss"].append(loss{cut})
    return history
"""


def test_a_list_in_a_dict_keeping_the_loss(tmp_path: Path) -> None:
    code = HISTORY.format(cut="")
    assert found(project(tmp_path / "a", {"fit.py": code})) == [("fit.py", "RGT204", 11)]
    clean = HISTORY.format(cut=".item()")
    assert found(project(tmp_path / "b", {"fit.py": clean})) == []


REBOUND = """
import torch


def fit(model, loader, opt, criterion):
    total = 0
    for x, y in loader:
        opt.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        opt.step()
        total = total + loss{cut}
    return total
"""


def test_a_total_rebound_to_itself_plus_the_loss(tmp_path: Path) -> None:
    code = REBOUND.format(cut="")
    assert found(project(tmp_path / "a", {"fit.py": code})) == [("fit.py", "RGT204", 11)]
    clean = REBOUND.format(cut=".item()")
    assert found(project(tmp_path / "b", {"fit.py": clean})) == []
