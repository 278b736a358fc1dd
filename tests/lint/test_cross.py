"""Findings that span files: each rule follows an object from the file that defines it to the
file that misuses it, through the ways a project imports itself, and says what it followed."""

from __future__ import annotations

from pathlib import Path

import pytest

from rgt.lint import lint_paths
from rgt.lint._model import detail_of

MODEL = """
import torch.nn as nn
import torch.nn.functional as F


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(10, 3)
        self.drop = nn.Dropout(0.5)

    def forward(self, x):
        return F.softmax(self.fc(self.drop(x)), dim=1)
"""
TRAIN_ON = """
import torch
import torch.nn as nn
{imports}

model = Net()
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for epoch in range(10):
    for x, y in loader:
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
"""


REEXPORT = "from .net import Net\n"
SYS_PATH = "import sys, os\nsys.path.insert(0, os.path.join(os.path.dirname(__file__), 'lib'))\n"
PYPROJECT = "[project]\nname = 'p'\n"


def project(root: Path, files: dict[str, str]) -> Path:
    for name, code in files.items():
        target = root / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(code)
    return root


def found(root: Path, *paths: str, cache: bool = False) -> list[tuple[str, str, str]]:
    report = lint_paths([str(root / p) for p in paths] or [str(root)], cache=cache)
    return [(str(Path(f.path).relative_to(root)), f.code, detail_of(f)) for f in report.findings]


def codes(root: Path, *paths: str) -> set[tuple[str, str]]:
    return {(path, code) for path, code, _ in found(root, *paths)}


@pytest.mark.parametrize(
    ("layout", "imports"),
    [
        ({"models/net.py": MODEL}, "from models.net import Net"),
        ({"models/__init__.py": REEXPORT, "models/net.py": MODEL}, "from models import Net"),
        ({"lib/models/net.py": MODEL}, SYS_PATH + "from models.net import Net"),
        ({"pyproject.toml": PYPROJECT, "src/p/net.py": MODEL}, "from p.net import Net"),
    ],
    ids=["module", "package-reexport", "sys-path-insert", "src-layout"],
)  # fmt: skip
def test_a_models_softmax_is_followed_to_the_loss_on_its_output(
    tmp_path: Path, layout: dict[str, str], imports: str
) -> None:
    root = project(tmp_path, {**layout, "train.py": TRAIN_ON.format(imports=imports)})
    hits = [f for f in found(root) if f[1] == "RGT101"]
    assert [(f[0], f[1]) for f in hits] == [("train.py", "RGT101")]
    assert "`Net.forward` (" in hits[0][2] and "net.py:6) ends in softmax" in hits[0][2]
    # Named alone, the script still reads the module it imports.
    assert ("train.py", "RGT101") in codes(root, "train.py")


def test_a_model_passed_to_a_function_elsewhere_is_followed_to_its_loss(tmp_path: Path) -> None:
    root = project(
        tmp_path,
        {
            "model.py": MODEL,
            "engine.py": (
                "import torch.nn as nn\n\n\ndef fit(net, loader, opt):\n"
                "    crit = nn.CrossEntropyLoss()\n    for x, y in loader:\n"
                "        opt.zero_grad()\n        out = net(x)\n        loss = crit(out, y)\n"
                "        loss.backward()\n        opt.step()\n"
            ),
            "main.py": (
                "import torch\nimport engine\nfrom model import Net\n\nnet = Net()\n"
                "engine.fit(net, loader, torch.optim.SGD(net.parameters(), lr=0.1))\n"
            ),
        },
    )
    hits = [f for f in found(root) if f[1] == "RGT101"]
    assert [(f[0], f[1]) for f in hits] == [("engine.py", "RGT101")]
    assert "main.py:6 passes that model to `fit` as `net`" in hits[0][2]


def test_logits_from_the_model_are_left_alone(tmp_path: Path) -> None:
    logits = MODEL.replace("F.softmax(self.fc(self.drop(x)), dim=1)", "self.fc(self.drop(x))")
    train = TRAIN_ON.format(imports="from models.net import Net")
    root = project(tmp_path, {"models/net.py": logits, "train.py": train})
    assert found(root) == []


DATASET = """
import numpy as np
import torch
from torch.utils.data import Dataset


class ListDataset(Dataset):
    def __init__(self, n):
        self.n = n
        {init}

    def __getitem__(self, i):
        x = torch.zeros(3)
        if {draw} < 0.5:
            x = x.flip(0)
        return x

    def __len__(self):
        return self.n
"""
LOADER = """
import torch
from torch.utils.data import DataLoader
from utils.datasets import ListDataset

loader = DataLoader(ListDataset(100), batch_size=4, shuffle=True, num_workers=8{extra})
for epoch in range(3):
    for x in loader:
        pass
"""


