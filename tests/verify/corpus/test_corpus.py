"""`rgt verify artifacts DIR --json` on what the frameworks really write (issue 32).

Each framework's checkpoint (tests/verify/corpus/make.py: accelerate ``save_state``, a
transformers ``Trainer`` ``checkpoint-N/``, a Lightning ``.ckpt`` with its default
ModelCheckpoint, ``torch.distributed.checkpoint`` from 2 gloo ranks, DeepSpeed ZeRO-1) is
checked as written (good: every file ``ok`` or ``hash_only``), truncated, with one byte of a
tensor flipped after the manifest was made, with a NaN weight, with a shard missing, and with
a pickle that writes a file when unpickled: ``bad`` for the broken ones, ``hash_only`` for the
hostile one, which must never run (its marker file stays absent until this test, at the end,
unpickles it on purpose to prove the payload was live).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests import clirun
from tests.verify.corpus import damage

pytestmark = [pytest.mark.slow, pytest.mark.early]  # the corpus is built once: ~3 min

ACCELERATE_OK = ("model.safetensors", "optimizer.bin", "scheduler.bin", "random_states_0.pkl",
                 "custom_checkpoint_0.pkl")  # fmt: skip
TRAINER_OK = ("model.safetensors", "optimizer.pt", "scheduler.pt", "rng_state.pth",
              "trainer_state.json")  # fmt: skip
# framework -> (the weights file a damage is aimed at, files a correct verifier loads: ``ok``)
CASES: dict[str, tuple[str, tuple[str, ...]]] = {
    "accelerate": (
        "out/step_3/model.safetensors",
        tuple(f"out/step_3/{n}" for n in ACCELERATE_OK),
    ),
    "transformers": (
        "out/checkpoint-4/model.safetensors",
        tuple(f"out/checkpoint-4/{n}" for n in TRAINER_OK),
    ),
    "lightning": (
        "lightning_logs/version_0/checkpoints/epoch=0-step=4.ckpt",
        ("lightning_logs/version_0/checkpoints/epoch=0-step=4.ckpt",),
    ),
    "dcp": (
        "out/dcp_step_2/__0_0.distcp",
        ("out/dcp_step_2/.metadata", "out/dcp_step_2/__0_0.distcp", "out/dcp_step_2/__1_0.distcp"),
    ),
    "deepspeed": (
        "out/global_step2/mp_rank_00_model_states.pt",
        ("out/global_step2/mp_rank_00_model_states.pt",),
    ),
}
# A folder that misses one of the files its layout names: incomplete, so bad.
MISSING = {
    "dcp": "out/dcp_step_2/__1_0.distcp",
    "deepspeed": "out/global_step2/mp_rank_00_model_states.pt",
}


def _case(corpus: dict[str, tuple[Path, str]], framework: str, variant: str, tmp: Path) -> Path:
    """A private copy of one variant (damage never touches the session's corpus)."""
    root, skipped = corpus[framework]
    if skipped:
        pytest.skip(skipped)
    source = "good" if variant in ("truncated", "bitflip", "missing") else variant
    case = tmp / framework / variant
    shutil.copytree(root / source, case)
    return case


def _verify(case: Path, manifest: Path) -> tuple[int, dict[str, Any]]:
    proc = clirun.rgt("verify", "artifacts", str(case), "--manifest", str(manifest), "--json",
                      timeout=120)  # fmt: skip
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    return proc.returncode, json.loads(proc.stdout)


def _verdicts(doc: dict[str, Any]) -> dict[str, str]:
    return {f["path"]: f["verdict"] for f in doc["files"]}


def _units_holding(doc: dict[str, Any], rel: str) -> list[dict[str, Any]]:
    return [u for u in doc.get("units", []) if rel.startswith(u["path"].rstrip("/") + "/")]


@pytest.mark.parametrize("framework", list(CASES))
def test_good_checkpoints_pass(ckpt_corpus: Any, framework: str, tmp_path: Path) -> None:
    case = _case(ckpt_corpus, framework, "good", tmp_path)
    code, doc = _verify(case, damage.write_manifest(case, damage.manifest(case)))
    verdicts = _verdicts(doc)
    assert code == 0 and doc["ok"] is True and doc["summary"]["bad"] == 0, doc
    assert set(verdicts.values()) <= {"ok", "hash_only"}, verdicts
    for rel in CASES[framework][1]:
        assert verdicts[rel] == "ok", (rel, doc)
    for f in doc["files"]:
        assert f["verdict"] != "hash_only" or f["detail"], f"hash_only without a reason: {f}"
    assert all(u["verdict"] != "bad" for u in doc.get("units", [])), doc["units"]


def test_transformers_training_args_are_hash_only_naming_the_class(
    ckpt_corpus: Any, tmp_path: Path
) -> None:
    """training_args.bin pickles TrainingArguments: a class, so not loaded, and said so."""
    case = _case(ckpt_corpus, "transformers", "good", tmp_path)
    _, doc = _verify(case, damage.write_manifest(case, damage.manifest(case)))
    [args] = [f for f in doc["files"] if f["path"].endswith("training_args.bin")]
    assert args["verdict"] == "hash_only" and "TrainingArguments" in args["detail"], args


@pytest.mark.parametrize("framework", list(CASES))
def test_truncated_weights_are_bad(ckpt_corpus: Any, framework: str, tmp_path: Path) -> None:
    """Manifest made after the cut (as the agent would, hashing what is there): only the
    content check can tell."""
    case = _case(ckpt_corpus, framework, "truncated", tmp_path)
    target = CASES[framework][0]
    damage.truncate(case / target)
    code, doc = _verify(case, damage.write_manifest(case, damage.manifest(case)))
    _assert_bad(code, doc, target)


@pytest.mark.parametrize("framework", list(CASES))
def test_a_flipped_byte_in_a_tensor_is_bad(
    ckpt_corpus: Any, framework: str, tmp_path: Path
) -> None:
    case = _case(ckpt_corpus, framework, "bitflip", tmp_path)
    target = CASES[framework][0]
    before = damage.manifest(case)  # the hash recorded before the flip
    damage.flip_byte(case / target, damage.storage_offset(case / target))
    code, doc = _verify(case, damage.write_manifest(case, before))
    _assert_bad(code, doc, target)


@pytest.mark.parametrize("framework", list(CASES))
def test_nan_weights_are_bad_and_only_the_weights(
    ckpt_corpus: Any, framework: str, tmp_path: Path
) -> None:
    case = _case(ckpt_corpus, framework, "nan", tmp_path)
    code, doc = _verify(case, damage.write_manifest(case, damage.manifest(case)))
    bad = sorted(p for p, v in _verdicts(doc).items() if v == "bad")
    assert code == 1 and doc["ok"] is False, doc
    if framework == "dcp":  # which rank's shard holds the poisoned weight is DCP's choice
        assert len(bad) == 1 and bad[0].endswith(".distcp"), doc
    else:
        assert bad == [CASES[framework][0]], doc
    assert any(w in _file(doc, bad[0])["detail"].lower() for w in ("nan", "non-finite")), doc


@pytest.mark.parametrize("framework", list(MISSING))
def test_a_folder_missing_a_shard_is_incomplete(
    ckpt_corpus: Any, framework: str, tmp_path: Path
) -> None:
    """The manifest is made after the loss: hashes alone see nothing missing."""
    case = _case(ckpt_corpus, framework, "missing", tmp_path)
    (case / MISSING[framework]).unlink()
    code, doc = _verify(case, damage.write_manifest(case, damage.manifest(case)))
    assert code == 1 and doc["ok"] is False, doc
    assert [u for u in _units_holding(doc, MISSING[framework]) if u["verdict"] == "bad"], doc


@pytest.mark.parametrize("framework", list(CASES))
def test_a_hostile_pickle_is_never_run_and_is_hash_only(
    ckpt_corpus: Any, framework: str, tmp_path: Path
) -> None:
    case = _case(ckpt_corpus, framework, "hostile", tmp_path)
    note = json.loads((ckpt_corpus[framework][0] / "hostile.json").read_text())
    marker = Path(note["marker"])
    _, doc = _verify(case, damage.write_manifest(case, damage.manifest(case)))
    assert not marker.exists(), f"rgt verify ran the pickle in {note['file']}"
    hostile = _file(doc, note["file"])
    assert hostile["verdict"] == "hash_only" and note["global"] in hostile["detail"], hostile
    _prove_the_payload_is_live(case / note["file"], marker)


def _prove_the_payload_is_live(path: Path, marker: Path) -> None:
    """Without this, a payload that never worked would make the test above pass vacuously."""
    load = ("import pickle, sys, torch, zipfile; p = sys.argv[1]; "
            "torch.load(p, weights_only=False) if zipfile.is_zipfile(p) "
            "else pickle.load(open(p, 'rb'))")  # fmt: skip
    subprocess.run([sys.executable, "-c", load, str(path)], capture_output=True, timeout=120)
    try:
        assert marker.exists(), f"the hostile payload in {path} did not run even when unpickled"
    finally:
        marker.unlink(missing_ok=True)


def _file(doc: dict[str, Any], rel: str) -> dict[str, Any]:
    [found] = [f for f in doc["files"] if f["path"] == rel]
    return found


def _assert_bad(code: int, doc: dict[str, Any], target: str) -> None:
    assert code == 1 and doc["ok"] is False, doc
    assert _verdicts(doc)[target] == "bad", doc
    assert doc["summary"]["bad"] >= 1, doc["summary"]
    for unit in _units_holding(doc, target):
        assert unit["verdict"] == "bad", unit
