"""Loss spikes: the detector on real public curves, the log formats it reads, and the agent's event.

The curves in ``loss_curves/`` were transcribed from public issue threads (SOURCES.md cites each
and says what its label rests on); ``curves.csv`` lists them with their split (by source
repository, fixed before any threshold was chosen) and the labelled spikes as step ranges.

Scoring, per event: every spike the detector reports (its onset step) is a true positive when
it falls inside a labelled range not matched yet, else a false positive; every labelled range
left unmatched is a false negative. precision = TP / (TP + FP), recall = TP / (TP + FN).
``python -m tests.agent.test_spikes`` prints the table.
"""

from __future__ import annotations

import csv
import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

from rgt import knowledge
from rgt.agent import _spikes
from rgt.agent._spikes import SpikeDetector, SpikeWatch, parse_line
from rgt.knowledge import catalog

CURVES = Path(__file__).with_name("loss_curves")
SRC = str(Path(__file__).resolve().parents[2] / "src")


def _index() -> list[dict[str, str]]:
    with open(CURVES / "curves.csv", newline="") as handle:
        return list(csv.DictReader(handle))


def _ranges(spec: str) -> list[tuple[int, int]]:
    pairs = [part.split("-") for part in spec.split(";") if part]
    return [(int(a), int(b)) for a, b in pairs]


def detect(name: str) -> list[_spikes.Spike]:
    """Every spike the detector reports on one curve, fed value by value as a job would log them."""
    detector, found = SpikeDetector(), []
    with open(CURVES / name, newline="") as handle:
        for row in csv.DictReader(handle):
            spike = detector.add(float(row["loss"]), int(row["step"]))
            found += [spike] if spike else []
    last = detector.flush()
    return found + ([last] if last else [])


def score(split: str) -> dict[str, Any]:
    tp = fp = fn = 0
    curves = [c for c in _index() if c["split"] == split]
    for curve in curves:
        labels = _ranges(curve["spikes"])
        for spike in detect(curve["file"]):
            hit = next((r for r in labels if r[0] <= (spike.step or -1) <= r[1]), None)
            tp, fp = (tp + 1, fp) if hit else (tp, fp + 1)
            labels = [r for r in labels if r != hit]
        fn += len(labels)
    return {
        "split": split,
        "curves": len(curves),
        "with_spikes": sum(1 for c in curves if c["spikes"]),
        "tp": tp,
        "fp": fp,
        "fn": fn,
        "precision": tp / (tp + fp) if tp + fp else 1.0,
        "recall": tp / (tp + fn) if tp + fn else 1.0,
    }


def test_the_corpus_has_ten_curves_with_spikes_and_ten_without_split_by_repository() -> None:
    curves = _index()
    assert sum(1 for c in curves if c["spikes"]) >= 10
    assert sum(1 for c in curves if not c["spikes"]) >= 10
    splits: dict[str, set[str]] = {}
    for c in curves:
        splits.setdefault(c["repo"], set()).add(c["split"])
    assert all(len(s) == 1 for s in splits.values()), splits  # no repository on both sides
    sources = (CURVES / "SOURCES.md").read_text()
    assert all(c["url"] in sources for c in curves)


def test_held_out_curves_meet_the_precision_and_recall_targets() -> None:
    held = score("heldout")
    assert held["with_spikes"] >= 5 and held["curves"] - held["with_spikes"] >= 5
    assert held["precision"] >= 0.9 and held["recall"] >= 0.9, held


@pytest.mark.parametrize("curve", [c["file"] for c in _index() if not c["spikes"]])
def test_a_curve_without_a_spike_fires_nothing(curve: str) -> None:
    assert detect(curve) == []


def test_recovered_and_diverged_are_told_apart() -> None:
    (llava,) = detect("llava_918.csv")  # 0.80 -> 4.27 -> 0.77: back at once
    assert llava.recovered is True and llava.step == 2566 and llava.ratio > 5
    (litgpt,) = detect("litgpt_628.csv")  # 1.70 -> 11.5 and stays there: still open at the end
    assert litgpt.step == 1152 and litgpt.recovered is None and litgpt.peak == 12.1935
    detector = SpikeDetector()
    for step in range(40):  # a calm curve, then a jump that never comes back
        detector.add(2.0 + 0.01 * (step % 3), step)
    after = range(_spikes.RECOVER_WITHIN + 1)
    verdicts = [detector.add(9.0 + 0.01 * (s % 2), 40 + s) for s in after]
    (diverged,) = [v for v in verdicts if v]
    assert diverged.recovered is False and diverged.step == 40 and diverged.severity == "warning"
    assert detector.add(9.0, 99) is None  # the new level is the baseline now


