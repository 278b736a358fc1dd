"""Exact resume of a real HF ``Trainer`` through ``RgtTrainerCheckpoint`` and ``resume_folder``.

A run killed by SIGKILL (before the first checkpoint, mid-epoch, at an epoch boundary,
mid-accumulation, while a save is being written, with an asynchronous save, with a GradScaler
steering which steps are skipped) or stopped by a real
SIGTERM, then resumed in a new process, must reproduce every micro-batch loss, the logged
history and the final model/optimizer/scheduler digest of a run that was never interrupted.
The near misses (no RNG state, no data skip, no scaler state) must not, and training from step 0
over existing checkpoints is refused.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
from collections.abc import Iterator
from dataclasses import dataclass, field
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import pytest

from rgt.ckpt import Checkpointer
from tests.ckpt._fork_server import Client

pytestmark = [
    pytest.mark.skipif(
        find_spec("transformers") is None, reason="needs transformers (the ckpt-adapters extra)"
    ),
    pytest.mark.slow,  # real HF Trainer runs: minutes in all
]

ZYGOTE = Path(__file__).with_name("_hf_trainer_zygote.py")
HOSTILE = "ckpt ünï 'q' $(touch PWNED)"


@dataclass
class Run:
    micro: list[tuple[int, str]] = field(default_factory=list)
    final: str | None = None
    history: list[dict[str, Any]] | None = None
    error: str | None = None

    @property
    def numbers(self) -> list[int]:
        return [n for n, _ in self.micro]


def read(out: Path) -> Run:
    run = Run()
    for line in out.read_text(encoding="utf-8").splitlines():
        kind, _, rest = line.partition(" ")
        if kind == "micro":
            number, loss = rest.split()
            run.micro.append((int(number), loss))
        elif kind == "final":
            run.final = rest
        elif kind == "history":
            run.history = json.loads(rest)
        elif kind == "error":
            run.error = rest
    return run


class Zygote(Client):
    def __init__(self, root: Path) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("RGT_")}
        self.root, self.count = root, 0
        super().__init__(ZYGOTE, quiet=True, env=env)

    def run(self, directory: Path, **options: Any) -> tuple[int, Run]:
        """Train (resuming from ``directory``); the exit code and this run's output."""
        self.count += 1
        out = self.root / f"run-{self.count}.txt"
        return self.send(directory, out, json.dumps(options)), read(out)


@pytest.fixture(scope="module")
def zygote(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Zygote]:
    server = Zygote(tmp_path_factory.mktemp("hf-trainer-runs"))
    yield server
    server.close()