def rng_project(root: Path, init: str, draw: str, extra: str = "", pin: str = "") -> Path:
    files = {
        "utils/datasets.py": DATASET.format(init=init, draw=draw),
        "train.py": LOADER.format(extra=extra),
    }
    if pin:
        files["requirements.txt"] = f"numpy\n{pin}\n"
    return project(root, files)


def test_an_rng_object_the_dataset_holds_is_followed_to_the_multi_worker_loader(
    tmp_path: Path,
) -> None:
    root = rng_project(tmp_path, "self.rng = np.random.default_rng(0)", "self.rng.random()")
    hits = [f for f in found(root) if f[1] == "RGT305"]
    assert [(f[0], f[1]) for f in hits] == [("train.py", "RGT305")]
    detail = hits[0][2]
    assert "Dataset `ListDataset` (utils/datasets.py:7)" in detail
    assert "np.random.default_rng made once in __init__ (utils/datasets.py:10)" in detail
    assert "has 8 workers and no worker_init_fn" in detail


def test_a_worker_init_fn_or_no_workers_is_no_finding(tmp_path: Path) -> None:
    init, draw = "self.rng = np.random.default_rng(0)", "self.rng.random()"
    root = rng_project(tmp_path / "a", init, draw, extra=", worker_init_fn=lambda i: None")
    assert found(root) == []
    root = rng_project(tmp_path / "b", init, draw)
    (root / "train.py").write_text(
        (root / "train.py").read_text().replace("num_workers=8", "num_workers=0")
    )
    assert found(root) == []


@pytest.mark.parametrize(
    ("pin", "flagged"), [("torch==1.4.0", True), ("torch>=1.4", False), ("", False)]
)
def test_numpys_global_rng_counts_only_where_torch_is_kept_below_1_9(
    tmp_path: Path, pin: str, flagged: bool
) -> None:
    root = rng_project(tmp_path, "pass", "np.random.random()", pin=pin)
    hits = [f for f in found(root) if f[1] == "RGT305"]
    assert bool(hits) is flagged
    if flagged:
        assert "requirements.txt: torch==1.4.0 keeps torch below 1.9" in hits[0][2]


EVALUATE = """
import torch


def evaluate(model, loader):
    correct = 0
    with torch.no_grad():
        for x, y in loader:
            correct += (model(x).argmax(1) == y).sum().item()
    return correct
"""


@pytest.mark.parametrize(
    ("before_call", "flagged"), [("model.train()", True), ("model.eval()", False)]
)
def test_an_evaluation_elsewhere_reached_in_training_mode(
    tmp_path: Path, before_call: str, flagged: bool
) -> None:
    train = (
        "import torch\nfrom models.net import Net\nfrom tools.metrics import evaluate\n\n"
        "model = Net()\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\nfor epoch in range(3):\n"
        "    model.train()\n    for x, y in loader:\n        opt.zero_grad()\n"
        "        model(x).sum().backward()\n        opt.step()\n"
        f"    {before_call}\n    acc = evaluate(model, val_loader)\n"
    )
    root = project(
        tmp_path, {"models/net.py": MODEL, "tools/metrics.py": EVALUATE, "train.py": train}
    )
    # (The evaluation's own module never calls .eval(): the single-file rule speaks there.)
    hits = [f for f in found(root) if f[1] == "RGT201" and f[0] == "train.py"]
    assert bool(hits) is flagged
    if flagged:
        assert "`evaluate` (tools/metrics.py:5) runs `model`" in hits[0][2]
        assert "`model.train()` at line 13" in hits[0][2]


def test_a_trainer_method_that_never_clears_gradients_is_followed_from_the_loop(
    tmp_path: Path,
) -> None:
    trainer = (
        "import torch\n\n\nclass Trainer:\n    def __init__(self, model, optimizer):\n"
        "        self.model = model\n        self.optimizer = optimizer\n\n"
        "    def train_step(self, batch):\n        loss = self.model(batch).mean()\n"
        "        loss.backward()\n        self.optimizer.step()\n        return loss.item()\n"
    )
    run = (
        "import torch\nfrom trainer import Trainer\n\nmodel = torch.nn.Linear(3, 1)\n"
        "runner = Trainer(model, torch.optim.SGD(model.parameters(), lr=0.1))\n"
        "for batch in loader:\n    runner.train_step(batch)\n"
    )
    root = project(tmp_path, {"trainer.py": trainer, "run.py": run})
    hits = [f for f in found(root) if f[1] == "RGT105"]
    assert [(f[0], f[1]) for f in hits] == [("trainer.py", "RGT105")]
    assert "`Trainer.train_step` steps `self.optimizer`" in hits[0][2] and "run.py:7" in hits[0][2]
    cleared = run.replace(
        "    runner.train_step(batch)", "    model.zero_grad()\n    runner.train_step(batch)"
    )
    (root / "run.py").write_text(cleared)
    assert [f for f in found(root) if f[1] == "RGT105"] == []


