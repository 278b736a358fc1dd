"""Train/eval mode rules follow the object, not the name, and ask whether the model has any
layer the modes change: a model without dropout or batch norm behaves the same in both, and a
``net`` built afresh in an evaluation method is not the ``net`` another method trains."""

from __future__ import annotations

from pathlib import Path

from tests.lint._lint import project
from tests.lint._lint import project_found as found

CELL = """
import torch
import torch.nn as nn


class Cell(nn.Module):
    def __init__(self):
        super().__init__()
        self.i2h = nn.Linear(4, 4){extra}

    def forward(self, x):
        return torch.tanh(self.i2h(x))


model = Cell()
optimizer = torch.optim.Adam(model.parameters())


def test():
    model.eval()
    with torch.no_grad():
        return model(torch.rand(2, 4)).sum().item()


for i in range(100):
    optimizer.zero_grad()
    loss = model(torch.rand(2, 4)).sum()
    loss.backward()
    optimizer.step()
    if i % 10 == 0:
        test()
"""


def test_a_model_without_mode_bound_layers_may_stay_in_eval_mode(tmp_path: Path) -> None:
    plain = project(tmp_path / "plain", {"train.py": CELL.format(extra="")})
    assert found(plain) == []
    dropout = "\n        self.drop = nn.Dropout(0.1)"
    with_dropout = project(tmp_path / "dropout", {"train.py": CELL.format(extra=dropout)})
    assert found(with_dropout) == [("train.py", "RGT202", 20)]


def test_a_model_whose_layers_come_from_an_imported_module_still_counts(tmp_path: Path) -> None:
    layers = "import torch.nn as nn\n\nBLOCK = nn.BatchNorm1d\n"
    code = CELL.format(extra="\n        self.norm = BLOCK(4)").replace(
        "import torch.nn as nn\n", "import torch.nn as nn\nfrom layers import BLOCK\n"
    )
    root = project(tmp_path, {"layers.py": layers, "train.py": code})
    assert found(root) == [("train.py", "RGT202", 21)]


def test_a_model_from_a_library_zoo_may_have_mode_bound_layers(tmp_path: Path) -> None:
    code = CELL.format(extra="").replace("model = Cell()", "model = timm.create_model('resnet18')")
    root = project(tmp_path, {"train.py": "import timm\n" + code})
    assert [c for _, c, _ in found(root)] == ["RGT202"]


NET = """
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 2)
        self.drop = nn.Dropout(0.1)

    def forward(self, x):
        return self.fc(self.drop(x))
"""
RUNNER = """
import torch
from net import Net


class Runner:
    def fit(self, loader, held_out):
        model = Net()
        model.train()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for epoch in range(3):
            for x, y in loader:
                opt.zero_grad()
                torch.nn.functional.mse_loss(model(x), y).backward()
                opt.step()
            self.score(held_out, {passed})

    def score(self, loader, {param}):
        {made}
        model.eval()
        out = []
        for x, _ in loader:
            with torch.no_grad():
                out.append(model(x))
        return out
"""


def test_an_evaluation_that_builds_its_own_model_leaves_the_trained_one_alone(
    tmp_path: Path,
) -> None:
    fresh = RUNNER.format(
        passed="model.state_dict()",
        param="weights",
        made="model = Net().cuda()\n        model.load_state_dict(weights)",
    )
    root = project(tmp_path / "fresh", {"net.py": NET, "runner.py": fresh})
    assert found(root) == []
    passed = RUNNER.format(passed="model", param="model", made="model = model.cuda()")
    root = project(tmp_path / "passed", {"net.py": NET, "runner.py": passed})
    assert found(root) == [("runner.py", "RGT202", 19)]


EVALUATE = """
import torch


def evaluate(model, loader):
    total = 0.0
    with torch.no_grad():
        for x, y in loader:
            total += (model(x).argmax(1) == y).float().mean().item()
    return total
"""
CALLER = """
import torch
import torch.nn as nn
from metrics import evaluate


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 2)
        self.drop = nn.Dropout(0.1)

    def forward(self, x):
        return self.fc(self.drop(x))


def main(loader, held_out):
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(3):
        model.train()
        for x, y in loader:
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
        {mode}
        print(evaluate(model, held_out))
"""


def test_an_evaluation_function_whose_callers_all_set_eval_mode_is_left_alone(
    tmp_path: Path,
) -> None:
    both = {"metrics.py": EVALUATE, "train.py": CALLER.format(mode="model.eval()")}
    assert found(project(tmp_path / "eval", both)) == []
    one = {**both, "finetune.py": CALLER.format(mode="pass")}
    # One caller runs it in training mode: the finding is that call's, saying where it leads.
    assert found(project(tmp_path / "one-not", one)) == [("finetune.py", "RGT201", 26)]


