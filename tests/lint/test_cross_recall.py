"""Cross-file rules follow more of the shapes real projects take: a model class named in lower
case, a transform class inside ``Compose``, a ``zero_grad`` between ``backward`` and ``step``,
an evaluation reached through a trainer's method."""

from __future__ import annotations

from pathlib import Path

from tests.lint._lint import project
from tests.lint._lint import project_found as found

DISCRIMINATOR = """
import torch.nn as nn


class _disc(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        self.body = nn.Linear(32, 64)
        self.score = nn.Linear(64, 1)
        self.aux = nn.Linear(64, classes)
        self.softmax = nn.{last}()
        self.sigmoid = nn.Sigmoid()

    def forward(self, x):
        h = self.body(x)
        return self.sigmoid(self.score(h)), self.softmax(self.aux(h))
"""
GAN = """
import torch
import torch.nn as nn
from nets import _disc

disc = _disc()
bce = nn.BCELoss()
nll = nn.NLLLoss()
opt = torch.optim.Adam(disc.parameters())
for x, y in []:
    opt.zero_grad()
    real, classes = disc(x)
    loss = bce(real, torch.ones(len(x))) + nll(classes, y)
    loss.backward()
    opt.step()
"""


def test_a_lower_case_model_class_returning_softmax_in_a_tuple_is_followed(
    tmp_path: Path,
) -> None:
    bug = {"nets.py": DISCRIMINATOR.format(last="Softmax"), "gan.py": GAN}
    assert found(project(tmp_path / "bug", bug)) == [("gan.py", "RGT102", 12)]
    fixed = {"nets.py": DISCRIMINATOR.format(last="LogSoftmax"), "gan.py": GAN}
    assert found(project(tmp_path / "fixed", fixed)) == []


STEPS = """
import torch


class Trainer:
    def __init__(self, model, accelerator):
        self.model, self.accelerator = model, accelerator
        self.opt = torch.optim.Adam(model.parameters())

    def fit(self, batches):
        for x in batches:
            with self.accelerator.autocast():
                loss = self.model(x).mean()
                self.accelerator.backward(loss)
            print(loss)
            {first}
            {second}
"""


def test_zero_grad_between_backward_and_step_is_found(tmp_path: Path) -> None:
    bug = STEPS.format(first="self.opt.zero_grad()", second="self.opt.step()")
    assert found(project(tmp_path / "bug", {"trainer.py": bug})) == [("trainer.py", "RGT105", 16)]
    fixed = STEPS.format(first="self.opt.step()", second="self.opt.zero_grad()")
    assert found(project(tmp_path / "fixed", {"trainer.py": fixed})) == []


def test_clearing_another_optimizer_before_its_own_backward_is_fine(tmp_path: Path) -> None:
    gan = """
    import torch

    def fit(gen, disc, batches):
        opt_g = torch.optim.Adam(gen.parameters())
        opt_d = torch.optim.Adam(disc.parameters())
        for x in batches:
            opt_d.zero_grad()
            disc(x).mean().backward()
            opt_d.step()
            opt_g.zero_grad()
            disc(gen(x)).mean().backward()
            opt_g.step()
    """
    assert found(project(tmp_path, {"gan.py": gan})) == []


LAYERS = """
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(3, 8), nn.BatchNorm1d(8), nn.Linear(8, 2))

    def forward(self, x):
        return self.body(x)
"""
RUN = """
import torch
from models.net import Net


def fit(loader, model, opt):
    model.train()
    for x, y in loader:
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()


def validate(loader, model):
    total = 0.0
    with torch.no_grad():
        for x, y in loader:
            {mode}total += (model(x).argmax(1) == y).float().sum().item()
    return total
"""


def test_a_script_in_a_subfolder_reaches_the_models_at_the_projects_top(tmp_path: Path) -> None:
    files = {"models/__init__.py": "", "models/net.py": LAYERS, "run/train.py": RUN}
    root = project(tmp_path / "project", {**files, "run/train.py": RUN.format(mode="")})
    assert found(root) == [("run/train.py", "RGT201", 13)]
    # The script alone, or a folder below the project's top: nothing above it is read.
    assert found(root / "run") == []


def test_an_evaluation_that_sets_training_mode_itself_chose_it(tmp_path: Path) -> None:
    code = RUN.format(mode="").replace(
        "    total = 0.0\n    with", "    model.train()\n    total = 0.0\n    with"
    )
    root = project(
        tmp_path, {"models/__init__.py": "", "models/net.py": LAYERS, "run/train.py": code}
    )
    assert found(root) == []