def test_a_sampler_built_in_a_helper_is_followed_to_the_epoch_loop(tmp_path: Path) -> None:
    data = (
        "from torch.utils.data import DataLoader\n"
        "from torch.utils.data.distributed import DistributedSampler\n\n\n"
        "def build_loader(dataset):\n    sampler = DistributedSampler(dataset, shuffle=True)\n"
        "    return DataLoader(dataset, batch_size=8, sampler=sampler), sampler\n"
    )  # fmt: skip
    train = (
        "import torch\nfrom data import build_loader\n\nloader, sampler = build_loader(ds)\n"
        "for epoch in range(10):\n    for x in loader:\n        pass\n"
    )
    root = project(tmp_path, {"data.py": data, "train.py": train})
    hits = [f for f in found(root) if f[1] == "RGT302"]
    assert [(f[0], f[1]) for f in hits] == [("data.py", "RGT302")]
    assert "the epoch loop at train.py:5" in hits[0][2]
    fixed = train.replace(
        "    for x in loader:", "    sampler.set_epoch(epoch)\n    for x in loader:"
    )
    (root / "train.py").write_text(fixed)
    assert found(root) == []


def test_the_cache_keeps_what_crosses_files_and_noqa_silences_it(tmp_path: Path) -> None:
    train = TRAIN_ON.format(imports="from models.net import Net")
    root = project(tmp_path, {"models/net.py": MODEL, "train.py": train})
    first = found(root, cache=True)
    assert found(root, cache=True) == first and [f[1] for f in first] == ["RGT101"]
    text = (root / "train.py").read_text()
    (root / "train.py").write_text(
        text.replace("criterion(model(x), y)", "criterion(model(x), y)  # rgt: noqa RGT101")
    )
    assert found(root, cache=True) == []


def test_an_evaluation_method_run_after_a_training_method_leaves_the_model_in_training(
    tmp_path: Path,
) -> None:
    trainer = (
        "import torch\nfrom models.net import Net\n\n\nclass Runner:\n"
        "    def __init__(self, model, loaders):\n"
        "        self.model = model\n        self.loaders = loaders\n\n"
        "    def _train_epoch(self, opt):\n        self.model.train()\n"
        "        for x, y in self.loaders[0]:\n            opt.zero_grad()\n"
        "            self.model(x).sum().backward()\n            opt.step()\n\n"
        "    def _validate(self):\n        with torch.no_grad():\n"
        "            for x, y in self.loaders[1]:\n                self.model(x)\n\n"
        "    def fit(self, opt, epochs):\n        for epoch in range(epochs):\n"
        "            self._train_epoch(opt)\n            self._validate()\n\n\n"
        "Runner(Net(), loaders).fit(opt, 3)\n"
    )
    root = project(tmp_path, {"models/net.py": MODEL, "runner.py": trainer})
    hits = [f for f in found(root) if f[1] == "RGT201"]
    assert [(f[0], f[1]) for f in hits] == [("runner.py", "RGT201")]
    assert "`self._train_epoch()` at line 24 leaves it so" in hits[0][2]
    fixed = trainer.replace(
        "        with torch.no_grad():", "        self.model.eval()\n        with torch.no_grad():"
    )
    (root / "runner.py").write_text(fixed)
    assert [f for f in found(root) if f[1] == "RGT201"] == []


def test_a_test_batch_run_inside_the_training_loop_in_training_mode(tmp_path: Path) -> None:
    train = (
        "import torch\nimport torch.nn.functional as F\nfrom models.net import Net\n\n"
        "net = Net()\nopt = torch.optim.SGD(net.parameters(), lr=0.1)\n"
        "for epoch in range(3):\n    for i, (x, y) in enumerate(loader):\n"
        "        opt.zero_grad()\n        loss = F.nll_loss(net(x), y)\n        loss.backward()\n"
        "        opt.step()\n        if i % 10 == 0:\n            tx, ty = next(iter(testloader))\n"
        "            test_loss = F.nll_loss(net(tx), ty)\n"
    )
    files = {"setup.py": "", "models/net.py": MODEL, "train.py": train}
    root = project(tmp_path, files)
    hits = [f for f in found(root) if f[1] == "RGT201"]
    assert [(f[0], f[1]) for f in hits] == [("train.py", "RGT201")]
    assert "`net` runs on test data inside the training loop" in hits[0][2]
    fixed = train.replace("            tx, ty =", "            net.eval()\n            tx, ty =")
    (root / "train.py").write_text(fixed)
    assert [f for f in found(root) if f[1] == "RGT201"] == []


