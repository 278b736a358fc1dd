"""`rgt smoke --overfit`: can this model learn one fixed batch? Imported inside training scripts.

A model that cannot drive the loss on one small batch towards zero will not learn from the
dataset either, and the reason is usually visible in the first hundred CPU steps: a head fed a
detached tensor, a layer frozen by mistake, a learning rate of 0, probabilities fed to a loss that
applies softmax itself, a batch whose labels change every step. The script cooperates with one
call, and nothing else in it changes::

    from rgt import smoke

    if smoke.requested():            # RGT_SMOKE=overfit (set by `rgt smoke --overfit`)
        smoke.overfit(model, optimizer, lambda: criterion(model(x), y), num_classes=10)

``overfit`` trains on the batch the closure uses, writes the report to ``$RGT_SMOKE_REPORT`` (when
set) and returns it. torch is imported only when ``overfit`` runs. Given ``loader=train_loader``
it first times a few batches against the closure's forward and backward pass and adds an
``input_bound`` warning event when the steps mostly wait for data; ``timed_loader(loader)`` does
the same in the real training loop, for the agent (rgt.smoke._input).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from rgt.smoke import _input as _smoke_input
from rgt.smoke._input import timed_loader

__all__ = ["OverfitReport", "overfit", "requested", "run_overfit", "timed_loader"]
MODE = "overfit"


def requested() -> bool:
    return os.environ.get("RGT_SMOKE") == MODE


@dataclass(frozen=True)
class OverfitReport:
    steps: int
    initial_loss: float
    final_loss: float
    chance_loss: float | None  # log(num_classes), when the script says how many classes
    fell_by: float  # final / initial
    unchanged: tuple[str, ...] = ()  # modules none of whose parameters moved
    no_grad: tuple[str, ...] = ()  # modules whose trainable parameters never got a gradient
    non_finite: str | None = None  # first module whose output held NaN/Inf
    problems: tuple[str, ...] = field(default_factory=tuple)
    input_wait: dict[str, Any] | None = None  # given a loader: wait vs step seconds, verdict
    events: tuple[dict[str, Any], ...] = ()  # warnings (``input_bound``): they never fail it

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "ok": self.ok}


def overfit(
    model: Any,
    optimizer: Any,
    step_loss: Callable[[], Any],
    *,
    num_classes: int | None = None,
    steps: int = 200,
    factor: float = 0.1,
    loader: Any = None,
) -> OverfitReport:
    """Train ``steps`` steps on the closure's fixed batch; the loss must fall to ``factor`` x
    its initial value. Returns (and writes to ``$RGT_SMOKE_REPORT``) what went wrong, by module."""
    import torch

    waits = _input_wait(model, optimizer, step_loss, loader) if loader is not None else None
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    seen_grad: set[str] = set()
    watch = _NonFinite(model)
    was_training = model.training
    repeatable, initial = _twice(model, step_loss)  # leaves the model in eval: no dropout noise
    loss = initial
    for _ in range(steps):
        optimizer.zero_grad()
        loss_t = step_loss()
        loss_t.backward()
        seen_grad |= {n for n, p in model.named_parameters() if _useful(p.grad)}
        optimizer.step()
        loss = float(loss_t.detach())
        if not math.isfinite(loss):
            break
    watch.remove()
    model.train(was_training)
    with torch.no_grad():
        moved = {n for n, p in model.named_parameters() if not torch.equal(p, before[n])}
    report = _report(model, steps, initial, loss, num_classes, factor, moved, seen_grad, watch)
    if not repeatable:
        report = _add(
            report,
            "the batch changes between steps (labels or inputs drawn anew): "
            "overfit needs one fixed batch; check the labels are paired with inputs",
        )
    if waits is not None:
        found = _smoke_input.event(waits)
        report = replace(report, input_wait=waits, events=(found,) if found else ())
    _write(report)
    return report


def _input_wait(model: Any, optimizer: Any, step_loss: Callable[[], Any], loader: Any) -> Any:
    """Draw batches from the script's loader with one forward+backward pass between draws
    (no optimizer step: the overfit that follows starts from the same weights)."""

    def compute() -> None:
        optimizer.zero_grad()
        step_loss().backward()

    verdict = _smoke_input.measure(loader, compute)
    optimizer.zero_grad()
    return verdict


def _twice(model: Any, step_loss: Callable[[], Any]) -> tuple[bool, float]:
    """Is the closure's loss the same twice in a row (eval mode, no update)?"""
    import torch

    model.eval()
    with torch.no_grad():
        first, second = float(step_loss()), float(step_loss())
    return math.isclose(first, second, rel_tol=1e-4, abs_tol=1e-6), first


def _useful(grad: Any) -> bool:
    import torch

    return grad is not None and bool(torch.isfinite(grad).all()) and bool(grad.abs().sum() > 0)


