"""RGT203 where an evaluation is not a function named like one: a batch loop right after
``model.eval()`` with autograd on, a method that runs the model through a helper method, and
an evaluation word inside a longer name (``score_test_set``)."""

from __future__ import annotations

from pathlib import Path

from tests.lint._lint import project
from tests.lint._lint import project_found as found

FIT = """
import torch
import torch.nn as nn


class Tagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(8, 8), nn.Dropout(0.2), nn.Linear(8, 3))

    def forward(self, x):
        return self.body(x)


def fit(model, batches, held_out, epochs):
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(epochs):
        model.train()
        for x, y in batches:
            opt.zero_grad()
            loss = nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
        model.eval()
        hits = 0
        for x, y in held_out:
{guard}            scores = model(x)
{body}            hits += (scores.argmax(1) == y).sum().item()
        print(epoch, hits)
"""


def _fit(guard: str = "", body: str = "") -> str:
    return FIT.format(guard=guard, body=body)


def test_a_loop_after_eval_that_only_predicts_is_flagged(tmp_path: Path) -> None:
    assert found(project(tmp_path, {"fit.py": _fit()})) == [("fit.py", "RGT203", 26)]


def test_the_same_loop_under_no_grad_is_clean(tmp_path: Path) -> None:
    code = _fit().replace(
        "        hits = 0\n", "        hits = 0\n        torch.set_grad_enabled(False)\n"
    )
    assert found(project(tmp_path, {"fit.py": code})) == []
    wrapped = _fit().replace(
        "        for x, y in held_out:",
        "        with torch.no_grad():\n         for x, y in held_out:",
    )
    assert found(project(tmp_path / "w", {"fit.py": wrapped})) == []


def test_a_loop_after_eval_that_wants_gradients_is_left_alone(tmp_path: Path) -> None:
    """Saliency maps and adversarial examples run in eval mode with autograd on, on purpose."""
    saliency = _fit(
        guard="            x.requires_grad_()\n", body="            scores.max().backward()\n"
    )
    assert found(project(tmp_path, {"fit.py": saliency})) == []
    old = _fit().replace(
        "scores = model(x)", "scores = model(torch.autograd.Variable(x, volatile=True))"
    )
    assert found(project(tmp_path / "old", {"fit.py": old})) == []


def test_a_caller_under_no_grad_covers_the_loop(tmp_path: Path) -> None:
    code = (
        _fit()
        + "\n\ndef main(model, a, b):\n    with torch.no_grad():\n        fit(model, a, b, 3)\n"
    )
    assert found(project(tmp_path, {"fit.py": code})) == []


def test_model_back_in_training_before_the_loop_is_not_an_evaluation(tmp_path: Path) -> None:
    code = _fit().replace("        hits = 0\n", "        hits = 0\n        model.train()\n")
    assert ("fit.py", "RGT203", 26) not in found(project(tmp_path, {"fit.py": code}))


RUNNER = """
import torch


class Runner:
    def __init__(self, model, loader):
        self.model = model
        self.loader = loader
        self.opt = torch.optim.Adam(self.model.parameters())

    def _predict(self, batch):
        return self.model(batch["x"]).view(-1)

    def check_{name}(self):
        self.model.eval()
        total = 0.0
        for batch in self.loader:
            total += (self._predict(batch) - batch["y"]).abs().sum().item()
        return total
"""


def test_an_evaluation_method_running_the_model_through_a_helper(tmp_path: Path) -> None:
    root = project(tmp_path, {"runner.py": RUNNER.replace("check_{name}", "validate")})
    assert found(root) == [("runner.py", "RGT203", 13)]


def test_a_helper_under_no_grad_keeps_the_method_clean(tmp_path: Path) -> None:
    code = RUNNER.replace("check_{name}", "validate").replace(
        "    def _predict", "    @torch.no_grad()\n    def _predict"
    )
    assert found(project(tmp_path, {"runner.py": code})) == []


def test_an_evaluation_word_inside_a_longer_name(tmp_path: Path) -> None:
    code = """
    import torch


    def score_test_set(loader, model):
        labels = []
        for x, y in loader:
            labels.append(model(x).argmax(1))
        return torch.cat(labels)


    def get_val_batches(loader, model):
        return [model(x) for x, _ in loader]
    """
    assert found(project(tmp_path, {"scoring.py": code})) == [("scoring.py", "RGT203", 4)]
    named = RUNNER.replace("check_{name}", "run_test_pass")
    assert found(project(tmp_path / "r", {"runner.py": named})) == [("runner.py", "RGT203", 13)]


