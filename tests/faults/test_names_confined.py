"""Names chosen outside rgt × every writer of such a name: nothing lands outside the destination.

A hub (or the mirror AutoDL points jobs at) answers its file list; a machine answers a
manifest; Kaggle answers a version's output listing; a pod answers a tar. Each answers every
name of ``tests/fetch/names.py`` (``..``, absolute, inner ``..``, NUL, backslash, drive, empty
part, a symlinked parent in the destination) and the trial checks the area around the
destination (a victim dir with a precious file) byte for byte, and that the writer failed with
its reason instead of "succeeding".

- ``fetch`` (the stdlib downloader, and the ``huggingface_hub`` path where the machine's Python
  has it): ``rgt fetch box hf://org/repo`` on the local machine against a hostile hub on
  127.0.0.1; the fetch job must fail and its log name the refusal.
- ``pull``: the finished job's manifest lists the name (and the machine holds the file where a
  file can have that name); the pull must refuse.
- ``kaggle``: a version's output listing names it under the job dir; rgt.notebooks.kaggle skips
  it (its documented rule for names it will not place) and a planted link is refused.
- ``k8s``: a pod's tar carries a member of that name; extraction refuses it with rgt's error.
"""

from __future__ import annotations

import hashlib
import importlib.util
import io
import json
import tarfile
from pathlib import Path

import pytest

from rgt.notebooks.kaggle import _inside
from rgt.notebooks.kaggle_api import OutputFile
from tests.faults.harness import assert_refused_pull
from tests.faults.world import World
from tests.fetch.hostile_hub import BODY, hub
from tests.fetch.names import IDS, NAMES, Area, Hostile, make_area, outside, snapshot

BY_ID = dict(zip(IDS, NAMES, strict=True))
REFUSED = ("is refused", "not followed", "not written through")


@pytest.mark.parametrize("library", [False, True], ids=["stdlib", "huggingface_hub"])
@pytest.mark.parametrize("kind", IDS)
def test_fetch_keeps_hub_names_under_to(fresh: World, kind: str, library: bool) -> None:
    if library and importlib.util.find_spec("huggingface_hub") is None:
        pytest.skip("the machine's Python has no huggingface_hub")
    hostile = BY_ID[kind]
    area = make_area(fresh.trial_dir(f"fetch-{kind}-{library}"), hostile)
    before = snapshot(area)
    with hub() as (url, state):
        state.names = ["config.json", hostile.make(area.root)]
        out = fresh.cli(
            "fetch", "box", "hf://org/repo", "--to", str(area.dest), "--wait", "12", "--json",
            HF_ENDPOINT=url, RGT_FETCH_HUB="1" if library else "0", RGT_FETCH_BACKOFF_S="0.01",
            HF_HUB_DISABLE_TELEMETRY="1",
        )  # fmt: skip
    assert outside(before, area) == [], f"written outside --to:\n{out}"
    doc = out.doc()
    assert out.code == 1 and doc["state"] == "failed", f"the fetch did not fail:\n{out}"
    assert any(word in doc["log_tail"] for word in REFUSED), doc["log_tail"]
    assert ("with huggingface_hub" in doc["log_tail"]) is library, doc["log_tail"]


@pytest.mark.parametrize("kind", IDS)
def test_pull_keeps_manifest_names_under_to(fresh: World, kind: str) -> None:
    hostile = BY_ID[kind]
    area = make_area(fresh.trial_dir(f"pull-{kind}"), hostile)
    name = hostile.make(area.root)
    _machine_holds(fresh.job_dir, name)
    manifest = json.loads((fresh.job_dir / "manifest.json").read_text())
    digest = hashlib.sha256(BODY).hexdigest()
    manifest["files"].append({"path": name, "bytes": len(BODY), "sha256": digest})
    (fresh.job_dir / "manifest.json").write_text(json.dumps(manifest))
    before = snapshot(area)
    out = fresh.cli("pull", fresh.job_id, "--to", str(area.dest), "--json")
    assert outside(before, area) == [], f"written outside --to:\n{out}"
    assert_refused_pull(out)


def _machine_holds(job_dir: Path, name: str) -> None:
    """The file the manifest names, on the machine, where a file can have that name."""
    if "\x00" in name or name.startswith("/") or ".." in name.split("/"):
        return
    path = job_dir / name.replace("//", "/")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(BODY)


@pytest.mark.parametrize("kind", IDS)
def test_kaggle_output_names_stay_in_the_mirror(tmp_path: Path, kind: str) -> None:
    from rgt._confine import confined
    from rgt.errors import UnsafeNameError

    hostile = BY_ID[kind]
    area = make_area(tmp_path, hostile)
    area.dest.mkdir(exist_ok=True)
    before = snapshot(area)
    prefix = "rgt/.rgt/jobs/j1/"
    rel = _inside(OutputFile(prefix + hostile.make(area.root), "u"), prefix)
    if rel is not None:  # a name kaggle.py keeps is placed through rgt._confine, or refused
        with pytest.raises(UnsafeNameError):
            Path(confined(str(area.dest), rel)).write_bytes(BODY)
    assert outside(before, area) == []


@pytest.mark.parametrize("kind", IDS)
def test_k8s_tar_members_stay_in_the_destination(tmp_path: Path, kind: str) -> None:
    from rgt.backends._k8s_exec import confined_member
    from rgt.errors import UnsafeNameError

    hostile = BY_ID[kind]
    if kind == "nul":
        pytest.skip("a tar member's name cannot hold a NUL (the field ends at one)")
    area = make_area(tmp_path, hostile)
    area.dest.mkdir(exist_ok=True)
    before = snapshot(area)
    with pytest.raises(UnsafeNameError), tarfile.open(fileobj=_tar_of(hostile, area)) as tar:
        tar.extractall(area.dest, filter=confined_member)
    assert outside(before, area) == []


def _tar_of(hostile: Hostile, area: Area) -> io.BytesIO:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name in ("./ok.txt", hostile.make(area.root)):
            info = tarfile.TarInfo(name)
            info.size = len(BODY)
            tar.addfile(info, io.BytesIO(BODY))
    buffer.seek(0)
    return buffer