KEPT = """
import torch
import torchvision


class Learner:
    def __init__(self, loader, held_out):
        self.model = torchvision.models.resnet18(num_classes=2)
        self.opt = torch.optim.Adam(self.model.parameters())
        self.loader, self.held_out = loader, held_out

    def _valid_epoch(self):
        {mode}
        hits = 0
        for x, y in self.held_out:
            {guard}hits += (self.model(x).argmax(1) == y).sum().item()
        return hits

    def fit(self, epochs):
        for epoch in range(epochs):
            self.model.train()
            for x, y in self.loader:
                self.opt.zero_grad()
                torch.nn.functional.cross_entropy(self.model(x), y).backward()
                self.opt.step()
            self._valid_epoch()
"""


def test_an_evaluation_method_running_a_model_kept_on_self_is_checked(tmp_path: Path) -> None:
    bare = KEPT.format(mode="pass", guard="")
    assert {c for _, c, _ in found(project(tmp_path / "bare", {"learn.py": bare}))} == {
        "RGT201",
        "RGT203",
    }
    guarded = KEPT.format(mode="self.model.eval()", guard="with torch.no_grad(): ")
    assert found(project(tmp_path / "guarded", {"learn.py": guarded})) == []


SHARED_EPOCH = """
import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 2)
        self.drop = nn.Dropout(0.1)

    def forward(self, x):
        return self.fc(self.drop(x))


def run_epoch(batches, model, loss_compute):
    total = 0.0
    for x, y in batches:
        total += loss_compute(model(x), y)
    return total


def main(train_batches, valid_batches, compute, opt):
    model = Net()
    for epoch in range(10):
        model.train()
        run_epoch(train_batches, model, compute(opt))
        model.eval()
        {guard}run_epoch(valid_batches, model, compute(None))
"""


def test_a_shared_epoch_function_run_after_eval_without_no_grad(tmp_path: Path) -> None:
    bare = SHARED_EPOCH.format(guard="")
    assert found(project(tmp_path / "bare", {"train.py": bare})) == [("train.py", "RGT203", 28)]
    guarded = SHARED_EPOCH.format(guard="with torch.no_grad():\n            ")
    assert found(project(tmp_path / "guarded", {"train.py": guarded})) == []


HF_LOOP = """
import torch
from transformers import AutoModelForSequenceClassification{extra}


class Classifier:
    def __init__(self, name):
        self.model = AutoModelForSequenceClassification.from_pretrained(name)

    def fit(self, batches, held_out, opt, every=10):
        self.model.train()
        for i, (x, y) in enumerate(batches):
            opt.zero_grad()
            self.model(x, labels=y).loss.backward()
            opt.step()
            if i % every == 0:
                self.validate(held_out)

    def validate(self, held_out):
        self.model.eval()
        with torch.no_grad():
            return sum(self.model(x, labels=y).loss.item() for x, y in held_out)
"""


def test_a_transformers_model_in_the_projects_own_loop_is_checked(tmp_path: Path) -> None:
    own = project(tmp_path / "own", {"clf.py": HF_LOOP.format(extra="")})
    assert [c for _, c, _ in found(own)] == ["RGT202"]
    # With Hugging Face's Trainer in the module, the framework is taken to own the modes.
    trainer = project(tmp_path / "trainer", {"clf.py": HF_LOOP.format(extra=", Trainer")})
    assert found(trainer) == []


def test_every_mode_bound_layer_kind_counts(tmp_path: Path) -> None:
    video = """
import torch.nn as nn


class Video(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv3d(3, 8, 3)
        self.norm = nn.{layer}(8)

    def forward(self, x):
        return self.norm(self.conv(x)).mean((2, 3, 4))
"""
    script = """
import torch
from video import Video
from metrics import evaluate

model = Video()
print(evaluate(model, []))
"""
    for layer in ("BatchNorm3d", "SyncBatchNorm", "InstanceNorm3d"):
        files = {"video.py": video.format(layer=layer), "metrics.py": EVALUATE, "run.py": script}
        hits = [c for _, c, _ in found(project(tmp_path / layer, files))]
        assert hits == ([] if layer == "InstanceNorm3d" else ["RGT201"]), layer


def test_no_grad_two_calls_up_covers_the_evaluation(tmp_path: Path) -> None:
    code = """
import torch


def test_clip(clip, model):
    out = []
    for patch in clip:
        out.append(model(patch))
    return out


def test_video(video, model):
    return [test_clip(clip, model) for clip in video]


def main(videos, model):
    model.eval()
    for video in videos:
        {guard}test_video(video, model)
"""
    guarded = code.format(guard="with torch.no_grad():\n            ")
    assert found(project(tmp_path / "guarded", {"run.py": guarded})) == []
    bare = code.format(guard="")
    assert found(project(tmp_path / "bare", {"run.py": bare})) == [("run.py", "RGT203", 4)]