SCRIPT = """
import torch
import torch.nn as nn

net = nn.Sequential(nn.Linear(8, 8), nn.BatchNorm1d(8), nn.Linear(8, 2))
opt = torch.optim.SGD(net.parameters(), lr=0.1)
train_batches = [(torch.rand(4, 8), torch.tensor([0, 1, 0, 1]))]
test_batches = list(train_batches)

for epoch in range(3):
    for x, y in train_batches:
        opt.zero_grad()
        nn.functional.cross_entropy(net(x), y).backward()
        opt.step()
{switch}
with torch.no_grad():
    right = sum((net(x).argmax(1) == y).sum().item() for x, y in test_batches)
    for x, y in test_batches:
        print(net(x).argmax(1))
"""


def test_a_test_loop_after_the_scripts_training_loop_in_training_mode(tmp_path: Path) -> None:
    code = SCRIPT.format(switch="")
    assert found(project(tmp_path, {"script.py": code})) == [("script.py", "RGT201", 18)]
    clean = SCRIPT.format(switch="net.eval()")
    assert found(project(tmp_path / "clean", {"script.py": clean})) == []


def test_a_project_no_grad_decorator_or_frozen_parameters_cover_the_loop(tmp_path: Path) -> None:
    decorated = (
        _fit()
        .replace("def fit(model,", "@smart_inference_mode()\ndef fit(model,")
        .replace("import torch\n", "import torch\nfrom utils import smart_inference_mode\n", 1)
    )
    assert found(project(tmp_path, {"fit.py": decorated})) == []
    freeze = "        for p in model.parameters():\n            p.requires_grad = False\n"
    frozen = _fit().replace("        model.eval()\n", "        model.eval()\n" + freeze)
    assert found(project(tmp_path / "frozen", {"fit.py": frozen})) == []


PHASES = """
import torch
import torch.nn as nn


class Small(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Sequential(nn.Linear(8, 8), nn.Dropout(0.5), nn.Linear(8, 2))

    def forward(self, x):
        return self.fc(x)


def fit(model, loaders, optimizer, epochs):
    for epoch in range(epochs):
        for phase in ("train", "val"):
{mode}
            for x, y in loaders[phase]:
                out = model(x)
                loss = nn.functional.cross_entropy(out, y)
                if phase == "train":
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()


fit(Small(), {{}}, None, 1)
"""


def test_a_phase_loop_that_validates_in_training_mode_with_autograd_on(tmp_path: Path) -> None:
    code = PHASES.format(mode="            pass")
    found_here = found(project(tmp_path, {"phases.py": code}))
    assert found_here == [("phases.py", "RGT201", 19), ("phases.py", "RGT203", 19)]


def test_the_tutorials_phase_loop_is_clean(tmp_path: Path) -> None:
    mode = (
        "            model.train() if phase == 'train' else model.eval()\n"
        "            torch.set_grad_enabled(phase == 'train')"
    )
    assert found(project(tmp_path, {"phases.py": PHASES.format(mode=mode)})) == []


TRAINER = """
import torch
import torch.nn as nn


class Trainer:
    def __init__(self, model, batches, held_out):
        self.model, self.batches, self.held_out = model, batches, held_out

    def fit(self, steps_between_checks):
        model = self.model
        opt = torch.optim.AdamW(model.parameters())
        model.train()
        for step, (x, y) in enumerate(self.batches):
{again}
            loss = nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad()
            if step % steps_between_checks == 0:
                self.check()

    def check(self):
        return self.score(self.held_out)

    def score(self, batches):
        model = self.model
        if torch.cuda.device_count() > 1:
            model = nn.DataParallel(model)
        model.eval()
        with torch.no_grad():
            return sum((model(x).argmax(1) == y).sum().item() for x, y in batches)


net = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.1), nn.Linear(4, 2))
"""


def test_an_evaluation_two_calls_deep_leaves_the_model_in_eval_mode(tmp_path: Path) -> None:
    code = TRAINER.format(again="            pass")
    assert found(project(tmp_path, {"trainer.py": code})) == [("trainer.py", "RGT202", 29)]
    clean = TRAINER.format(again="            model.train()")
    assert found(project(tmp_path / "clean", {"trainer.py": clean})) == []
