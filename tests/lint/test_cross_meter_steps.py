"""RGT204 across files on a step method (no loop of its own: the training loop calls it)
that hands parts of its loss, scaled and in a list, to an ``AverageMeter`` of a torch-free
module that adds them to a running total kept for the whole run (SpareNet's
``self.losses.update([coarse_loss * 1000, refine_loss * 1000])``)."""

from __future__ import annotations

from pathlib import Path

from tests.lint._lint import project, project_found

FILES = {
    "setup.py": "",
    "runners/__init__.py": "",
    "runners/misc.py": """
        class AverageMeter(object):
            def __init__(self, items=None):
                self.n_items = 1 if items is None else len(items)
                self._sum = [0] * self.n_items

            def update(self, values):
                if isinstance(values, list):
                    for idx, v in enumerate(values):
                        self._sum[idx] += v
                else:
                    self._sum[0] += values
    """,
    "runners/runner.py": """
        import torch

        from runners.misc import AverageMeter


        class Runner:
            def __init__(self, model):
                self.model = model
                self.optimizer = torch.optim.Adam(model.parameters())
                self.losses = AverageMeter(["coarse", "refine"])

            def train(self, loader):
                for batch in loader:
                    self.train_step(batch)

            def train_step(self, data):
                loss, coarse_loss, refine_loss = self.model(data)
                self.optimizer.zero_grad()
                loss.backward()
                self.optimizer.step()
                self.losses.update([{coarse}, {refine}])
    """,
}


def _files(coarse: str, refine: str) -> dict[str, str]:
    runner = FILES["runners/runner.py"].format(coarse=coarse, refine=refine)
    return {**FILES, "runners/runner.py": runner}


def test_loss_parts_handed_to_a_torch_free_meter(tmp_path: Path) -> None:
    files = _files("coarse_loss * 1000", "refine_loss * 1000")
    assert project_found(project(tmp_path, files)) == [("runners/runner.py", "RGT204", 21)]


def test_numbers_handed_to_it_are_no_graph(tmp_path: Path) -> None:
    files = _files("coarse_loss.item() * 1000", "refine_loss.item() * 1000")
    assert project_found(project(tmp_path, files)) == []
