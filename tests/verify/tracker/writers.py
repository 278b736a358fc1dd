"""Write real tracker data with each tracker's own library, one subprocess per call.

Run as ``python -m tests.verify.tracker.writers KIND DIR``. Every corpus holds a clean run plus
one run per defect the checks look for; the tests assert the exact set of findings, so a check
that fires on a clean run fails as surely as one that misses a defect.
"""

from __future__ import annotations

import math
import os
import signal
import sys
from pathlib import Path

CONFIG = {"lr": 0.01, "seed": 0, "epochs": 3}
LOSSES = (1.0, 0.5, 0.25)
WANDB_KILLED_ROWS = 600  # enough rows to fill whole 32 KiB blocks, which wandb-core flushes


def mlflow_runs(root: Path) -> None:
    import mlflow

    mlflow.set_tracking_uri(f"file:{root / 'mlruns'}")
    mlflow.set_experiment("ablation")
    _mlflow_run("clean", CONFIG, LOSSES)
    _mlflow_run("clean-again", CONFIG, LOSSES)  # duplicate: same config and seed
    _mlflow_run("lr=0.1-seed1", {**CONFIG, "seed": 1}, LOSSES)  # name says lr 0.1
    _mlflow_run("short", {**CONFIG, "seed": 2, "epochs": 10}, LOSSES)  # FINISHED at 3 of 10
    _mlflow_run("diverged", {**CONFIG, "seed": 3}, (1.0, 5.0, math.nan))
    try:
        with mlflow.start_run(run_name="failed"):
            mlflow.log_params({**CONFIG, "seed": 4})
            raise RuntimeError("CUDA out of memory")
    except RuntimeError:
        pass


def _mlflow_run(name: str, params: dict[str, float], losses: tuple[float, ...]) -> None:
    import mlflow

    with mlflow.start_run(run_name=name):
        mlflow.log_params(params)
        for epoch, loss in enumerate(losses):
            mlflow.log_metrics({"loss": loss, "epoch": epoch}, step=epoch)


def mlflow_killed(root: Path) -> None:
    """A run the OOM killer ends: SIGKILL skips end_run, the store says RUNNING forever."""
    import mlflow

    mlflow.set_tracking_uri(f"file:{root / 'mlruns'}")
    mlflow.set_experiment("ablation")
    mlflow.start_run(run_name="killed")
    mlflow.log_params({**CONFIG, "seed": 5})
    mlflow.log_metric("loss", 1.0, step=0)
    os.kill(os.getpid(), signal.SIGKILL)


def tensorboard_runs(root: Path) -> None:
    from torch.utils.tensorboard import SummaryWriter

    def run(name: str, hparams: dict[str, float], losses: tuple[float, ...], final: float) -> None:
        writer = SummaryWriter(str(root / name))
        for step, loss in enumerate(losses):
            writer.add_scalar("train/loss", loss, step)
        writer.add_hparams(hparams, {"hparam/loss": final})  # into a timestamped child folder
        writer.close()

    steps = {**CONFIG, "steps": 3}
    run("clean", steps, LOSSES, LOSSES[-1])
    run("lr=0.1", {**steps, "seed": 1}, LOSSES, LOSSES[-1])
    run("diverged", {**steps, "seed": 2}, (1.0, 2.0, math.nan), 2.0)
    run("summary-off", {**steps, "seed": 3}, LOSSES, 0.77)
    run("short", {**steps, "seed": 4, "steps": 100}, LOSSES, LOSSES[-1])


def wandb_runs(root: Path) -> None:
    import wandb

    def run(name: str, config: dict[str, float], exit_code: int = 0, summary: float = 0) -> None:
        live = wandb.init(project="ablation", name=name, dir=str(root), config=config)
        for epoch, loss in enumerate(LOSSES):
            live.log({"loss": loss, "epoch": epoch})
        if summary:
            live.summary["loss"] = summary  # overwritten by hand after the history
        live.finish(exit_code=exit_code)

    run("clean", CONFIG)
    run("clean-again", CONFIG)
    run("summary-off", {**CONFIG, "seed": 1}, summary=0.123)
    run("failed", {**CONFIG, "seed": 2}, exit_code=1)
    run("bs64", {**CONFIG, "seed": 3, "batch_size": 32})


def wandb_killed(root: Path) -> None:
    import wandb

    live = wandb.init(
        project="ablation", name="killed", dir=str(root), config={**CONFIG, "seed": 9}
    )
    for step in range(WANDB_KILLED_ROWS):
        live.log({"loss": 1.0 / (step + 1), "acc": step / WANDB_KILLED_ROWS, "epoch": 0})
    run_dir = Path(live.dir).parent
    log = next(run_dir.glob("run-*.wandb"))
    _wait_for(lambda: log.stat().st_size > 32768)
    os.kill(os.getpid(), signal.SIGKILL)


def _wait_for(condition: object) -> None:
    import time

    deadline = time.monotonic() + 60
    while not condition() and time.monotonic() < deadline:  # type: ignore[operator]
        time.sleep(0.05)


def trackio_runs(root: Path) -> None:
    os.environ["TRACKIO_DIR"] = str(root)
    import trackio

    def run(name: str, config: dict[str, float], losses: tuple[float, ...]) -> None:
        trackio.init(project="ablation", name=name, config=config)
        for step, loss in enumerate(losses):
            trackio.log({"loss": loss}, step=step)
        trackio.finish()

    run("clean", CONFIG, LOSSES)
    run("clean-again", CONFIG, LOSSES)
    run("lr3e-4", {**CONFIG, "seed": 1}, LOSSES)
    run("short", {**CONFIG, "seed": 2, "epochs": 10}, LOSSES)


WRITERS = {
    "mlflow": mlflow_runs,
    "mlflow_killed": mlflow_killed,
    "tensorboard": tensorboard_runs,
    "wandb": wandb_runs,
    "wandb_killed": wandb_killed,
    "trackio": trackio_runs,
}

if __name__ == "__main__":
    WRITERS[sys.argv[1]](Path(sys.argv[2]))
