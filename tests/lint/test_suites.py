"""A test suite is not training code: no rule speaks inside its test functions (pytorch-image-
models' tests/ gave 43 RGT201/RGT203 and 7 RGT4xx/RGT5xx findings there before)."""

from __future__ import annotations

import textwrap
from pathlib import Path

from tests.lint._lint import codes, found
from tests.lint.test_modes import MODEL

SUITE_TEST = (
    MODEL
    + """
def test_outputs_have_two_classes(loader):
    model = Net()
    for x, y in loader:
        assert model(x).shape[1] == 2
"""
)

# timm's tests/test_checkpoint_loading.py and test_optim.py, cut down
SAVES_AND_STEPS = """
import torch

def test_resume_checkpoint(tmp_path):
    folder = tmp_path
    model = torch.nn.Linear(4, 2).cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(3):
        loss = model(torch.randn(8, 4).cuda()).sum()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        print(loss.item())
        torch.save({"state_dict": model.state_dict()}, folder / "checkpoint.pth")
"""


def test_a_test_suite_is_not_an_evaluation_loop(tmp_path: Path) -> None:
    in_suite = "import pytest\n" + SUITE_TEST
    assert codes(tmp_path, in_suite) == {"RGT201", "RGT203"}  # in train.py: an evaluation
    assert found(tmp_path, in_suite, name="test_model.py") == []
    assert found(tmp_path, in_suite, name="model_test.py") == []
    no_arguments = SUITE_TEST.replace("(loader):", "():\n    loader = [(1, 2)]")
    assert found(tmp_path, no_arguments, name="test_model.py") == []
    with_fixture = SUITE_TEST.replace("(loader):", "(tmp_path, loader):")
    assert found(tmp_path, with_fixture, name="test_model.py") == []


def test_no_rule_speaks_inside_a_suite_test(tmp_path: Path) -> None:
    assert codes(tmp_path, SAVES_AND_STEPS) == {"RGT401", "RGT402", "RGT501"}
    assert found(tmp_path, SAVES_AND_STEPS, name="test_checkpoint_loading.py") == []
    # a helper nested in a test is in the test
    head, body = SAVES_AND_STEPS.split("(tmp_path):\n")
    nested = f"{head}(tmp_path):\n    def run():\n{textwrap.indent(body, '    ')}    run()\n"
    assert codes(tmp_path, nested) == {"RGT401", "RGT402", "RGT501"}
    assert found(tmp_path, nested, name="test_ckpt.py") == []
    # code outside test functions (a script named test_train.py) is checked as usual
    module_level = SAVES_AND_STEPS.replace("def test_resume_checkpoint(tmp_path):", "if True:")
    module_level = module_level.replace("folder = tmp_path", "folder = Path('runs')")
    in_test_file = {c for c, _ in found(tmp_path, module_level, name="test_train.py")}
    assert in_test_file == {"RGT401", "RGT402", "RGT501"}


def test_a_whole_pytest_module_is_a_suite(tmp_path: Path) -> None:
    # timm's tests/test_hub.py: a helper that is not a test, in a module that imports pytest
    helper = SAVES_AND_STEPS.replace(
        "def test_resume_checkpoint(tmp_path):", "def _train(tmp_path):"
    )
    assert {c for c, _ in found(tmp_path, helper, name="test_hub.py")} == {
        "RGT401",
        "RGT402",
        "RGT501",
    }
    assert found(tmp_path, "import pytest\n" + helper, name="test_hub.py") == []
    assert found(tmp_path, "import unittest\n" + helper, name="hub_test.py") == []
    # pytorch_geometric's test/transforms/test_to_device.py: a custom fixture, a tests folder
    (tmp_path / "test").mkdir()
    assert found(tmp_path, helper, name="test/test_hub.py") == []


def test_an_evaluation_script_named_test_still_evaluates(tmp_path: Path) -> None:
    # no pytest, and the function takes the model: `test_net.py`'s `test_net(cfg, model)`
    script = SUITE_TEST.replace("test_outputs_have_two_classes(loader)", "test_net(loader, n)")
    assert {c for c, _ in found(tmp_path, script, name="test_net.py")} == {"RGT201", "RGT203"}
