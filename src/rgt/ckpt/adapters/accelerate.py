"""HF accelerate: the loop state of an ``Accelerator`` run, for ``Checkpointer.resume``/``save``.

accelerate's own ``save_state`` writes RNG and GradScaler state but leaves the data position to
the user (mid-epoch resume needs ``skip_first_batches``) and writes a directory of files with no
commit marker. Here the prepared objects go into a ``TrainLoop`` instead: the model unwrapped
(so the checkpoint loads without accelerate), the accelerated optimizer and scheduler (their
``state_dict`` is the wrapped one's), the GradScaler when mixed precision made one, and the
loader's shuffle generator, skipped and restored in the right order by ``TrainLoop.batches``::

    model, opt, loader, sched = accelerator.prepare(model, opt, loader, sched)
    loop = accelerate_loop(accelerator, model=model, optimizer=opt, scheduler=sched,
                           generator=loader_gen)
    ckpt.resume(loop)
    for batch in loop.batches(loader): ...
"""

from __future__ import annotations

from typing import Any

from rgt.ckpt.loop import TrainLoop


def accelerate_loop(
    accelerator: Any,
    *,
    model: Any,
    generator: Any = None,
    accumulate: int = 1,
    **objects: Any,
) -> TrainLoop:
    """A ``TrainLoop`` over accelerate-prepared objects (see the module docstring)."""
    scaler = getattr(accelerator, "scaler", None)
    if scaler is not None:
        objects.setdefault("scaler", scaler)
    return TrainLoop(
        model=accelerator.unwrap_model(model),
        generator=generator,
        accumulate=accumulate,
        **objects,
    )