def _report(
    model: Any,
    steps: int,
    initial: float,
    final: float,
    num_classes: int | None,
    factor: float,
    moved: set[str],
    seen_grad: set[str],
    watch: _NonFinite,
) -> OverfitReport:
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    names = [n for n, _ in model.named_parameters()]
    unchanged = _modules([n for n in names if n not in moved])
    no_grad = _modules([n for n in names if n in trainable and n not in seen_grad])
    chance = math.log(num_classes) if num_classes else None
    fell = final / initial if initial else 1.0
    problems: list[str] = []
    if watch.first:
        problems.append(f"non-finite output first in module {watch.first!r}")
    if not math.isfinite(final):
        problems.append("the loss became NaN/Inf")
    if moved == set():
        problems.append(
            "no parameter changed: learning rate 0, or the optimizer holds none "
            "of the model's parameters"
        )
    elif unchanged:
        problems.append(
            f"parameters never changed in {', '.join(unchanged)} (frozen by "
            "mistake, detached, or not in the optimizer)"
        )
    if no_grad and moved:
        problems.append(f"no gradient reached {', '.join(no_grad)} (detached from the loss?)")
    if chance is not None and abs(initial - chance) > 0.5 * chance:
        problems.append(
            f"initial loss {initial:.3f} is far from chance log({num_classes}) = "
            f"{chance:.3f}: check the labels, the loss and the output layer"
        )
    if math.isfinite(final) and fell > factor:
        problems.append(
            f"the loss fell only to {fell:.2f}x its start in {steps} steps on one "
            f"batch (wanted <= {factor}x)" + _probabilities_hint(model, watch)
        )
    return OverfitReport(
        steps,
        initial,
        final,
        chance,
        fell,
        tuple(unchanged),
        tuple(no_grad),
        watch.first,
        tuple(problems),
    )


def _probabilities_hint(model: Any, watch: _NonFinite) -> str:
    out = watch.last_output
    if out is None or out.dim() != 2:
        return ""
    sums = out.sum(dim=1)
    if bool((out >= 0).all()) and bool(((sums - 1).abs() < 1e-3).all()):
        return ": the model outputs probabilities (softmax before a loss that applies it?)"
    return ""


def _modules(params: list[str]) -> list[str]:
    """``body.0.weight`` → ``body.0``, each module once, in order."""
    out: list[str] = []
    for name in params:
        module = name.rsplit(".", 1)[0] if "." in name else name
        if module not in out:
            out.append(module)
    return out


def _add(report: OverfitReport, problem: str) -> OverfitReport:
    return replace(report, problems=(*report.problems, problem))


def _write(report: OverfitReport) -> None:
    path = os.environ.get("RGT_SMOKE_REPORT")
    if path:
        tmp = f"{path}.tmp"
        with open(tmp, "w", encoding="utf-8") as handle:
            json.dump(report.to_json(), handle)
        os.replace(tmp, path)


def run_overfit(command: list[str], timeout: float) -> dict[str, Any]:
    """``rgt smoke --overfit``: run COMMAND on the CPU with ``RGT_SMOKE=overfit`` and read the
    report its ``overfit()`` call writes. A script that never calls it gets a report that says
    so (``ok`` false) and how to add the hook."""
    import subprocess
    import tempfile

    with tempfile.TemporaryDirectory(prefix="rgt-overfit-") as tmp:
        target = os.path.join(tmp, "overfit.json")
        env = {
            **os.environ,
            "RGT_SMOKE": MODE,
            "RGT_SMOKE_REPORT": target,
            "CUDA_VISIBLE_DEVICES": "",
            "WANDB_MODE": "disabled",
            "PYTHONUNBUFFERED": "1",
        }
        try:
            proc = subprocess.run(
                command, env=env, capture_output=True, text=True, timeout=timeout, check=False
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return {"ok": False, "problems": [f"the command did not finish: {exc}"]}
        if not os.path.exists(target):
            tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-15:])
            return {
                "ok": False,
                "returncode": proc.returncode,
                "log_tail": tail,
                "problems": [
                    "the script never called rgt.smoke.overfit(): add `if smoke.requested(): "
                    "smoke.overfit(model, optimizer, lambda: criterion(model(x), y))` (README)"
                ],
            }
        with open(target, encoding="utf-8") as handle:
            data: dict[str, Any] = json.load(handle)
        return {**data, "returncode": proc.returncode}


class _NonFinite:
    """Forward hooks: the first module whose output holds NaN/Inf, and the model's last output."""

    def __init__(self, model: Any) -> None:
        self.first: str | None = None
        self.last_output: Any = None
        self.handles = [
            m.register_forward_hook(self._hook(name)) for name, m in model.named_modules()
        ]

    def _hook(self, name: str) -> Callable[..., None]:
        import torch

        def hook(_module: Any, _inputs: Any, output: Any) -> None:
            if not isinstance(output, torch.Tensor):
                return
            if name == "":
                self.last_output = output.detach()
            elif self.first is None and not bool(torch.isfinite(output).all()):
                self.first = name

        return hook

    def remove(self) -> None:
        for handle in self.handles:
            handle.remove()
