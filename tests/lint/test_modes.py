"""RGT2xx: train/eval modes, gradients during evaluation, loss tensors kept alive."""

from __future__ import annotations

from pathlib import Path

from tests.lint._lint import codes, found

MODEL = """
import torch
import torch.nn as nn

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(4, 8), nn.Dropout(0.5), nn.Linear(8, 2))

    def forward(self, x):
        return self.body(x)
"""
EVALUATE = """
def evaluate(model, loader):
    correct = 0
    with torch.no_grad():
        for x, y in loader:
            correct += (model(x).argmax(1) == y).sum().item()
    return correct
"""


def test_evaluation_without_eval_mode_when_the_model_has_dropout(tmp_path: Path) -> None:
    source = MODEL + EVALUATE
    assert found(tmp_path, source) == [("RGT201", 12)]
    assert (
        codes(tmp_path, source.replace("    correct = 0", "    model.eval()\n    correct = 0"))
        == set()
    )
    no_dropout = source.replace("nn.Dropout(0.5), ", "")
    assert codes(tmp_path, no_dropout) == set()


def test_eval_inside_the_training_loop_and_never_train_again(tmp_path: Path) -> None:
    source = (
        MODEL
        + """
def validate(model, loader):
    model.eval()
    with torch.no_grad():
        return sum(model(x).sum().item() for x, _ in loader)

def fit(model, opt, loader):
    for epoch in range(10):
        for x, y in loader:
            opt.zero_grad()
            model(x).sum().backward()
            opt.step()
        validate(model, loader)
"""
    )
    assert found(tmp_path, source) == [("RGT202", 13)]
    fixed = source.replace(
        "    for epoch in range(10):\n", "    for epoch in range(10):\n        model.train()\n"
    )
    assert codes(tmp_path, fixed) == set()
    # a linear probe: the backbone is frozen, so eval mode in training is the protocol
    for frozen in ("p.requires_grad = False", "p.requires_grad_(False)"):
        probe = source + f"\nfor p in model.parameters():\n    {frozen}\n"
        assert codes(tmp_path, probe) == set()


def test_evaluation_without_no_grad(tmp_path: Path) -> None:
    source = (
        MODEL
        + """
def test(model, loader):
    model.eval()
    total = 0.0
    for x, y in loader:
        total += model(x).sum().item()
    return total
"""
    )
    assert found(tmp_path, source) == [("RGT203", 12)]
    decorated = source.replace("def test(", "@torch.no_grad()\ndef test(")
    assert codes(tmp_path, decorated) == set()
    called_under = source + "\nwith torch.inference_mode():\n    test(Net(), [])\n"
    assert codes(tmp_path, called_under) == set()


def test_running_total_of_loss_tensors(tmp_path: Path) -> None:
    source = """
    import torch
    def train(model, opt, loader):
        total_loss = 0
        for x, y in loader:
            opt.zero_grad()
            loss = model(x).sum()
            loss.backward()
            opt.step()
            total_loss += loss
        return total_loss
    """
    assert found(tmp_path, source) == [("RGT204", 9)]
    assert (
        codes(tmp_path, source.replace("total_loss += loss", "total_loss += loss.item()")) == set()
    )


def test_a_list_of_losses_back_propagated_together_is_meant(tmp_path: Path) -> None:
    source = """
    import torch
    def train(model, opt, loader):
        losses = []
        for x, y in loader:
            loss = model(x).sum()
            loss.backward()
            losses.append(loss)
        torch.stack(losses).sum().backward()
    """
    assert codes(tmp_path, source) == set()


def test_lightning_modules_are_left_to_the_framework(tmp_path: Path) -> None:
    source = (
        MODEL
        + """
import lightning as L

class Lit(L.LightningModule):
    def validation_step(self, batch, idx):
        return self.model(batch[0]).sum()

def test(model, loader):
    for x, y in loader:
        model(x)
"""
    )
    assert codes(tmp_path, source) == set()


