"""Capture and restore every random number generator a training step may draw from.

Exact resume needs the python ``random`` state, numpy's global state (if numpy is importable),
torch's CPU generator and every CUDA device's generator. The captured dict holds only plain
containers, ints, floats and uint8 tensors, so ``torch.load(..., weights_only=True)`` accepts it.

Order matters (the pitfall behind most "resume is not bit-identical" reports): creating
``iter(dataloader)`` draws a base seed from the global torch generator unless the loader has its
own ``generator=``. Restore the RNG *after* the iterator exists, or give the loader its own
``torch.Generator`` and checkpoint that generator's state too.
"""

from __future__ import annotations

import random
import sys
from typing import Any


def capture_rng() -> dict[str, Any]:
    """Snapshot of all global RNG states, as a dict to put inside the checkpointed state."""
    version, internal, gauss = random.getstate()
    states: dict[str, Any] = {
        "python": {"version": version, "state": list(internal), "gauss_next": gauss}
    }
    # A library that was never imported never drew a random number: nothing to capture.
    if "numpy" in sys.modules:
        states["numpy"] = _capture_numpy()
    if "torch" in sys.modules:
        states.update(_capture_torch())
    return states


def restore_rng(states: dict[str, Any]) -> None:
    """Put back every RNG state that ``capture_rng`` recorded (missing keys are left alone)."""
    if "python" in states:
        py = states["python"]
        random.setstate((py["version"], tuple(py["state"]), py["gauss_next"]))
    if "numpy" in states:
        _restore_numpy(states["numpy"])
    if "torch" in states:
        import torch

        torch.set_rng_state(states["torch"])
        cuda = states.get("cuda") or []
        if cuda and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(cuda)


def _capture_numpy() -> dict[str, Any]:
    import numpy

    name, keys, pos, has_gauss, cached = numpy.random.get_state(legacy=True)
    return {
        "bit_generator": str(name),
        "keys": [int(k) for k in keys],
        "pos": int(pos),
        "has_gauss": int(has_gauss),
        "cached_gaussian": float(cached),
    }


def _restore_numpy(state: dict[str, Any]) -> None:
    import numpy

    keys = numpy.array(state["keys"], dtype=numpy.uint32)
    numpy.random.set_state(
        (state["bit_generator"], keys, state["pos"], state["has_gauss"], state["cached_gaussian"])
    )


def _capture_torch() -> dict[str, Any]:
    import torch

    cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_available() else []
    return {"torch": torch.get_rng_state(), "cuda": list(cuda)}