@pytest.fixture(scope="module")
def reference(zygote: Zygote, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """Uninterrupted runs, one per configuration, each trained once."""
    cache: dict[str, Run] = {}

    def get(**options: Any) -> Run:
        key = json.dumps(options, sort_keys=True)
        if key not in cache:
            directory = tmp_path_factory.mktemp("reference")
            code, cache[key] = zygote.run(directory, every=1000, **options)
            assert code == 0 and cache[key].final is not None, cache[key].error
        return cache[key]

    return get


def assert_same_training(resumed: Run, reference: Run, resumed_at_micro: int) -> None:
    losses = dict(reference.micro)
    assert resumed.numbers == list(range(resumed_at_micro + 1, len(losses) + 1))
    assert all(losses[n] == loss for n, loss in resumed.micro)  # every micro-batch, bit for bit
    assert resumed.history == reference.history  # loss, grad norm, LR, epoch, eval loss per step
    assert resumed.final == reference.final  # model, optimizer and scheduler, hashed


def kill_and_resume(
    zygote: Zygote, directory: Path, kill_after_save: int, **options: Any
) -> tuple[Run, Run]:
    code, killed = zygote.run(directory, kill_after_save=kill_after_save, **options)
    assert code == -signal.SIGKILL, killed.error
    code, resumed = zygote.run(directory, **options)
    assert code == 0, resumed.error
    return killed, resumed


# 32 samples in batches of 4: 8 batches per epoch, 3 epochs. With accumulation 2 that is
# 4 optimizer steps per epoch (12 in all); without it, 8 (24 in all).
CASES = {
    "mid-epoch, accumulation 2": ({"ga": 2, "every": 3}, 1, 3),
    "at an epoch boundary, accumulation 2": ({"ga": 2, "every": 4}, 2, 8),
    "mid-epoch, asynchronous save": ({"ga": 1, "every": 5, "async": True}, 2, 10),
    "mid-epoch, GradScaler skipping steps": ({"ga": 1, "every": 5, "scaler": True}, 2, 10),
}


@pytest.mark.parametrize("case", CASES)
def test_sigkilled_run_resumes_bit_identically(
    zygote: Zygote, reference: Any, tmp_path: Path, case: str
) -> None:
    options, kill_after_save, step = CASES[case]
    ga = options["ga"]
    expected = reference(ga=ga, scaler=options.get("scaler", False))
    killed, resumed = kill_and_resume(zygote, tmp_path / HOSTILE, kill_after_save, **options)
    assert killed.numbers == list(range(1, step * ga + 1))  # died before step + 1 began
    assert_same_training(resumed, expected, resumed_at_micro=step * ga)
    assert not (tmp_path / "PWNED").exists()


# The other kill points: (options, micro-batches the killed run trained at least, the micro-batch
# the resume starts after). Checkpoints every 3 steps.
KILL_POINTS = {
    "before the first checkpoint": ({"ga": 1, "kill_at_micro": 3}, 2, 0),
    "mid-accumulation": ({"ga": 2, "kill_at_micro": 14}, 13, 12),  # half of step 7 done
    "during persist": ({"ga": 1, "kill_in_persist": 2}, 6, 3),  # the step-6 save, uncommitted
    "during an asynchronous persist": ({"ga": 1, "kill_in_persist": 2, "async": True}, 6, 3),
}


@pytest.mark.parametrize("point", KILL_POINTS)
def test_kill_points_resume_bit_identically(
    zygote: Zygote, reference: Any, tmp_path: Path, point: str
) -> None:
    options, trained, resumed_at = KILL_POINTS[point]
    code, killed = zygote.run(tmp_path / HOSTILE, every=3, **options)
    assert code == -signal.SIGKILL, killed.error
    if options.get("async"):  # the loop trains on while the writer writes
        assert killed.numbers[:trained] == list(range(1, trained + 1))
    else:
        assert killed.numbers == list(range(1, trained + 1))
    committed = Checkpointer(tmp_path / HOSTILE).latest_info()
    assert (committed.step if committed else 0) * options["ga"] == resumed_at
    resume = {k: v for k, v in options.items() if not k.startswith("kill")}
    code, resumed = zygote.run(tmp_path / HOSTILE, every=3, **resume)
    assert code == 0, resumed.error
    assert_same_training(resumed, reference(ga=options["ga"]), resumed_at_micro=resumed_at)
    assert not (tmp_path / "PWNED").exists()


@pytest.mark.parametrize("exit_on_stop", [True, False])
def test_sigterm_saves_once_then_stops(
    zygote: Zygote, reference: Any, tmp_path: Path, exit_on_stop: bool
) -> None:
    directory, scratch = tmp_path / HOSTILE, tmp_path / "scratch ünï $(touch PWNED)"
    scratch.mkdir()
    code, stopped = zygote.run(directory, ga=2, every=1000, sigterm_at=5, exit_on_stop=exit_on_stop)
    info = Checkpointer(directory).latest_info()
    assert info is not None and info.step == 5  # saved once, at the stop, not at train end
    if exit_on_stop:
        assert code == -signal.SIGTERM, stopped.error  # the agent sees a preemption
        assert stopped.numbers == list(range(1, 11))  # step 6 never started
    else:
        assert code == 0, stopped.error  # train() returned; the Trainer ran one more micro-batch
        assert stopped.numbers == list(range(1, 12)) and stopped.final is not None
    code, resumed = zygote.run(directory, ga=2, every=1000, into=str(scratch))
    assert code == 0, resumed.error
    assert_same_training(resumed, reference(ga=2, scaler=False), resumed_at_micro=10)
    assert list(scratch.iterdir()) == []  # the resume folder was removed after training
    assert not (tmp_path / "PWNED").exists()


@pytest.fixture(scope="module")
def killed_mid_epoch(zygote: Zygote, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A checkpoint directory whose run died by SIGKILL after the checkpoint of step 3."""
    directory = tmp_path_factory.mktemp("killed") / "ckpt"
    code, killed = zygote.run(directory, ga=2, every=3, kill_after_save=1)
    assert code == -signal.SIGKILL, killed.error
    return directory


@pytest.mark.parametrize("near_miss", ["drop_rng", "ignore_skip"])
def test_near_misses_break_the_resume(
    zygote: Zygote, reference: Any, killed_mid_epoch: Path, tmp_path: Path, near_miss: str
) -> None:
    """Without the RNG state (dropout masks) or without skipping the batches already trained
    on, the same comparison fails: the exact-resume assertions can fail."""
    directory = tmp_path / "copy"
    shutil.copytree(killed_mid_epoch, directory)
    code, resumed = zygote.run(directory, ga=2, every=3, **{near_miss: True})
    assert code == 0, resumed.error
    expected = reference(ga=2, scaler=False)
    losses = dict(expected.micro)
    assert resumed.numbers == list(range(7, 25))
    assert losses[7] != dict(resumed.micro)[7]  # the very first resumed micro-batch differs
    assert resumed.final != expected.final


def test_gradscaler_state_is_needed(zygote: Zygote, reference: Any, tmp_path: Path) -> None:
    directory = tmp_path / "ckpt"
    code, _ = zygote.run(directory, ga=1, every=5, scaler=True, kill_after_save=2)
    assert code == -signal.SIGKILL
    code, resumed = zygote.run(directory, ga=1, every=5, scaler=True, drop_scaler=True)
    assert code == 0, resumed.error
    expected = reference(ga=1, scaler=True)
    assert resumed.final != expected.final
    assert resumed.history != expected.history  # a different set of steps was skipped


def test_training_from_zero_over_checkpoints_is_refused(
    zygote: Zygote, killed_mid_epoch: Path, tmp_path: Path
) -> None:
    directory = tmp_path / "copy"
    shutil.copytree(killed_mid_epoch, directory)
    code, run = zygote.run(directory, ga=2, every=3, no_resume=True)
    assert code == 1
    assert run.error is not None and run.error.startswith("CheckpointError")
    assert "started at step 0" in run.error
    assert run.micro == []  # refused before a single batch was trained
    info = Checkpointer(directory).latest_info()
    assert info is not None and info.step == 3  # and the checkpoints are untouched


def test_resume_folder_on_a_full_disk_is_refused_naming_the_mount(
    zygote: Zygote, killed_mid_epoch: Path, tmp_path: Path, small_tmpfs: Any
) -> None:
    directory = tmp_path / "copy"
    shutil.copytree(killed_mid_epoch, directory)
    small = small_tmpfs("32k", 64)  # smaller than the checkpoint plus headroom
    code, run = zygote.run(directory, ga=2, every=3, into=str(small))
    assert code == 1 and run.micro == []  # refused before training
    assert run.error is not None and run.error.startswith("DiskBudgetError")
    assert str(small) in run.error and "resume folder" in run.error
    assert os.listdir(small) == []  # no half-written folder left behind
