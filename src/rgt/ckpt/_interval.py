"""How often to checkpoint: the Young (1974) and Daly (2006) optimum intervals.

Both balance two losses: time spent writing checkpoints (more often = more writes) against work
redone after a failure (less often = more to redo). ``C`` is the cost of one checkpoint in
seconds (measure it online: blocking time plus the slowdown of steps while a writer runs;
``Checkpointer.last_save_seconds`` gives the blocking part) and ``M`` the mean time between
failures of the machine or the platform's preemptions, in the same unit.
"""

from __future__ import annotations

import math

from rgt.errors import UsageError


def _check(checkpoint_cost_s: float, mtbf_s: float) -> None:
    if not checkpoint_cost_s > 0 or not mtbf_s > 0:
        raise UsageError(
            f"checkpoint cost ({checkpoint_cost_s!r}) and MTBF ({mtbf_s!r}) must be positive",
            fix="pass the measured seconds one save takes and the mean seconds between failures",
        )


def young_daly_interval(checkpoint_cost_s: float, mtbf_s: float) -> float:
    """Young's first-order optimum compute time between checkpoints: sqrt(2·C·M)."""
    _check(checkpoint_cost_s, mtbf_s)
    return math.sqrt(2.0 * checkpoint_cost_s * mtbf_s)


def daly_interval(checkpoint_cost_s: float, mtbf_s: float) -> float:
    """Daly's higher-order optimum (FGCS 22, 2006, eq. 37).

    tau = sqrt(2·C·M)·[1 + (1/3)·sqrt(C/(2M)) + (1/9)·(C/(2M))] − C  for C < 2M, else M.
    When a checkpoint costs more than two MTBFs, checkpointing once per MTBF is the best one
    can do; below that, the correction terms matter when C is not small against M (e.g. a
    5-minute save on a spot instance preempted every 15 minutes).
    """
    _check(checkpoint_cost_s, mtbf_s)
    if checkpoint_cost_s >= 2.0 * mtbf_s:
        return float(mtbf_s)
    ratio = checkpoint_cost_s / (2.0 * mtbf_s)
    series = 1.0 + math.sqrt(ratio) / 3.0 + ratio / 9.0
    return math.sqrt(2.0 * checkpoint_cost_s * mtbf_s) * series - checkpoint_cost_s
