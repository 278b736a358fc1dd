"""RGT1xx: what goes into the loss, and the order of the update, as real repositories write it."""

from __future__ import annotations

from pathlib import Path

from tests.lint._lint import codes, found

SOFTMAX_MODEL_IN_TRAINER = """
import torch.nn as nn
import torch.nn.functional as F

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)

    def forward(self, x):
        x = self.fc(x)
        return F.softmax(x, dim=1)

class Trainer:
    def __init__(self):
        self.model = Net().to("cpu")
        self.criterion = nn.CrossEntropyLoss()

    def training_step(self, x, y):
        out = self.model(x)
        return self.criterion(out, y)
"""


def test_softmax_model_into_a_loss_object_built_in_init(tmp_path: Path) -> None:
    assert found(tmp_path, SOFTMAX_MODEL_IN_TRAINER) == [("RGT101", 20)]


def test_softmax_head_in_a_sequential_returned_in_a_tuple(tmp_path: Path) -> None:
    source = """
    import torch
    import torch.nn as nn

    class D(nn.Module):
        def __init__(self):
            super().__init__()
            self.adv = nn.Sequential(nn.Linear(8, 1), nn.Sigmoid())
            self.aux = nn.Sequential(nn.Linear(8, 10), nn.Softmax())

        def forward(self, x):
            return self.adv(x), self.aux(x)

    d = D()
    aux_loss = torch.nn.CrossEntropyLoss()
    real_pred, real_aux = d(x)
    loss = aux_loss(real_aux, labels)
    """
    assert found(tmp_path, source) == [("RGT101", 16)]


def test_probabilities_through_a_local_name_into_functional_loss(tmp_path: Path) -> None:
    source = """
    import torch
    from torch.nn import functional as F

    def step(model, x, y):
        logits = model(x)
        probs = torch.softmax(logits, dim=-1)
        return F.cross_entropy(probs, y), F.nll_loss(probs, y)
    """
    assert found(tmp_path, source) == [("RGT101", 7), ("RGT102", 7)]


def test_logits_log_softmax_and_softmax_for_metrics_are_fine(tmp_path: Path) -> None:
    source = """
    import torch.nn as nn
    import torch.nn.functional as F

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 3)
            self.softmax = nn.LogSoftmax(dim=1)   # named softmax, is log-softmax

        def forward(self, x):
            return self.softmax(self.fc(x))

    def step(model, x, y):
        out = model(x)
        loss = F.nll_loss(out, y)
        logits = model.fc(x)
        acc = (F.softmax(logits, 1).argmax(1) == y).float().mean()
        return loss + nn.CrossEntropyLoss()(logits, y), acc
    """
    assert codes(tmp_path, source) == set()


def test_sigmoid_into_bce_with_logits_but_not_into_bce(tmp_path: Path) -> None:
    source = """
    import torch
    import torch.nn as nn

    bce_logits = nn.BCEWithLogitsLoss()
    bce = nn.BCELoss()

    def step(model, x, y):
        out = torch.sigmoid(model(x))
        return bce_logits(out, y), bce(out, y)
    """
    assert found(tmp_path, source) == [("RGT103", 9)]


def test_adam_with_weight_decay_is_advice_adamw_is_not(tmp_path: Path) -> None:
    source = """
    import torch
    from torch.optim import Adam
    a = Adam(params, lr=1e-3, weight_decay=1e-2)
    b = torch.optim.AdamW(params, lr=1e-3, weight_decay=1e-2)
    c = torch.optim.Adam(params, lr=1e-3, weight_decay=0)
    """
    assert found(tmp_path, source) == [("RGT104", 3)]


def test_step_without_zero_grad_unless_accumulating(tmp_path: Path) -> None:
    source = """
    import torch
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in loader:
        loss = model(x).sum()
        loss.backward()
        optimizer.step()
    """
    assert found(tmp_path, source) == [("RGT105", 6)]
    accumulating = """
    import torch
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for i, (x, y) in enumerate(loader):
        (model(x).sum() / 4).backward()
        if (i + 1) % 4 == 0:
            opt.step()
    """
    assert codes(tmp_path, accumulating) == set()


def test_zero_grad_in_another_function_counts(tmp_path: Path) -> None:
    source = """
    def reset(opt):
        opt.zero_grad(set_to_none=True)

    def train(model, optimizer, loader):
        for x, y in loader:
            model(x).sum().backward()
            optimizer.step()
            reset(optimizer)
    """
    assert codes(tmp_path, source) == set()


def test_scheduler_before_optimizer_in_the_same_loop(tmp_path: Path) -> None:
    source = """
    import torch
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 10)
    plateau = torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer)
    for epoch in range(10):
        scheduler.step()
        for x, y in loader:
            optimizer.zero_grad()
            model(x).sum().backward()
            optimizer.step()
        plateau.step(val_loss)
    """
    assert found(tmp_path, source) == [("RGT106", 6)]
    fixed = source.replace("        scheduler.step()\n", "").replace(
        "        plateau.step", "        scheduler.step()\n        plateau.step"
    )
    assert codes(tmp_path, fixed) == set()


def test_a_modules_own_softmax_forward_into_log_softmax_and_nll(tmp_path: Path) -> None:
    """``y_hat = self(x)`` runs this class's forward; ``nll_loss(log_softmax(y_hat))`` on its
    softmax output is a softmax twice (lightning-bolts' LogisticRegression, #654)."""
    source = """
import torch.nn as nn
import torch.nn.functional as F

class LogisticRegression(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(4, 3)

    def forward(self, x):
        return F.softmax(self.linear(x), dim=1)

    def training_step(self, batch):
        x, y = batch
        y_hat = self(x)
        return F.nll_loss(F.log_softmax(y_hat, dim=1), y)
"""
    assert found(tmp_path, source) == [("RGT101", 15)]
    assert (
        codes(tmp_path, source.replace("F.softmax(self.linear(x), dim=1)", "self.linear(x)"))
        == set()
    )
    assert codes(
        tmp_path,
        source.replace("F.nll_loss(F.log_softmax(y_hat, dim=1), y)", "F.cross_entropy(y_hat, y)"),
    ) == {"RGT101"}


def test_zero_grad_once_before_the_loop_even_when_a_clip_helper_gets_the_optimizer(
    tmp_path: Path,
) -> None:
    """``optimizer.zero_grad()`` once, before the loop; ``utils.clip_gradient(optimizer, c)``
    in it clips, never clears (TextClassificationBenchmark#20). A helper that may clear
    (``reset(optimizer)``) still silences the rule."""
    source = """
import torch
import utils

optimizer = torch.optim.Adam(model.parameters())
optimizer.zero_grad()
for batch in loader:
    loss = loss_fun(model(batch.text), batch.label)
    loss.backward()
    utils.clip_gradient(optimizer, 0.5)
    optimizer.step()
"""
    assert found(tmp_path, source) == [("RGT105", 10)]
    assert (
        codes(tmp_path, source.replace("utils.clip_gradient(optimizer", "utils.reset(optimizer"))
        == set()
    )