ROLLOUT = """
import torch


def rollout(env, policy, episodes):
    policy.eval()
    total = 0.0
    for _ in range(episodes):
        with torch.no_grad():
            total += env.step(policy(env.reset()))
    return total


def score_one(env, policy, episodes):
    return rollout(env, policy, episodes)


def score_all(envs, policy, episodes):
    return [score_one(env, policy, episodes) for env in envs]
"""
STEP = """
def update(policy, batch, opt):
    {mode}
    opt.zero_grad()
    policy(batch).mean().backward()
    opt.step()
"""
LOOP = """
import torch
import torch.nn as nn
from rollouts import score_all
{imports}


def train(batches, envs, every=100):
    policy = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.1))
    opt = torch.optim.Adam(policy.parameters())
    policy.train()
    for step, batch in enumerate(batches):
        update(policy, batch, opt)
        if step % every == 0:
            score_all(envs, policy, episodes=3)
"""


def test_an_evaluation_elsewhere_that_leaves_the_model_in_eval_mode(tmp_path: Path) -> None:
    inline = LOOP.format(imports="\n\n" + STEP.format(mode="pass"))
    bug = {"rollouts.py": ROLLOUT, "train.py": inline}
    assert found(project(tmp_path / "bug", bug)) == [("train.py", "RGT202", 22)]
    # The training step, in a third file, puts the model back in training mode each time.
    resets = {
        "rollouts.py": ROLLOUT,
        "steps.py": STEP.format(mode="policy.train()"),
        "train.py": LOOP.format(imports="from steps import update"),
    }
    assert found(project(tmp_path / "resets", resets)) == []


FEATURES = """
import torch
import torch.nn as nn


class Backbone(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3)
        self.bn = nn.BatchNorm2d(8)

    def features(self, x):
        return self.bn(self.conv(x)).mean((2, 3))


def activations(batch, backbone):
    with torch.no_grad():
        return backbone.features(batch)
"""
SCORE = """
import torch
from metrics import Backbone, activations


def score(loader, generator):
    backbone = Backbone()
    backbone.load_state_dict(torch.load("backbone.pt"))
    {mode}
    generator.eval()
    feats = []
    for x in loader:
        feats.append(activations(x, backbone))
    return feats
"""


def test_a_model_run_through_a_method_by_a_helper_called_per_batch(tmp_path: Path) -> None:
    bug = {"metrics.py": FEATURES, "score.py": SCORE.format(mode="pass")}
    assert found(project(tmp_path / "bug", bug)) == [("score.py", "RGT201", 12)]
    fixed = {"metrics.py": FEATURES, "score.py": SCORE.format(mode="backbone.eval()")}
    assert found(project(tmp_path / "fixed", fixed)) == []


def test_an_object_that_is_not_a_module_run_through_its_methods_is_left_alone(
    tmp_path: Path,
) -> None:
    plain = FEATURES.replace("class Backbone(nn.Module):", "class Backbone:").replace(
        "super().__init__()", "pass"
    )
    files = {"metrics.py": plain, "score.py": SCORE.format(mode="pass")}
    assert found(project(tmp_path, files)) == []


def test_a_train_call_after_the_evaluation_loop_only_restores_the_mode(tmp_path: Path) -> None:
    restores = RUN.format(mode="").replace(
        "    return total\n", "    model.train()\n    return total\n"
    )
    files = {"models/__init__.py": "", "models/net.py": LAYERS, "run/train.py": restores}
    assert found(project(tmp_path, files)) == [("run/train.py", "RGT201", 13)]


TRANSFORM = """
import numpy as np
import torch


class Cutout:
    def __init__(self, length):
        self.length = length{made}

    def __call__(self, img):
        y = {draw}(img.size(1))
        img[:, max(y - self.length, 0): y + self.length] = 0
        return img
"""
LOADER = """
import torch
from torchvision import datasets, transforms
from aug import Cutout

augment = transforms.Compose([transforms.RandomCrop(32, padding=4), transforms.ToTensor()])
augment.transforms.append(Cutout(8))
train = datasets.CIFAR10(root="data", train=True, transform=augment)
loader = torch.utils.data.DataLoader(train, batch_size=128, shuffle=True, num_workers=4)
"""


def test_a_transform_appended_to_compose_is_followed_to_the_loader(tmp_path: Path) -> None:
    held = TRANSFORM.format(
        made="\n        self.rng = np.random.RandomState(0)", draw="self.rng.randint"
    )
    root = project(tmp_path / "held", {"aug.py": held, "train.py": LOADER})
    assert found(root) == [("train.py", "RGT305", 8)]
    # NumPy's global RNG: reseeded per worker since torch 1.9, so only with an older pin.
    plain = {"aug.py": TRANSFORM.format(made="", draw="np.random.randint"), "train.py": LOADER}
    assert found(project(tmp_path / "global", plain)) == []
    pinned = {**plain, "requirements.txt": "torch==1.4.0\n"}
    assert found(project(tmp_path / "pinned", pinned)) == [("train.py", "RGT305", 8)]
    only_torchvision = LOADER.replace("augment.transforms.append(Cutout(8))\n", "")
    files = {**pinned, "train.py": only_torchvision}
    assert found(project(tmp_path / "torchvision", files)) == []