def test_a_loop_calling_only_builtins_or_functions_is_not_an_evaluation(tmp_path: Path) -> None:
    # rgt's own lint/data.py `_names_eval`: a helper named like an evaluation, no model in it
    helper = (
        MODEL
        + """
def names_eval(names):
    for name in names:
        if isinstance(name, str) and len(name) > 3:
            return True
    return False
"""
    )
    assert codes(tmp_path, helper) == set()
    with_model = helper.replace("isinstance(name, str)", "net(name)").replace(
        "names)", "names, net)"
    )
    assert codes(tmp_path, with_model) == {
        "RGT201",
        "RGT203",
    }
    # detectron2's do_test(cfg, model): inference_on_dataset (imported) sets the modes itself
    delegates = helper.replace("isinstance(name, str)", "inference_on_dataset(model, name)")
    delegates = delegates.replace("names)", "names, model)")
    assert codes(tmp_path, "from evaluation import inference_on_dataset\n" + delegates) == set()
    defined_here = delegates + "\ndef inference_on_dataset(model, data):\n    return 0\n"
    assert codes(tmp_path, defined_here) == set()
    assert codes(tmp_path, delegates.replace("inference_on_dataset(", "model(")) == {
        "RGT201",
        "RGT203",
    }
    # fairseq's eval_f0_error(samples, distortion_fn): a metric passed in, not a model
    metric = delegates.replace("inference_on_dataset(model, name)", "distortion_fn(name)")
    assert codes(tmp_path, metric.replace("names, model)", "names, distortion_fn)")) == set()


def test_an_evaluation_every_few_steps_that_leaves_the_model_in_eval_mode(
    tmp_path: Path,
) -> None:
    """Training mode set once per epoch, an evaluation every 100 steps switching it off: the
    rest of the epoch trains with dropout off (pytorch-fcn, ncsn before their fixes)."""
    source = (
        MODEL
        + """
class Trainer:
    def __init__(self, model, opt, loader):
        self.model, self.opt, self.loader = model, opt, loader

    def validate(self):
        self.model.eval()
        with torch.no_grad():
            return sum(self.model(x).sum().item() for x, _ in self.loader)

    def train_epoch(self):
        self.model.train()
        for i, (x, y) in enumerate(self.loader):
            if i % 100 == 0:
                self.validate()
            self.opt.zero_grad()
            self.model(x).sum().backward()
            self.opt.step()
"""
    )
    assert found(tmp_path, source) == [("RGT202", 17)]
    # the evaluation puts the model back, or the loop does after it: no finding
    back = source.replace("            return sum(", "            total = sum(").replace(
        "for x, _ in self.loader)\n", "for x, _ in self.loader)\n        self.model.train()\n"
    )
    assert codes(tmp_path, back) == set()
    after = source.replace(
        "self.validate()\n", "self.validate()\n                self.model.train()\n"
    )
    assert codes(tmp_path, after) == set()
    # a teacher kept in eval mode is not the model trained here
    teacher = source.replace("self.model.eval()", "self.teacher.eval()")
    assert "RGT202" not in codes(tmp_path, teacher)


def test_a_validation_loop_after_eval_then_train_runs_in_training_mode(tmp_path: Path) -> None:
    """``model.eval()`` then ``model.train()`` before the validation batches: the last call
    wins (MultiBench before its fix); without the stray ``train()`` no finding."""
    source = """
import torch

def fit(encoder, opt, train_loader, valid_loader, epochs):
    model = torch.nn.Sequential(encoder, torch.nn.Linear(8, 2))
    for epoch in range(epochs):
        model.train()
        for x, y in train_loader:
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
        model.eval()
        with torch.no_grad():
            model.train()
            for x, y in valid_loader:
                out = model(x)
"""
    assert found(tmp_path, source) == [("RGT201", 15)]
    assert codes(tmp_path, source.replace("            model.train()\n", "")) == set()


def test_an_evaluation_method_handed_the_training_model_through_an_alias(tmp_path: Path) -> None:
    """UDA_pytorch#10: ``model = self.model.to(device)`` after ``self.model.train()``; every few
    steps ``self.eval(get_acc, None, model)`` runs ``evaluate(model, batch)`` (a function the
    caller passed in) with no ``.eval()`` on that path."""
    source = (
        MODEL
        + """
class Trainer:
    def __init__(self, model, optimizer, loader, device):
        self.model, self.optimizer, self.loader, self.device = model, optimizer, loader, device

    def train(self, get_loss, get_acc):
        self.model.train()
        model = self.model.to(self.device)
        for step, batch in enumerate(self.loader):
            self.optimizer.zero_grad()
            get_loss(model, batch).backward()
            self.optimizer.step()
            if step % 100 == 0:
                results = self.eval(get_acc, None, model)

    def eval(self, evaluate, model_file, model):
        results = []
        for batch in self.loader:
            with torch.no_grad():
                results.append(evaluate(model, batch))
        return results
"""
    )
    # The call's finding (it says where the model was put in training mode), not also the
    # definition's.
    assert found(tmp_path, source) == [("RGT201", 24)]
    fixed = source.replace("        results = []\n", "        model.eval()\n        results = []\n")
    assert "RGT201" not in codes(tmp_path, fixed)
