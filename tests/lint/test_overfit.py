"""`rgt.smoke.overfit` on small real models (an MLP, a tiny CNN): each planted bug is named."""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

from rgt.smoke import OverfitReport, overfit  # noqa: E402

CLASSES = 5
torch.set_num_threads(1)  # tiny models: threads only contend with the other test workers
# One worker runs them all: the first steps warm up torch's CPU kernels, once, not per worker.
pytestmark = pytest.mark.xdist_group("torch-overfit")


class MLP(nn.Module):  # type: ignore[misc]
    def __init__(self, detach: bool = False, softmax: bool = False) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Dropout(0.1))
        self.head = nn.Linear(32, CLASSES)
        self.detach, self.softmax = detach, softmax

    def forward(self, x: Any) -> Any:
        h = self.body(x)
        out = self.head(h.detach() if self.detach else h)
        return torch.softmax(out, dim=1) if self.softmax else out


class CNN(nn.Module):  # type: ignore[misc]
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU())
        self.fc = nn.Linear(4 * 6 * 6, CLASSES)

    def forward(self, x: Any) -> Any:
        return self.fc(self.conv(x).flatten(1))


class Poisoned(MLP):
    def __init__(self) -> None:
        super().__init__()
        self.norm = nn.Identity()

    def forward(self, x: Any) -> Any:
        h = self.body(x)
        return self.head(self.norm(h) / 0.0)  # the division makes Inf, then NaN


def run(model: Any, lr: float = 0.05, shuffle: bool = False, image: bool = False) -> OverfitReport:
    torch.manual_seed(0)
    x = torch.randn(16, 1, 6, 6) if image else torch.randn(16, 8)
    y = torch.randint(0, CLASSES, (16,))
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    criterion = nn.CrossEntropyLoss()

    def step_loss() -> Any:
        labels = y[torch.randperm(len(y))] if shuffle else y
        return criterion(model(x), labels)

    return overfit(model, optimizer, step_loss, num_classes=CLASSES, steps=80)


def problems(report: OverfitReport) -> str:
    return " | ".join(report.problems)


@pytest.mark.slow  # the first conv/batch-norm steps warm up torch's CPU kernels (~15 s here)
def test_healthy_models_overfit_one_batch() -> None:
    for model, image in ((MLP(), False), (CNN(), True)):
        report = run(model, image=image)
        assert report.ok, problems(report)
        assert report.fell_by < 0.1 and report.chance_loss is not None


@pytest.mark.slow  # > 1 s on two cores
def test_detached_head_names_the_body() -> None:
    report = run(MLP(detach=True))
    assert not report.ok and report.unchanged == ("body.0",) and "body.0" in problems(report)


def test_frozen_layer_is_named() -> None:
    model = CNN()
    model.conv[0].weight.requires_grad_(False)
    report = run(model, image=True)
    assert report.unchanged == ("conv.0",) and "conv.0" in problems(report)


def test_softmax_before_cross_entropy_cannot_overfit() -> None:
    report = run(MLP(softmax=True))
    assert "outputs probabilities" in problems(report)


def test_learning_rate_zero() -> None:
    assert "no parameter changed" in problems(run(MLP(), lr=0.0))


def test_labels_shuffled_every_step() -> None:
    assert "the batch changes between steps" in problems(run(MLP(), shuffle=True))


def test_first_non_finite_module_is_named() -> None:
    report = run(Poisoned())
    assert report.non_finite == "head", problems(report)  # the first module fed the Inf


def test_report_file_for_the_cli(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "overfit.json"
    monkeypatch.setenv("RGT_SMOKE_REPORT", str(target))
    run(MLP(), lr=0.0)
    import json

    data: dict[str, Any] = json.loads(target.read_text())
    assert data["ok"] is False and data["problems"]


SCRIPT = """
import torch
from rgt import smoke

torch.set_num_threads(1)
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 5))
model[0].weight.requires_grad_(False)  # planted: frozen by mistake
optimizer = torch.optim.Adam(model.parameters(), lr=0.05)
criterion = torch.nn.CrossEntropyLoss()
x, y = torch.randn(16, 8), torch.randint(0, 5, (16,))
if smoke.requested():
    smoke.overfit(model, optimizer, lambda: criterion(model(x), y), num_classes=5, steps=60)
"""


@pytest.mark.slow  # a fresh interpreter imports torch (~30 s on the shared CI machine)
def test_cli_overfit_names_the_frozen_layer(
    tmp_path: Any, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import json
    import os
    import sys
    from pathlib import Path

    from rgt.cli import main

    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    src = str(Path(__file__).resolve().parents[2] / "src")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([src, os.environ.get("PYTHONPATH", "")]))
    with pytest.raises(SystemExit) as exit_:
        main(["smoke", "--overfit", "--json", "--", sys.executable, str(script)])
    data = json.loads(capsys.readouterr().out)
    assert exit_.value.code == 1 and data["unchanged"] == ["0"]
    script.write_text("print('no hook')\n")
    with pytest.raises(SystemExit):
        main(["smoke", "--overfit", "--json", "--", sys.executable, str(script)])
    assert "never called rgt.smoke.overfit" in json.loads(capsys.readouterr().out)["problems"][0]
