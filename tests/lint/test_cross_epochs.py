"""RGT302 on a sampler's ``set_epoch`` called once before an engine runs all the epochs
(``trainer.run(loader, max_epochs=...)``); clean once a handler of the engine calls it at the
start of every epoch."""

from __future__ import annotations

from pathlib import Path

from tests.lint._lint import project
from tests.lint._lint import project_found as found

RUN = """
import ignite.distributed as idist
from ignite.engine import Engine, Events
from torch.utils.data.distributed import DistributedSampler


def run(loader, step, max_epochs):
    trainer = Engine(step)
{once}{handler}    trainer.run(loader, max_epochs=max_epochs)
"""
ONCE = """    if isinstance(loader.sampler, DistributedSampler):
        loader.sampler.set_epoch(trainer.state.epoch - 1)
"""
HANDLER = """
    @trainer.on(Events.EPOCH_STARTED)
    def _set_epoch(engine):
        if isinstance(loader.sampler, DistributedSampler):
            loader.sampler.set_epoch(engine.state.epoch - 1)

"""


def test_set_epoch_once_before_the_engine_runs_every_epoch(tmp_path: Path) -> None:
    code = RUN.format(once=ONCE, handler="")
    assert found(project(tmp_path, {"main.py": code})) == [("main.py", "RGT302", 9)]


def test_set_epoch_in_an_epoch_handler_is_clean(tmp_path: Path) -> None:
    code = RUN.format(once="", handler=HANDLER)
    assert found(project(tmp_path, {"main.py": code})) == []
