"""Which way is better for a metric, and which values it can never take.

A comparison without a direction is not a verdict: "loss went up" is a regression and "PSNR
went up" an improvement. The direction comes from, in order: the user (``--direction``), the
runs' own ``results.json`` (``{"value", "direction"}``), then this registry, which matches the
words of the metric name ("val/top1_acc", "test_psnr", "eval-loss"). A name that matches both
lists or neither has no direction, and `rgt verify compare` refuses to guess.
"""

from __future__ import annotations

import math
import re

HIGHER = frozenset(
    {
        "accuracy",
        "acc",
        "top",
        "psnr",
        "ssim",
        "map",
        "ap",
        "bleu",
        "rouge",
        "f1",
        "fscore",
        "iou",
        "miou",
        "dice",
        "auc",
        "auroc",
        "auprc",
        "precision",
        "recall",
        "r2",
        "spearman",
        "pearson",
        "meteor",
        "cider",
        "ndcg",
        "mrr",
        "hit",
        "hits",
        "em",
        "reward",
        "return",
        "success",
        "kappa",
        "mcc",
        "sdr",
        "sisdr",
        "snr",
        "pck",
        "ap50",
        "ap75",
    }
)
LOWER = frozenset(
    {
        "loss",
        "error",
        "err",
        "lpips",
        "nmse",
        "mse",
        "mae",
        "rmse",
        "fid",
        "kid",
        "perplexity",
        "ppl",
        "wer",
        "cer",
        "nll",
        "bpd",
        "bpb",
        "eer",
        "chamfer",
        "epe",
        "ece",
        "brier",
        "regret",
    }
)
# Values outside these ranges are impossible, not merely bad: a bug in the metric code or in
# what was fed to it. Fractions of one may also be recorded in percent; see ``bounds_of``.
FRACTION = frozenset(
    {
        "accuracy",
        "acc",
        "precision",
        "recall",
        "f1",
        "fscore",
        "iou",
        "miou",
        "dice",
        "auc",
        "auroc",
        "auprc",
        "map",
        "ap",
        "ap50",
        "ap75",
        "em",
    }
)
RANGES = {
    "ssim": (-1.0, 1.0),
    "lpips": (0.0, math.inf),
    "fid": (0.0, math.inf),
    "kid": (0.0, math.inf),
    "mse": (0.0, math.inf),
    "nmse": (0.0, math.inf),
    "mae": (0.0, math.inf),
    "rmse": (0.0, math.inf),
    "perplexity": (1.0, math.inf),
    "ppl": (1.0, math.inf),
    "wer": (0.0, math.inf),
    "cer": (0.0, math.inf),
    "psnr": (0.0, math.inf),
}


def words(metric: str) -> list[str]:
    """'val/top1_acc' -> ['val', 'top1', 'acc', 'top']: whole alphanumeric words ('map50',
    'r2') and their letter runs ('map', 'fid' of 'fid50k'), so both spellings match."""
    tokens = re.findall(r"[a-z0-9]+", metric.lower())
    return tokens + [part for t in tokens for part in re.findall(r"[a-z]+", t) if part != t]


def registry_direction(metric: str) -> str | None:
    """'max', 'min', or None when the name matches neither list or both."""
    tokens = set(words(metric))
    if tokens & {"error", "err"}:
        return "min"  # "top1_error", "acc_err": an error of anything is lower-is-better
    up, down = bool(tokens & HIGHER), bool(tokens & LOWER)
    if up == down:
        return None
    return "max" if up else "min"


def bounds_of(metric: str) -> tuple[str, float, float] | None:
    """(word, low, high) of the first bounded word in the name; fractions allow 0..1 here and
    the caller decides about percent scale."""
    for token in words(metric):
        if token in RANGES:
            low, high = RANGES[token]
            return token, low, high
        if token in FRACTION:
            return token, 0.0, 1.0
    return None
