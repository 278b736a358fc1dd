"""RGT204 on an evaluation loop that records a graph and keeps each batch's loss tensor in a
running total (CheXNet's ``epochVal``), and on a loss added in place into a tensor kept
across steps (NVIDIA's BERT); none under ``no_grad``, nor for ``.item()`` values."""

from __future__ import annotations

from pathlib import Path

from tests.lint._lint import found

VAL = """
import torch


def epoch_val(model, loader, loss):
    model.eval()
    total = 0
    mean = 0
    for inputs, target in loader:
        output = model(inputs)
        loss_tensor = loss(output, target)
        mean += {kept}
        total += loss_tensor.item()
    return total, mean


def fit(model, loader, loss, epochs):
    for epoch in range(epochs):
        print(epoch_val(model, loader, loss))
"""


def test_an_evaluation_loop_that_sums_loss_tensors(tmp_path: Path) -> None:
    kept = found(tmp_path, VAL.format(kept="loss_tensor"))
    assert kept == [("RGT203", 4), ("RGT204", 11)]  # no no_grad, and what that costs here
    assert found(tmp_path, VAL.format(kept="loss_tensor.item()")) == [("RGT203", 4)]


def test_under_no_grad_nothing_is_kept(tmp_path: Path) -> None:
    code = VAL.format(kept="loss_tensor").replace(
        "def epoch_val", "@torch.no_grad()\ndef epoch_val"
    )
    assert found(tmp_path, code) == []
    caller = VAL.format(kept="loss_tensor").replace(
        "        print(epoch_val(", "        with torch.no_grad():\n            print(epoch_val("
    )
    assert found(tmp_path, caller) == []


def test_a_function_called_only_from_another_file_may_run_under_its_no_grad(
    tmp_path: Path,
) -> None:
    alone = VAL.format(kept="loss_tensor").partition("\n\ndef fit")[0] + "\n"
    assert found(tmp_path, alone) == [("RGT203", 4)]


STEP = """
import torch


def take_training_step(model, criterion, batch, stats):
    loss = criterion(model(batch["x"]), batch["y"])
    stats.device_stat("average_loss").add_({kept})
    running = torch.zeros(1)
    running.add_(loss)
    loss.backward()
"""


def test_a_loss_added_in_place_into_a_kept_tensor(tmp_path: Path) -> None:
    assert found(tmp_path, STEP.format(kept="loss")) == [("RGT204", 6)]
    assert found(tmp_path, STEP.format(kept="loss.item()")) == []  # a local total is dropped
