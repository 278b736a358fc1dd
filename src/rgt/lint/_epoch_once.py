"""A sampler's ``set_epoch`` called once, before an engine runs every epoch (``RGT302``):
pytorch-ignite's code-generator template called ``sampler.set_epoch(trainer.state.epoch - 1)``
in ``run()`` and then ``trainer.run(loader, max_epochs=...)``; nothing called it again, so a
shuffling DistributedSampler gave every epoch the order of the first. A ``set_epoch`` in a
loop or in a handler the engine calls (a nested or decorated function) is per epoch."""

from __future__ import annotations

from collections.abc import Iterator

from rgt.lint._facts import LOOPS, Facts
from rgt.lint._model import Hit
from rgt.lint._nodes import dotted, keyword, method

EPOCHS = ("max_epochs", "num_epochs", "epochs")


def set_once(facts: Facts) -> Iterator[Hit]:
    calls = facts.methods_called("set_epoch")
    if not calls:
        return
    for call in calls:
        if any(isinstance(o, LOOPS) for o in facts.around(call)):
            return  # called every pass of a loop: per epoch
        around = facts.functions_around(call)
        if len(around) > 1 or (around and around[0].decorator_list):
            return  # a handler (``@trainer.on(Events.EPOCH_STARTED)``)
    first = min(calls, key=lambda c: (c.lineno, c.col_offset))
    for run in facts.calls:
        given = next((keyword(run, k) for k in EPOCHS if keyword(run, k) is not None), None)
        if method(run) in ("run", "fit") and given is not None and run.lineno > first.lineno:
            detail = (f"called once, before `{dotted(run.func)}` at line {run.lineno} runs "
                      "every epoch with no set_epoch between them")  # fmt: skip
            yield Hit("RGT302", first, detail)
            return
