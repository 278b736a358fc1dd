"""RGT106 where the optimizer's step is one call away from the loop that steps the scheduler:
a loop that steps the schedule and then calls a function of the module that steps a global
optimizer (NeuralRecon's ``main.py``), and a schedule stepped in a loop over tasks of its own
before the batch loop that steps an optimizer named ``optimizer_cls`` (uda_release), and one
optimizer handed for the two a training function steps (ESRGAN-PyTorch's
``train(..., g_optimizer, g_optimizer, ...)``)."""

from __future__ import annotations

from pathlib import Path

from tests.lint._lint import found

GLOBAL = """
import torch

model = torch.nn.Linear(4, 2)
optimizer = torch.optim.Adam(model.parameters())


def train(loader, epochs):
    lr_scheduler = torch.optim.lr_scheduler.MultiStepLR(optimizer, [3, 6])
    for epoch in range(epochs):
{first}
        for sample in loader:
            train_sample(sample)
{last}


def train_sample(sample):
    optimizer.zero_grad()
    loss = model(sample).sum()
    loss.backward()
    optimizer.step()
"""


def test_a_schedule_stepped_before_a_call_that_steps_the_optimizer(tmp_path: Path) -> None:
    code = GLOBAL.format(first="        lr_scheduler.step()", last="")
    assert found(tmp_path, code) == [("RGT106", 10)]
    clean = GLOBAL.format(first="", last="        lr_scheduler.step()")
    assert found(tmp_path, clean) == []


def test_a_schedule_under_a_comparing_if_is_its_authors_choice(tmp_path: Path) -> None:
    guarded = "        if epoch > 0:\n            lr_scheduler.step()"
    assert found(tmp_path, GLOBAL.format(first=guarded, last="")) == []


TASKS = """
import torch


def train(net, tasks, criterion, optimizer_cls, loader):
    for task in tasks:
{first}
    for inputs, labels in loader:
        optimizer_cls.zero_grad()
        loss = criterion(net(inputs), labels)
        loss.backward()
        optimizer_cls.step()
{last}
"""


def test_a_schedule_stepped_in_a_loop_of_its_own_before_the_batch_loop(tmp_path: Path) -> None:
    code = TASKS.format(first="        task.scheduler.step()", last="")
    assert found(tmp_path, code) == [("RGT106", 6)]
    clean = TASKS.format(first="        task.head.train()", last="    for task in tasks:\n"
                         "        task.scheduler.step()")  # fmt: skip
    assert found(tmp_path, clean) == []


GAN = """
import torch


def train(g_model, d_model, loader, g_optimizer, d_optimizer, scaler):
    for lr, hr in loader:
        g_optimizer.zero_grad()
        sr = g_model(lr)
        scaler.scale((sr - hr).abs().mean()).backward()
        scaler.step(g_optimizer)
        d_optimizer.zero_grad()
        scaler.scale(d_model(sr.detach()).mean()).backward()
        scaler.step(d_optimizer)
        scaler.update()


def main(g_model, d_model, loader, epochs):
    g_optimizer = torch.optim.Adam(g_model.parameters())
    d_optimizer = torch.optim.Adam(d_model.parameters())
    d_scheduler = torch.optim.lr_scheduler.MultiStepLR(d_optimizer, [10])
    scaler = torch.cuda.amp.GradScaler()
    for epoch in range(epochs):
        train(g_model, d_model, loader, g_optimizer, {second}, scaler)
        d_scheduler.step()
"""


def test_one_optimizer_handed_for_two_that_the_callee_steps(tmp_path: Path) -> None:
    assert found(tmp_path, GAN.format(second="g_optimizer")) == [("RGT106", 22)]
    assert found(tmp_path, GAN.format(second="d_optimizer")) == []
