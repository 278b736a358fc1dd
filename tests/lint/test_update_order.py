"""RGT106 when the scheduler comes from outside ``torch.optim.lr_scheduler`` (a warm-up schedule
of a transformers library), and when a loop calls, on one object, a method that steps the
schedulers before the method that steps the optimizers, both defined in other files."""

from __future__ import annotations

from pathlib import Path

from rgt.lint import lint_paths
from tests.lint._lint import project
from tests.lint._lint import project_found as found

WARMUP = """
import torch
from transformers import get_linear_schedule_with_warmup


def fine_tune(model, loader, steps):
    optimizer = torch.optim.AdamW(model.parameters(), lr=2e-5)
    scheduler = get_linear_schedule_with_warmup(optimizer, 100, steps)
    for batch in loader:
        loss = model(**batch).loss
        loss.backward()
{first}
{second}
        optimizer.zero_grad()
"""


def test_a_warmup_schedule_stepped_before_the_optimizer(tmp_path: Path) -> None:
    code = WARMUP.format(first="        scheduler.step()", second="        optimizer.step()")
    assert found(project(tmp_path, {"tune.py": code})) == [("tune.py", "RGT106", 11)]
    clean = WARMUP.format(first="        optimizer.step()", second="        scheduler.step()")
    assert found(project(tmp_path / "clean", {"tune.py": clean})) == []


GAN = {
    "setup.py": "",
    "nets/__init__.py": "from nets.base import Base\n",
    "nets/base.py": """
        import torch


        class Base:
            def __init__(self, lr):
                self.optimizers, self.schedulers = [], []
                self.lr = lr

            def attach(self):
                self.schedulers = [torch.optim.lr_scheduler.StepLR(o, 10) for o in self.optimizers]

            def update_learning_rate(self):
                for scheduler in self.schedulers:
                    scheduler.step()
    """,
    "nets/pair.py": """
        import torch
        from nets.base import Base


        class Pair(Base):
            def __init__(self, gen, disc, lr):
                super().__init__(lr)
                self.gen, self.disc = gen, disc
                self.optimizer_g = torch.optim.Adam(gen.parameters(), lr=lr)
                self.optimizers.append(self.optimizer_g)

            def optimize_parameters(self, batch):
                self.optimizer_g.zero_grad()
                self.disc(self.gen(batch)).mean().backward()
                self.optimizer_g.step()
    """,
    "train.py": """
        from nets import Base


        def run(model, data, epochs):
            model.attach()
            for epoch in range(epochs):
        {first}
                for batch in data:
                    model.optimize_parameters(batch)
        {last}
    """,
}


def _gan(first: str, last: str) -> dict[str, str]:
    return {**GAN, "train.py": GAN["train.py"].format(first=first, last=last)}


def test_a_scheduler_method_called_before_the_optimizer_method(tmp_path: Path) -> None:
    files = _gan("        model.update_learning_rate()", "")
    assert found(project(tmp_path, files)) == [("train.py", "RGT106", 7)]


def test_the_scheduler_method_at_the_end_of_the_epoch_is_clean(tmp_path: Path) -> None:
    files = _gan("", "        model.update_learning_rate()")
    assert found(project(tmp_path, files)) == []


BRANCHES = """
import torch


def train_epoch(model, loader, optimizer, use_amp):
    scaler = torch.cuda.amp.GradScaler(enabled=use_amp)
    for x, y in loader:
        loss = torch.nn.functional.mse_loss(model(x), y)
        if use_amp:
            optimizer.zero_grad()
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        else:
{plain}
            loss.backward()
            optimizer.step()
"""


def test_zero_grad_only_in_the_amp_branch(tmp_path: Path) -> None:
    code = BRANCHES.format(plain="            pass")
    assert found(project(tmp_path, {"epoch.py": code})) == [("epoch.py", "RGT105", 16)]


def test_zero_grad_in_both_branches_is_clean(tmp_path: Path) -> None:
    code = BRANCHES.format(plain="            optimizer.zero_grad()")
    assert found(project(tmp_path, {"epoch.py": code})) == []


MICRO = """
import torch


def critic_round(critic, opt, batches, steps, accumulations):
    opt.zero_grad()
    for step in range(steps):
{clear}
        for accumulation in range(accumulations):
            loss = critic(next(batches)).mean() / accumulations
            loss.backward()
        opt.step()
"""


def test_micro_batches_do_not_excuse_uncleared_steps(tmp_path: Path) -> None:
    """An inner loop of backward passes accumulates one step's gradients; the steps of the
    loop around it still each need their own clear."""
    code = MICRO.format(clear="        pass")
    assert found(project(tmp_path, {"critic.py": code})) == [("critic.py", "RGT105", 11)]
    clean = MICRO.format(clear="        opt.zero_grad()")
    assert found(project(tmp_path / "clean", {"critic.py": clean})) == []


def test_the_finding_names_the_files_that_step(tmp_path: Path) -> None:
    root = project(tmp_path, _gan("        model.update_learning_rate()", ""))
    (finding,) = lint_paths([str(root)], cache=False).findings
    assert "(nets/base.py)" in finding.message and "(nets/pair.py)" in finding.message
