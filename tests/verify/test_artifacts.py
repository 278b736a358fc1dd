"""rgt.verify.artifacts on real files written by torch, safetensors, numpy and Pillow."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from PIL import Image
from safetensors.numpy import save_file as save_safetensors_np
from safetensors.torch import save_file as save_safetensors

from rgt._fs import sha256_file
from rgt.errors import VerifyError
from rgt.verify.artifacts import (
    FileCheck,
    load_manifest,
    verify_file,
    verify_tree,
)


def write_good_tree(root: Path) -> None:
    """One valid artifact of every kind, some in subdirectories."""
    (root / "ckpt").mkdir(parents=True, exist_ok=True)
    torch.save({"model": {"w": torch.randn(4, 3)}, "step": 7}, root / "ckpt" / "last.pt")
    save_safetensors(
        {"w": torch.randn(2, 2, dtype=torch.bfloat16)}, str(root / "model.safetensors")
    )
    np.savez(root / "preds.npz", y=np.arange(10.0), labels=np.arange(10))
    np.save(root / "emb.npy", np.ones((3, 4), dtype=np.float32))
    (root / "metrics.json").write_text(json.dumps({"psnr": 31.2}))
    (root / "history.jsonl").write_text('{"step": 1}\n{"step": 2}\n')
    (root / "source_data.csv").write_text("x,y\n1,2\n3,4\n")
    Image.new("RGB", (8, 6), "red").save(root / "fig.png")
    (root / "notes.txt").write_text("free text")


def manifest_for(root: Path) -> dict[str, Any]:
    files = [p for p in sorted(root.rglob("*")) if p.is_file() and p.name != "manifest.json"]
    entries = [
        {
            "path": p.relative_to(root).as_posix(),
            "bytes": p.stat().st_size,
            "sha256": sha256_file(str(p)),
        }
        for p in files
    ]
    return {
        "schema": "rgt.manifest/1",
        "job_id": "j1",
        "created": "2025-01-01T00:00:00Z",
        "state": "succeeded",
        "files": entries,
        "totals": {"files": len(entries)},
    }


def by_path(checks: tuple[FileCheck, ...]) -> dict[str, FileCheck]:
    return {check.path: check for check in checks}


def test_every_kind_loads_and_passes(tmp_path: Path) -> None:
    write_good_tree(tmp_path)
    report = verify_tree(tmp_path, manifest_for(tmp_path))
    checks = by_path(report.files)
    assert report.ok, [c for c in report.files if not c.ok]
    assert {c.kind for c in report.files} == {
        "torch",
        "safetensors",
        "npz",
        "npy",
        "json",
        "jsonl",
        "csv",
        "image",
        "other",
    }
    assert checks["ckpt/last.pt"].detail.startswith("1 tensor, 12 values, all finite")
    assert checks["source_data.csv"].detail == "2 rows × 2 columns"
    assert "sha256 matches" in checks["notes.txt"].detail
    assert checks["fig.png"].sha256 == sha256_file(str(tmp_path / "fig.png"))


def test_without_manifest_unknown_kinds_say_nothing_vouches(tmp_path: Path) -> None:
    write_good_tree(tmp_path)
    report = verify_tree(tmp_path)
    assert report.ok
    assert "no manifest sha256" in by_path(report.files)["notes.txt"].detail


def test_hostile_paths(hostile_dir: Path) -> None:
    write_good_tree(hostile_dir / "sub dir")
    report = verify_tree(hostile_dir, manifest_for(hostile_dir))
    assert report.ok
    assert "sub dir/ckpt/last.pt" in by_path(report.files)


@pytest.mark.parametrize(
    "writer, reason",
    [
        (lambda p: torch.save({"w": torch.tensor([1.0, float("nan")])}, p / "a.pt"), "non-finite"),
        (lambda p: np.save(p / "a.npy", np.array([1.0, np.inf])), "non-finite"),
        (lambda p: np.save(p / "a.npy", np.zeros((0, 3))), "no values"),
        (
            lambda p: save_safetensors_np(
                {"w": np.array([np.nan], np.float32)}, str(p / "a.safetensors")
            ),
            "non-finite",
        ),
        (lambda p: (p / "a.json").write_text('{"loss": NaN}'), "NaN"),
        (lambda p: (p / "a.json").write_text("{}"), "empty"),
        (lambda p: (p / "a.json").write_text('{"a": 1'), "invalid JSON"),
        (lambda p: (p / "a.jsonl").write_text('{"a": 1}\n{"a": '), "line 2"),
        (lambda p: (p / "a.csv").write_text("x,y\n"), "no data rows"),
        (lambda p: (p / "a.csv").write_text("x,y\n1,2\n3"), "row 3"),
        (lambda p: (p / "a.png").write_bytes(b"\x89PNG\r\n\x1a\nnot really"), "PNG"),
        (lambda p: (p / "a.bin").write_bytes(b""), "empty file"),
    ],
)
def test_bad_artifacts_fail_with_reason(tmp_path: Path, writer: Any, reason: str) -> None:
    writer(tmp_path)
    report = verify_tree(tmp_path)
    assert not report.ok
    (check,) = report.files
    assert not check.ok
    assert reason in check.detail


def test_torch_pickle_naming_a_class_is_hash_only_with_its_name(tmp_path: Path) -> None:
    from fractions import Fraction

    torch.save({"w": torch.ones(2), "cfg": Fraction(1, 3)}, tmp_path / "a.pt")
    check = verify_file(tmp_path / "a.pt")
    assert (check.ok, check.verdict) == (True, "hash_only")
    assert "fractions.Fraction" in check.detail and "no manifest sha256" in check.detail


def test_data_only_pickles_are_ok_without_tensors(tmp_path: Path) -> None:
    torch.save({"step": 3, "name": "x", "cfg": Path("x")}, tmp_path / "a.pt")
    np.save(tmp_path / "b.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    for name in ("a.pt", "b.npy"):
        check = verify_file(tmp_path / name)
        assert check.verdict == "ok", check.detail


def test_plain_dict_of_numbers_is_a_valid_torch_file(tmp_path: Path) -> None:
    torch.save({"step": 3, "best": 0.5}, tmp_path / "meta.pt")
    check = verify_file(tmp_path / "meta.pt")
    assert check.ok, check.detail
    assert "2 numbers" in check.detail


def test_truncated_checkpoint_fails_on_content_even_with_matching_declared_hash(
    tmp_path: Path,
) -> None:
    path = tmp_path / "model.pt"
    torch.save({"w": torch.randn(256, 256)}, path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    check = verify_file(path, expected_sha256=sha256_file(str(path)), expected_bytes=len(data) // 2)
    assert not check.ok
    assert "damaged zip archive" in check.detail


def test_checkpoint_with_any_suffix_is_recognised_as_torch(tmp_path: Path) -> None:
    torch.save({"w": torch.ones(3)}, tmp_path / "step-00000100.data")
    check = verify_file(tmp_path / "step-00000100.data")
    assert (check.kind, check.ok) == ("torch", True)


def test_declared_size_and_hash_mismatch(tmp_path: Path) -> None:
    write_good_tree(tmp_path)
    manifest = manifest_for(tmp_path)
    with (tmp_path / "metrics.json").open("a") as handle:
        handle.write(" ")  # still valid JSON: only the declared size and hash can catch it
    np.save(tmp_path / "emb.npy", np.zeros((3, 4), dtype=np.float32))  # same size, new content
    checks = by_path(verify_tree(tmp_path, manifest).files)
    assert "size mismatch" in checks["metrics.json"].detail
    assert "sha256 mismatch" in checks["emb.npy"].detail


def test_missing_and_unexpected(tmp_path: Path) -> None:
    write_good_tree(tmp_path)
    manifest = manifest_for(tmp_path)
    (tmp_path / "fig.png").unlink()
    (tmp_path / ".tmp-x.part").write_bytes(b"partial")
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    report = verify_tree(tmp_path, manifest)
    assert report.missing == ("fig.png",)
    assert report.unexpected == (".tmp-x.part",)
    assert all(c.ok for c in report.files)
    assert not report.ok
    assert report.to_json()["ok"] is False


def test_unsafe_manifest_paths_fail_and_are_not_read(tmp_path: Path) -> None:
    secret = tmp_path / "secret.json"
    secret.write_text('{"a": 1}')
    root = tmp_path / "root"
    root.mkdir()
    (root / "ok.json").write_text('{"a": 1}')
    manifest = manifest_for(root)
    digest = sha256_file(str(secret))
    manifest["files"] += [
        {"path": "../secret.json", "bytes": 8, "sha256": digest},
        {"path": str(secret), "bytes": 8, "sha256": digest},
    ]
    report = verify_tree(root, manifest)
    bad = [c for c in report.files if not c.ok]
    assert sorted(c.detail for c in bad) == [
        "unsafe manifest path: '..' escapes the root",
        "unsafe manifest path: absolute path",
    ]
    assert all(c.sha256 == "" for c in bad)


def test_symlinks_are_reported_not_followed_out_of_root(tmp_path: Path) -> None:
    outside = tmp_path / "outside.json"
    outside.write_text('{"a": 1}')
    root = tmp_path / "root"
    (root / "d").mkdir(parents=True)
    (root / "d" / "in.json").write_text('{"a": 2}')
    os.symlink(outside, root / "escape.json")
    os.symlink("/", root / "slash")
    os.symlink("d/in.json", root / "alias.json")
    checks = by_path(verify_tree(root).files)
    assert not checks["escape.json"].ok and "outside the root" in checks["escape.json"].detail
    assert not checks["slash"].ok and "not followed" in checks["slash"].detail
    assert checks["alias.json"].ok and "inside the root" in checks["alias.json"].detail


def test_manifest_validation_names_the_field(tmp_path: Path) -> None:
    bad = {"schema": "rgt.manifest/1", "files": [{"path": "a", "bytes": -1, "sha256": "0" * 64}]}
    path = tmp_path / "manifest.json"
    path.write_text(json.dumps(bad))
    with pytest.raises(VerifyError, match=r"files\[0\]\.bytes"):
        load_manifest(path)
    path.write_text(json.dumps({"schema": "other"}))
    with pytest.raises(VerifyError, match="schema"):
        load_manifest(path)


def test_empty_tree_is_not_ok(tmp_path: Path) -> None:
    report = verify_tree(tmp_path)
    assert report.files == () and not report.ok


def test_progress_sees_every_file(tmp_path: Path) -> None:
    write_good_tree(tmp_path)
    seen: list[str] = []
    report = verify_tree(tmp_path, progress=lambda check: seen.append(check.path))
    assert sorted(seen) == sorted(c.path for c in report.files)
