"""RGT204 on the loss a backward pass ran on, however it is reached: through a dict that
holds it, ``accelerator.backward(loss)``, or the list it was summed from; and not once the
dict's entry is replaced by a detached copy."""

from __future__ import annotations

from pathlib import Path

from tests.lint._lint import project
from tests.lint._lint import project_found as found

DICT = """
import torch


def run_epoch(net, batches, opt):
    history = []
    for batch in batches:
        opt.zero_grad()
        result = net.step_outputs(batch)
        result["objective"].backward()
        opt.step()
{detach}        history.append(result)
    return torch.stack([h["objective"] for h in history]).mean().item()
"""


def test_a_dict_holding_the_loss_kept_every_step(tmp_path: Path) -> None:
    code = DICT.format(detach="")
    assert found(project(tmp_path, {"loop.py": code})) == [("loop.py", "RGT204", 11)]


def test_the_dict_with_its_loss_detached_is_clean(tmp_path: Path) -> None:
    detach = '        result["objective"] = result["objective"].detach()\n'
    assert found(project(tmp_path, {"loop.py": DICT.format(detach=detach)})) == []


ACCELERATED = """
import torch
from accelerate import Accelerator


def fit(model, loader, opt):
    accelerator = Accelerator()
    model, opt, loader = accelerator.prepare(model, opt, loader)
    running = 0.0
    for x, y in loader:
        loss = torch.nn.functional.mse_loss(model(x), y)
        accelerator.backward(loss)
        opt.step()
        opt.zero_grad()
        running += {kept}
    return running
"""


def test_a_loss_back_propagated_by_accelerate_and_kept(tmp_path: Path) -> None:
    code = ACCELERATED.format(kept="loss")
    assert found(project(tmp_path, {"fit.py": code})) == [("fit.py", "RGT204", 14)]
    clean = ACCELERATED.format(kept="loss.detach()")
    assert found(project(tmp_path / "clean", {"fit.py": clean})) == []


def test_the_parts_a_loss_was_summed_from_hold_its_graph(tmp_path: Path) -> None:
    code = """
    import torch


    def train_epoch(model, loader, opt):
        parts_seen = []
        for batch in loader:
            opt.zero_grad()
            parts = model.loss_terms(batch)
            total = sum(parts) if isinstance(parts, tuple) else parts
            total.backward()
            opt.step()
            parts_seen.append(parts)
        return parts_seen
    """
    assert found(project(tmp_path, {"epoch.py": code})) == [("epoch.py", "RGT204", 12)]


METER = """
import torch


class RunningMean:
    def __init__(self):
        self.total, self.count = 0.0, 0

    def add(self, value, n=1):
        self.total += value * n
        self.count += n


def train(model, loader, opt):
    meter = RunningMean()
    for x, y in loader:
        opt.zero_grad()
        loss = torch.nn.functional.l1_loss(model(x), y)
        loss.backward()
        opt.step()
        meter.add({given}, x.size(0))
    return meter.total / meter.count
"""


def test_a_loss_handed_to_a_running_mean_that_keeps_it(tmp_path: Path) -> None:
    code = METER.format(given="loss")
    assert found(project(tmp_path, {"meter.py": code})) == [("meter.py", "RGT204", 20)]
    clean = METER.format(given="loss.item()")
    assert found(project(tmp_path / "clean", {"meter.py": clean})) == []


TRACKER = {
    "setup.py": "",
    "tools/__init__.py": "",
    "tools/tracking.py": """
        import torch


        class LossBook:
            def __init__(self, keys):
                self.sums = dict.fromkeys(keys, 0)

            def record(self, losses):
                for key in losses:
                    self.sums[key] += {kept}
    """,
    "train.py": """
        import torch
        from tools.tracking import LossBook


        def fit(model, loader, opt):
            book = LossBook(["total", "l1"])
            for batch in loader:
                opt.zero_grad()
                losses = model.losses(batch)
                losses["total"].backward()
                opt.step()
                book.record(losses)
            return {k: torch.as_tensor(v) for k, v in book.sums.items()}
    """,
}


def test_a_loss_dict_handed_to_another_files_tracker(tmp_path: Path) -> None:
    files = {
        **TRACKER,
        "tools/tracking.py": TRACKER["tools/tracking.py"].format(kept="losses[key]"),
    }
    assert found(project(tmp_path, files)) == [("train.py", "RGT204", 12)]
    kept = "losses[key].item()"
    clean = {**TRACKER, "tools/tracking.py": TRACKER["tools/tracking.py"].format(kept=kept)}
    assert found(project(tmp_path / "clean", clean)) == []
