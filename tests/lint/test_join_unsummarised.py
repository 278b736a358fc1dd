"""A file the cross-file rules reach through an import but never summarised (a model module
with no training words is not worth parsing) is a neighbour with nothing to say, not a crash:
`rgt lint` raised ``KeyError`` on such a project in the sampler rule."""

from __future__ import annotations

import textwrap
from pathlib import Path

from rgt.lint import lint_paths

MODEL = """
    import torch.nn as nn


    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 2)

        def forward(self, x):
            return self.fc(x)
"""

EVALUATE = """
    from torch.utils.data import DataLoader
    from torch.utils.data.distributed import DistributedSampler

    from model import Net


    def main(dataset):
        sampler = DistributedSampler(dataset, shuffle=True)
        loader = DataLoader(dataset, batch_size=4, sampler=sampler)
        model = Net()
        for x in loader:
            print(model(x))
"""


def test_a_neighbour_without_a_summary_is_passed_over(tmp_path: Path) -> None:
    (tmp_path / "model.py").write_text(textwrap.dedent(MODEL))
    (tmp_path / "evaluate.py").write_text(textwrap.dedent(EVALUATE))
    report = lint_paths([str(tmp_path)], cache=False)
    assert [(Path(f.path).name, f.code) for f in report.findings if f.code == "RGT302"] == []
    assert {Path(n.path).name for n in report.skipped} == set()
