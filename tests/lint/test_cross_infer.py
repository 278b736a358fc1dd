"""RGT203 on an evaluation function that puts the model it is handed in eval mode and runs
the model's own prediction method (SAM-Adapter's ``model.infer(inp)``) with autograd on."""

from __future__ import annotations

from pathlib import Path

from tests.lint._lint import found

EVAL = """
import torch


def eval_psnr(loader, model):
    model.eval()
    total = 0
{guard}    for batch in loader:
{pad}        pred = torch.sigmoid(model.infer(batch["inp"]))
{pad}        total += (pred > 0.5).float().mean().item()
    return total
"""


def test_an_evaluation_running_the_models_infer_method(tmp_path: Path) -> None:
    assert found(tmp_path, EVAL.format(guard="", pad="")) == [("RGT203", 4)]
    guarded = EVAL.format(guard="    with torch.no_grad():\n", pad="    ")
    assert found(tmp_path, guarded.replace("    for batch", "        for batch")) == []
