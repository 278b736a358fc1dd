"""Exact resume of a Lightning fit through ``RgtCheckpoint``: a real process killed with SIGKILL
(or stopped by SIGTERM) mid-epoch, at an epoch boundary, before the first checkpoint,
mid-accumulation, while a save is being written (sync or asynchronous) and while an asynchronous
save is in flight, then resumed by a plain ``trainer.fit`` in a new process.
Per-batch losses and the final digest of model, optimizer, scheduler and RNG must equal those of
a run that was never killed. The near misses (no RNG restore; Lightning's own ModelCheckpoint)
must not, which shows the comparison can fail."""

from __future__ import annotations

import importlib.util
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.ckpt._fork_server import Client

# Looked up, not imported: importing Lightning costs ~15 s of every worker's collection, and
# only the zygote process (which runs the fits) needs it.
if importlib.util.find_spec("pytorch_lightning") is None:
    pytest.skip("pytorch_lightning is not installed", allow_module_level=True)

pytestmark = pytest.mark.slow  # real Lightning runs

ZYGOTE = Path(__file__).with_name("_lightning_zygote.py")
BATCHES = list(range(1, 25))  # 3 epochs of 8; a checkpoint every 4 optimizer steps

Losses = dict[int, list[str]]


class Zygote(Client):
    def __init__(self) -> None:
        super().__init__(ZYGOTE, quiet=True)

    def run(self, directory: Path, out: Path, kill: str = "-", variant: str = "rgt") -> int:
        return self.send(directory, out, kill, variant)


class Run:
    """What one OUT file says: the batches trained in order with their losses, the final digest,
    any failure."""

    def __init__(self, out: Path) -> None:
        self.batches: list[int] = []
        self.losses: Losses = {}
        self.final = self.failed = ""
        for line in out.read_text().splitlines():
            kind, value, *rest = line.split()
            if kind == "loss":
                self.batches.append(int(value))
                self.losses.setdefault(int(value), []).append(rest[0])
            elif kind == "final":
                self.final = value
            else:
                self.failed = value


@pytest.fixture(scope="module")
def zygote() -> Iterator[Zygote]:
    server = Zygote()
    yield server
    server.close()


class References:
    """Uninterrupted runs, one per variant, made once and shared by the tests."""

    def __init__(self, zygote: Zygote, base: Path) -> None:
        self.zygote, self.base, self.runs = zygote, base, dict[str, Run]()

    def __getitem__(self, variant: str) -> Run:
        if variant not in self.runs:
            out = self.base / f"{variant}.txt"
            assert self.zygote.run(self.base / variant, out, variant=variant) == 0
            self.runs[variant] = Run(out)
            assert self.runs[variant].batches == BATCHES and self.runs[variant].final
        return self.runs[variant]


@pytest.fixture(scope="module")
def references(zygote: Zygote, tmp_path_factory: pytest.TempPathFactory) -> References:
    return References(zygote, tmp_path_factory.mktemp("references"))


def kill_and_resume(zygote: Zygote, base: Path, kill: str, variant: str) -> tuple[Run, int]:
    """Run until KILL, then resume in a fresh child; the run and the first batch it trained."""
    directory, out = base / "ckpt ünï $(x)", base / "out.txt"
    expected = 3 if kill.startswith("term:") else -signal.SIGKILL  # SIGTERM: Lightning exits
    assert zygote.run(directory, out, kill, variant) == expected
    done_before = len(Run(out).batches)
    assert zygote.run(directory, out, variant=variant) == 0
    run = Run(out)
    return run, run.batches[done_before]


@pytest.mark.parametrize(
    ("kill", "variant", "resumes_at"),
    [
        pytest.param("step:2", "rgt", {1}, id="before the first checkpoint"),
        pytest.param("step:14", "rgt", {13}, id="mid-epoch"),
        pytest.param("step:10", "rgt", {9}, id="after an epoch-boundary checkpoint"),
        pytest.param("step:14", "rgt-async", {9, 13}, id="asynchronous save in flight"),
        pytest.param("term:11", "rgt", {12}, id="SIGTERM: one last checkpoint"),
        pytest.param("step:14", "no-generator", {13}, id="loader without a generator"),
        pytest.param("step:7", "rgt-accumulate", {13}, id="gradient accumulation"),
        pytest.param("batch:16", "rgt-accumulate", {13}, id="mid-accumulation"),
        pytest.param("persist:2", "rgt", {5}, id="during persist"),
        pytest.param("persist:2", "rgt-async", {5}, id="during an asynchronous persist"),
    ],
)
def test_resume_is_bit_identical(
    zygote: Zygote,
    references: References,
    tmp_path: Path,
    kill: str,
    variant: str,
    resumes_at: set[int],
) -> None:
    reference = references["rgt" if variant == "rgt-async" else variant]
    run, resumed_at = kill_and_resume(zygote, tmp_path, kill, variant)
    assert resumed_at in resumes_at  # after the newest durable checkpoint, not from scratch
    assert sorted(set(run.batches)) == BATCHES and run.batches[-1] == BATCHES[-1]
    for batch, losses in run.losses.items():  # batches trained twice: the same loss both times
        assert set(losses) == set(reference.losses[batch]), batch
    assert run.final == reference.final  # model, optimizer, scheduler and RNG, hashed


@pytest.mark.parametrize("variant", ["no-rng", "lightning"])
def test_near_misses_are_not_bit_identical(
    zygote: Zygote, references: References, tmp_path: Path, variant: str
) -> None:
    """Resuming without the RNG restore, or with Lightning's own checkpoints, changes the
    losses after the kill (against the same setup's uninterrupted run): the comparison above
    can fail."""
    reference = references["lightning" if variant == "lightning" else "rgt"]
    run, _ = kill_and_resume(zygote, tmp_path, "step:14", variant)
    differing = [n for n, losses in run.losses.items() if set(losses) != set(reference.losses[n])]
    assert differing and min(differing) > 12  # identical up to the checkpoint, not after
    assert run.final != reference.final


def test_resume_with_other_loaders_is_refused(zygote: Zygote, tmp_path: Path) -> None:
    directory, out = tmp_path / "ckpt", tmp_path / "out.txt"
    assert zygote.run(directory, out, "step:6") == -signal.SIGKILL
    assert zygote.run(directory, out, variant="no-generator") == 1
    assert Run(out).failed == "UsageError"  # one generator saved, none to put it back into