def test_softmax_returned_as_part_of_a_tuple_is_followed_to_the_loss(tmp_path: Path) -> None:
    """``return probs, classes`` in model.py, ``probs, classes = model(x)`` then
    ``CrossEntropyLoss(probs, y)`` in train.py (cnn-text-classification-pytorch#1)."""
    model = MODEL.replace(
        "return F.softmax(self.fc(self.drop(x)), dim=1)",
        "probs = F.softmax(self.fc(self.drop(x)), dim=1)\n        return probs, probs.argmax(1)",
    )
    train = TRAIN_ON.format(imports="from model import Net").replace(
        "loss = criterion(model(x), y)",
        "probs, classes = model(x)\n        loss = criterion(probs, y)",
    )
    root = project(tmp_path, {"model.py": model, "train.py": train})
    hits = found(root)
    assert [(p, c) for p, c, _ in hits] == [("train.py", "RGT101")]
    assert "part 0 of a tuple" in hits[0][2] and "model.py:6" in hits[0][2]
    # the other part (the classes) fed to a loss is not probabilities
    other = train.replace("criterion(probs, y)", "criterion(classes, y)")
    root = project(tmp_path / "other", {"model.py": model, "train.py": other})
    assert found(root) == []


def test_an_evaluation_method_inherited_from_a_base_class_in_another_file(
    tmp_path: Path,
) -> None:
    """``BaseAlgo.get_test_accuracy`` (algo.py) runs ``self.phi`` under ``no_grad`` and never
    calls ``.eval()``; ``Hybrid(BaseAlgo).train`` (hybrid.py) calls it right after training
    (robustdg#30). The torchvision ResNet, imported inside a method, has batch norm."""
    algo = """
import torch


class BaseAlgo:
    def __init__(self, loader):
        self.loader = loader
        self.phi = self.get_model()

    def get_model(self):
        from models.resnet import get_resnet
        return get_resnet()

    def get_test_accuracy(self):
        correct = 0
        for x, y in self.loader:
            with torch.no_grad():
                correct += (self.phi(x).argmax(1) == y).sum().item()
        return correct
"""
    hybrid = """
import torch
from .algo import BaseAlgo


class Hybrid(BaseAlgo):
    def train(self, opt, epochs):
        for epoch in range(epochs):
            self.phi.train()
            for x, y in self.loader:
                opt.zero_grad()
                torch.nn.functional.cross_entropy(self.phi(x), y).backward()
                opt.step()
            self.get_test_accuracy()
"""
    resnet = "import torchvision\n\n\ndef get_resnet():\n    return torchvision.models.resnet18()\n"
    files = {
        "pyproject.toml": PYPROJECT,
        "algorithms/__init__.py": "",
        "algorithms/algo.py": algo,
        "algorithms/hybrid.py": hybrid,
        "models/__init__.py": "",
        "models/resnet.py": resnet,
    }
    hits = found(project(tmp_path, files))
    assert [(p, c) for p, c, _ in hits] == [("algorithms/hybrid.py", "RGT201")]
    assert "BaseAlgo.get_test_accuracy" in hits[0][2] and "self.phi.train()" in hits[0][2]
    fixed = {
        **files,
        "algorithms/algo.py": algo.replace(
            "        correct = 0\n", "        self.phi.eval()\n        correct = 0\n"
        ),
    }
    assert found(project(tmp_path / "fixed", fixed)) == []
    # a model of this project with neither dropout nor batch norm: nothing to say
    plain = {
        **files,
        "models/resnet.py": resnet.replace(
            "torchvision.models.resnet18()", "torch.nn.Linear(4, 2)"
        ),
    }
    assert found(project(tmp_path / "plain", plain)) == []


def test_a_softmax_module_handed_to_a_wrapper_with_its_criterion(tmp_path: Path) -> None:
    """skorch's way: ``NeuralNet(MyModule, criterion=nn.CrossEntropyLoss)`` trains the
    module's output with that loss (ray-skorch#18); a module returning logits is fine."""
    train = (
        "import torch\nfrom torch import nn\nfrom skorch import NeuralNet\n"
        "from model import Net\n\n"
        "net = NeuralNet(Net, criterion=nn.CrossEntropyLoss, optimizer=torch.optim.Adam)\n"
        "net.fit(X, y)\n"
    )
    root = project(tmp_path, {"model.py": MODEL, "train.py": train})
    assert [(p, c) for p, c, _ in found(root)] == [("train.py", "RGT101")]
    logits = MODEL.replace("F.softmax(self.fc(self.drop(x)), dim=1)", "self.fc(self.drop(x))")
    assert found(project(tmp_path / "logits", {"model.py": logits, "train.py": train})) == []
    nll = train.replace("nn.CrossEntropyLoss", "nn.NLLLoss")
    assert [
        c for _, c, _ in found(project(tmp_path / "nll", {"model.py": MODEL, "train.py": nll}))
    ] == ["RGT102"]
