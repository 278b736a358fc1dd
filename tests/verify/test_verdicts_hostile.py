"""A pickle from a machine is never run: not by rgt.agent.verdicts, `rgt verify artifacts`,
`pull`, or the agent's finalize. Each hostile file's ``__reduce__`` would create a marker file;
the marker never appears and the verdict is ``hash_only`` naming the global (``posix.system``).
"""

from __future__ import annotations

import io
import json
import os
import pickle
import sys
from pathlib import Path

import pytest

from rgt.agent.verdicts import check_file, check_tree
from rgt.ui.views import disclosed
from tests.clirun import rgt

HOSTILE_WRITER = """
import os, pickle, sys, torch

class Evil:
    def __reduce__(self):
        return (os.system, ("touch " + MARKER,))

def write(folder):
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "state.pkl"), "wb") as handle:
        pickle.dump({"w": [1.0], "x": Evil()}, handle, protocol=2)
    torch.save({"w": torch.ones(3), "x": Evil()}, os.path.join(folder, "model.pt"))
    torch.save({"x": Evil()}, os.path.join(folder, "pytorch_model.bin"))
    torch.save({"x": Evil()}, os.path.join(folder, "legacy.pt"),
               _use_new_zipfile_serialization=False)
"""
NAMES = ("state.pkl", "model.pt", "pytorch_model.bin", "legacy.pt")


def write_hostile(folder: Path, marker: Path) -> None:
    scope: dict[str, object] = {"MARKER": str(marker)}
    exec(HOSTILE_WRITER, scope)  # the writer never runs the payload: pickling only names it
    scope["write"](str(folder))  # type: ignore[operator]
    assert not marker.exists()


def assert_hash_only(verdicts: dict[str, dict[str, object]], marker: Path) -> None:
    assert not marker.exists(), "a hostile pickle was executed"
    for name in NAMES:
        entry = verdicts[name]
        assert entry["verdict"] == "hash_only", entry
        assert "posix.system" in str(entry["detail"]), entry


def test_check_file_and_tree_never_run_the_pickle(tmp_path: Path) -> None:
    marker = tmp_path / "PWNED"
    write_hostile(tmp_path / "art", marker)
    files = {n: check_file(tmp_path / "art" / n).__dict__ for n in NAMES}
    assert_hash_only(files, marker)
    tree = check_tree(tmp_path / "art")
    assert tree.counts() == {"ok": 0, "hash_only": 4, "bad": 0} and tree.ok
    assert not marker.exists()


def test_stack_global_operands_are_tracked_through_the_memo_and_pops(tmp_path: Path) -> None:
    marker = tmp_path / "PWNED"
    # protocol 4: STACK_GLOBAL with memoized names; then a hand-made pickle that pushes a
    # harmless name last and POPs it, so only a real stack model finds "os.system"
    modern = pickle.dumps(os.system, protocol=4)
    tricky = (
        b"\x80\x04\x8c\x02os\x94\x8c\x06system\x94"  # 'os' 'system' (memoized)
        b"\x8c\x0bcollections\x8c\x0bOrderedDict00"  # pushed, then POPped twice
        b"\x93\x8c\x05touch\x85R."  # STACK_GLOBAL, ('touch',), REDUCE
    )
    for name, data, named in (
        ("modern.pkl", modern, "posix.system"),
        ("tricky.pkl", tricky, "code: os.system"),
    ):
        (tmp_path / name).write_bytes(data)
        verdict = check_file(tmp_path / name)
        assert verdict.verdict == "hash_only" and named in verdict.detail, verdict
    assert not marker.exists()


def test_allowed_names_never_reach_the_real_object(tmp_path: Path) -> None:
    # bytes(10**12) would exhaust memory: builtins.bytearray is allowed only on bytes
    buffer = io.BytesIO()
    buffer.write(b"\x80\x02cbuiltins\nbytearray\nJ\x00\x10\xa5\xd4\x85R.")
    (tmp_path / "bomb.pkl").write_bytes(buffer.getvalue())
    verdict = check_file(tmp_path / "bomb.pkl")
    assert verdict.verdict == "hash_only" and "bytearray" in verdict.detail


def test_rgt_verify_artifacts_never_runs_the_pickle(tmp_path: Path) -> None:
    marker = tmp_path / "PWNED"
    write_hostile(tmp_path / "art", marker)
    result = rgt("verify", "artifacts", str(tmp_path / "art"), "--json")
    assert result.returncode == 0, result.stderr  # hash_only satisfies the gate
    doc = json.loads(result.stdout)
    assert_hash_only({f["path"]: f for f in doc["files"]}, marker)
    assert doc["summary"]["hash_only"] == 4 and doc["summary"]["bad"] == 0


JOB = (
    HOSTILE_WRITER
    + """
write(os.environ["RGT_OUTPUT_DIR"])
"""
)


@pytest.mark.slow
def test_agent_finalize_and_pull_never_run_the_pickle(tmp_path: Path) -> None:
    marker = tmp_path / "PWNED"
    project = tmp_path / "proj"
    project.mkdir()
    (project / "job.py").write_text(f"MARKER = {str(marker)!r}\n" + JOB)
    assert rgt("up", "local", "--name", "box", "--root", str(tmp_path / "root")).returncode == 0
    run = rgt(
        "run", "box", "--probe-seconds", "1", "--json", "--", sys.executable, "job.py", cwd=project
    )
    assert run.returncode == 0, run.stderr
    job_id = json.loads(run.stdout)["job_id"]
    watched = rgt("watch", job_id, "--interval", "0.3", "--json")
    assert json.loads(watched.stdout)["state"] == "succeeded", watched.stdout
    manifest = json.loads(next((tmp_path / "root").rglob("manifest.json")).read_text())
    by_name = {Path(f["path"]).name: f for f in manifest["files"]}
    assert_hash_only(by_name, marker)  # the agent's verdicts
    assert manifest["verdicts"] == {"ok": 0, "hash_only": 4, "bad": 0}
    pulled = rgt("pull", job_id, "--to", str(tmp_path / "pulled"), "--json")
    assert pulled.returncode == 0, pulled.stdout + pulled.stderr
    report = json.loads(pulled.stdout)["verify"]
    assert_hash_only({Path(f["path"]).name: f for f in report["files"]}, marker)
    human = rgt("pull", job_id, "--to", str(tmp_path / "pulled"))
    said = "4 artifact(s): 0 ok, 4 hash_only (pickles naming code: posix.system), 0 bad"
    assert said in human.stdout, human.stdout
    assert said in watched.stdout, watched.stdout  # what `rgt watch` showed: the same sentence
    down = rgt("down", "box", "--check", "--json")
    gate = json.loads(down.stdout)
    assert down.returncode == 3 and gate["error"] == "GateRefused"  # only the approval lacks
    verified = next(c for c in gate["verdict"]["checks"] if c["name"] == "verified")
    assert verified["ok"] and "hash_only" in verified["detail"], verified  # disclosed, passing
    assert "legacy.pt" in verified["detail"] and f"job {job_id}: 4 file(s)" in verified["detail"]
    (line,) = disclosed(verified)  # the dashboard's gate card shows it under the check
    assert line.startswith("hash_only (bytes match the manifest") and job_id in line
    assert not marker.exists()