def test_warm_up_an_lr_decay_and_nan_do_not_fire() -> None:
    detector = SpikeDetector()
    warm = [10.8 - 0.05 * s + 0.3 * ((s * 7) % 5) / 5 for s in range(100)]  # falling, noisy
    decay = [5.8 * 0.5 ** (s // 50) for s in range(200)]  # a step schedule: drops only
    values = warm + decay + [float("nan"), float("inf"), 0.0, -1.0]
    assert [detector.add(v, s) for s, v in enumerate(values)] == [None] * len(values)
    assert detector.flush() is None


@pytest.mark.parametrize(
    "line, expected",
    [
        ("step 100 loss 2.31", (100, 2.31)),
        ("loss=2.31", (None, 2.31)),
        ("{'loss': 2.31, 'grad_norm': 0.5, 'learning_rate': 1e-05, 'epoch': 0.2}", (None, 2.31)),
        ('{"step": 120, "loss": 0.41, "lr": 0.001}', (120, 0.41)),
        ("Epoch 0:  22%|##| 4/18 [00:17<01:02,  4.47s/it, loss=10.072, v_num=1]", (None, 10.072)),
        ("Epoch 1: 100%|##| 10/10 [00:01, train_loss_step=0.535, val_loss=0.7]", (None, 0.535)),
        ("iter 2920: loss 3.9883, time 1099.34ms, mfu 15.34%", (2920, 3.9883)),
        ("Iter 25: Train loss 1.593, Learning Rate 7.000e-05", (25, 1.593)),
        (" iteration  5426/ 250000 | lm loss: 2.301E+00 | loss scale: 1.0 |", (5426, 2.301)),
        ("Epoch [85][700/702] loss_rpn_cls: 0.0169, loss_cls: 0.16, loss: 0.2586", (None, 0.2586)),
        ("Step: 896. Cls loss: 0.34984. Reg loss: 0.07105. Total loss: 0.42089", (896, 0.42089)),
        ("step: 14  loss:  3.24405  grad_norm:  0.8319  memory:  9.46GiB", (14, 3.24405)),
        ("10954/10954 [=====] - 659s - loss: 0.0475 - val_loss: 0.0502", (None, 0.0475)),
    ],
)
def test_the_common_log_formats_are_read(line: str, expected: tuple[Any, float]) -> None:
    assert parse_line(line) == expected


@pytest.mark.parametrize(
    "line",
    [
        "Iter 1: Val loss 2.086, Val took 17.177s",
        "{'eval_loss': 1.2, 'epoch': 1.0}",
        "Epoch 42 | Validation | Elapsed Time: 0:15:08 | Steps: 784 | Loss: 4.063824",
        "Val. Epoch: 0/500. Classification loss: 0.32317. Total loss: 0.46783",
        "lossy compression ratio 3",
        "{'train_runtime': 812.4, 'train_samples_per_second': 9.8, 'train_loss': 1.23}",
    ],
)
def test_validation_losses_and_other_words_are_not_training_losses(line: str) -> None:
    assert parse_line(line) is None


def test_the_watch_judges_metrics_jsonl_and_leaves_the_logs_copy_alone() -> None:
    watch = SpikeWatch()
    rows = [2.0, 2.1, 1.9, 2.0, 2.05, 1.95, 2.0, 9.5, 2.0, 1.98]
    log = "".join(f"step {s} loss {v}\n" for s, v in enumerate(rows))
    metrics = "".join(json.dumps({"step": s, "loss": v}) + "\n" for s, v in enumerate(rows))
    (spike,) = watch.feed(metrics, "metrics.jsonl")
    assert watch.feed(log, "log") == []  # the same losses, printed: one spike, one event
    assert spike.detail("metrics.jsonl")["recovered"] is True and spike.step == 7


def test_the_band_is_a_knob_and_a_nonsense_knob_keeps_the_default() -> None:
    from rgt.agent._sentinel import thresholds

    rows = [2.0, 2.1, 1.9, 2.0, 2.05, 1.95, 2.0, 9.5, 2.0, 1.98]  # a 4.75x jump
    metrics = "".join(json.dumps({"step": s, "loss": v}) + "\n" for s, v in enumerate(rows))
    assert SpikeWatch(min_ratio=6.0).feed(metrics, "metrics.jsonl") == []  # under the band
    assert len(SpikeWatch(min_ratio=4.0).feed(metrics, "metrics.jsonl")) == 1
    typo = SpikeWatch(min_ratio=0.5, min_z=-1.0)  # would call every value a spike
    assert (typo.min_ratio, typo.min_z) == (_spikes.MIN_RATIO, _spikes.MIN_Z)
    limits = thresholds({"env": {"RGT_WATCH_SPIKE_RATIO": "6", "RGT_WATCH_SPIKE_Z": "x"}})
    assert limits["RGT_WATCH_SPIKE_RATIO"] == 6.0  # the job's own env, as for every threshold
    assert limits["RGT_WATCH_SPIKE_Z"] == _spikes.MIN_Z  # unreadable: the default


def test_loss_spike_has_an_explain_entry_that_watch_links() -> None:
    entry = catalog.lookup("loss_spike")
    assert entry.kind == "event" and "recovered" in entry.body
    assert knowledge.link("loss_spike") == "rgt explain loss_spike"  # what watch puts on events


@pytest.mark.slow  # a real job under the agent, ~3 s
def test_the_agent_raises_loss_spike_from_the_jobs_log(make_job: Any) -> None:
    losses = [2.0 + 0.02 * (s % 5) for s in range(30)] + [14.0, 6.0] + [2.0] * 10
    script = textwrap.dedent(
        """
        import time
        for step, loss in enumerate(LOSSES):
            print(f"step {step} loss {loss:.4f}", flush=True)
            time.sleep(0.02)
        time.sleep(1.5)
        """
    ).replace("LOSSES", repr(losses))
    job = make_job("spiky").write(script)
    job.start(PYTHONPATH=SRC)
    assert job.finish(timeout=60) == 0, job.agent_log()
    (event,) = job.events("loss_spike")
    detail = event["detail"]
    assert detail["step"] == 30 and detail["value"] == 14.0 and detail["recovered"] is True
    assert detail["source"] == "log" and detail["ratio"] > 6 and event["severity"] == "info"
    assert "rgt explain loss_spike" in event["next"]


def _main() -> None:
    for split in ("tune", "heldout"):
        print(json.dumps(score(split)))
        for curve in (c for c in _index() if c["split"] == split):
            spikes = detect(curve["file"])
            told = [(s.step, round(s.ratio, 1), s.recovered) for s in spikes]
            print(f"  {curve['file']:<26} labels={curve['spikes']:<18} detected={told}")


if __name__ == "__main__":
    _main()
