"""Reconcile on real papers' phrasing: claims on metrics named the way runs log them
(``test/top1``, ``eval.acc``, ``val/bleu``, ``valid_ppl``) find their numbers in sentences
quoted from published abstracts; a copy just outside the tolerance band is a possible drift,
far numbers stay missing."""

from __future__ import annotations

from pathlib import Path

import pytest

from rgt.deliver.anchors import metric_anchors
from rgt.deliver.evidence import Claim
from rgt.deliver.reconcile import ReconcileReport, Target, scan

# Sentences quoted verbatim from the abstracts of these papers.
EFFICIENTNET = (  # Tan & Le 2019, https://arxiv.org/abs/1905.11946
    "In particular, our EfficientNet-B7 achieves state-of-the-art 84.3% top-1 accuracy on "
    "ImageNet, while being 8.4x smaller and 6.1x faster on inference than the best existing "
    "ConvNet."
)
BERT = (  # Devlin et al. 2018, https://arxiv.org/abs/1810.04805
    "It obtains new state-of-the-art results on eleven natural language processing tasks, "
    "including pushing the GLUE score to 80.5% (7.7% point absolute improvement), MultiNLI "
    "accuracy to 86.7% (4.6% absolute improvement), SQuAD v1.1 question answering Test F1 to "
    "93.2 (1.5 point absolute improvement) and SQuAD v2.0 Test F1 to 83.1 (5.1 point absolute "
    "improvement)."
)
TRANSFORMER = (  # Vaswani et al. 2017, https://arxiv.org/abs/1706.03762
    "Our model achieves 28.4 BLEU on the WMT 2014 English-to-German translation task, "
    "improving over the existing best results, including ensembles, by over 2 BLEU."
)
TRANSFORMER_XL = (  # Dai et al. 2019, https://arxiv.org/abs/1901.02860
    "Notably, we improve the state-of-the-art results of bpc/perplexity to 0.99 on enwiki8, "
    "1.08 on text8, 18.3 on WikiText-103, 21.8 on One Billion Word, and 54.5 on Penn Treebank "
    "(without finetuning)."
)


def _scan(
    tmp_path: Path, sentence: str, metric: str, value: float, percent: bool
) -> ReconcileReport:
    (tmp_path / "README.md").write_text(f"# Results\n\n{sentence}\n")
    return scan(tmp_path, [Target("c", value, metric_anchors(metric), percent)])


def _status(report: ReconcileReport) -> str:
    for name, hits in (("ok", report.ok), ("drift", report.drifts), ("possible", report.possible)):
        if hits:
            assert {(h.file, h.line) for h in hits} == {("README.md", 3)}
            return name
    assert report.missing == ["c"]
    return "missing"


@pytest.mark.parametrize(
    ("sentence", "metric", "value", "percent", "status"),
    [
        (EFFICIENTNET, "test/top1", 0.8434, True, "ok"),
        (EFFICIENTNET, "test/top1", 0.8451, True, "drift"),  # 84.3 %: 0.25 % off
        (EFFICIENTNET, "test/top1", 0.87, True, "possible"),  # 3.1 % off: just outside
        (EFFICIENTNET, "test/top1", 0.95, True, "missing"),
        (BERT, "eval.acc", 0.867, True, "ok"),  # "MultiNLI accuracy to 86.7%"
        (BERT, "test/f1", 93.2, False, "ok"),  # "Test F1 to 93.2", not the 83.1 of v2.0
        (BERT, "val/f1", 94.1, False, "drift"),  # 93.2 is 1 % off
        (TRANSFORMER, "val/bleu", 28.4, False, "ok"),
        (TRANSFORMER, "val/bleu", 28.9, False, "drift"),
        (TRANSFORMER_XL, "valid_ppl", 18.3, False, "ok"),  # "bpc/perplexity to ... 18.3"
        (TRANSFORMER_XL, "valid_ppl", 19.0, False, "possible"),
    ],
)  # fmt: skip
def test_real_phrasing(
    tmp_path: Path, sentence: str, metric: str, value: float, percent: bool, status: str
) -> None:
    assert _status(_scan(tmp_path, sentence, metric, value, percent)) == status


@pytest.mark.parametrize(
    ("metric", "spoken"),
    [
        ("val/accuracy", "validation accuracy"),
        ("eval.acc", "accuracy"),
        ("test/top1", "top-1"),
        ("val_top1_acc", "top-1 accuracy"),
        ("valid_ppl", "perplexity"),
        ("test/wer", "word error rate"),
        ("val/auc", "auroc"),
    ],
)
def test_anchors_spell_out_log_names(metric: str, spoken: str) -> None:
    assert spoken in Claim("c", "t", metric).anchors()
    assert "val" not in metric_anchors(metric) and "test" not in metric_anchors(metric)


def test_filler_words_of_a_long_name_do_not_anchor() -> None:
    anchors = metric_anchors("train_samples_per_second")
    assert "samples per second" in anchors and "per" not in anchors and "second" not in anchors
