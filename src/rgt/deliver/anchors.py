"""Anchor words: how prose names a metric that a run logged as ``val/acc`` or ``eval.top1``.

Reconcile counts a number only next to one of its claim's anchors. Runs name metrics the way
TensorBoard, W&B and Lightning log them (``val/accuracy``, ``eval.acc``, ``test/top1``,
``valid_ppl``); papers and READMEs say "validation accuracy", "top-1", "perplexity". So the
name is split on ``_ - / . :`` and spaces, each abbreviation is also spelled out
(``ABBREVIATIONS``), and the anchors are, lower case:

- the name as logged, and its words joined by spaces (``val/top1_acc`` → "val top1 acc");
- the same with every abbreviation spelled out ("validation top-1 accuracy");
- the words without the split prefix, both ways ("top1 acc", "top-1 accuracy");
- each word that names a quantity (``METRIC_WORDS``) on its own, with its spellings ("top1",
  "top-1", "acc", "accuracy"), so that a table header "Top-1 (%)" anchors the number; a word
  such as "per" in ``samples_per_second`` does not.

A word that only names a split (val, test, train, ...) never anchors alone: "test" is next to
every number in a results section.
"""

from __future__ import annotations

import re

# Words that name a split or a moment, not the quantity.
SPLIT_WORDS = frozenset(
    {"val", "valid", "validation", "test", "train", "dev", "eval", "evaluation", "best", "final",
     "epoch", "step", "avg", "mean", "metrics", "metric"}
)  # fmt: skip
# How prose spells what logs abbreviate. Each value is one or more spellings, all anchors.
ABBREVIATIONS: dict[str, tuple[str, ...]] = {
    "val": ("validation",),
    "valid": ("validation",),
    "eval": ("evaluation",),
    "acc": ("accuracy",),
    "top1": ("top-1", "top 1"),
    "top5": ("top-5", "top 5"),
    "acc1": ("top-1", "accuracy"),
    "acc5": ("top-5",),
    "ppl": ("perplexity",),
    "f1": ("f1 score", "f1-score"),
    "auc": ("auroc", "roc auc", "roc-auc"),
    "auroc": ("auc",),
    "bleu": ("bleu score",),
    "wer": ("word error rate",),
    "cer": ("character error rate",),
    "map": ("mean average precision",),
    "miou": ("mean iou", "mean intersection over union"),
    "iou": ("intersection over union",),
    "em": ("exact match",),
    "mse": ("mean squared error",),
    "rmse": ("root mean squared error",),
    "mae": ("mean absolute error",),
    "nll": ("negative log-likelihood", "negative log likelihood"),
    "psnr": ("peak signal-to-noise ratio",),
    "err": ("error",),
    "loss": ("loss",),
}
# Words that name a quantity: one of them alone anchors a multi-word metric's number.
METRIC_WORDS = frozenset(
    {*ABBREVIATIONS, *(s for spellings in ABBREVIATIONS.values() for s in spellings),
     "accuracy", "perplexity", "precision", "recall", "error", "ssim", "rouge", "meteor",
     "cider", "fid", "dice", "reward", "return"}
)  # fmt: skip
_SEPARATORS = re.compile(r"[\s_\-/.:]+")
_MIN_LENGTH = 2  # a one-letter anchor ("r") would tie every number on the line to the claim


def metric_words(metric: str) -> list[str]:
    """``"val/top1_acc"`` → ``["val", "top1", "acc"]`` (lower case)."""
    return [w for w in _SEPARATORS.split(metric.lower()) if w]


def spelled_out(word: str) -> str:
    """The first prose spelling of an abbreviation, or the word itself."""
    return ABBREVIATIONS.get(word, (word,))[0]


def metric_anchors(metric: str) -> tuple[str, ...]:
    """Every lower-case phrase that names ``metric`` in prose (see the module docstring)."""
    name = metric.lower().strip()
    words = metric_words(name)
    core = [w for w in words if w not in SPLIT_WORDS] or words
    found = {name}
    for group in (words, core):
        found.add(" ".join(group))
        found.add(" ".join(spelled_out(w) for w in group))
    for word in core:
        if len(core) == 1 or word in METRIC_WORDS:
            found.add(word)
            found.update(ABBREVIATIONS.get(word, ()))
    return tuple(sorted(a for a in found if len(a) >= _MIN_LENGTH and a not in SPLIT_WORDS))
