"""The README's SSH walkthrough, command by command, against a real sshd: up, audit, push, run,
watch, pull, down (refused until a human approves)."""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path

from tests import clirun
from tests.clirun import ok
from tests.sshd import SshServer

JOB = """
import json, os, pathlib
data = pathlib.Path(os.environ["DATA"]).read_text()
out = pathlib.Path(os.environ["RGT_OUTPUT_DIR"])
(out / "result.json").write_text(json.dumps({"data": data}))
print("step 1 loss 0.5", flush=True)
"""


rgt = partial(clirun.rgt, timeout=180)


def test_walkthrough(sshd_server: SshServer, tmp_path: Path) -> None:
    root = tmp_path / "remote root ü"
    ok(
        rgt(
            "up",
            "generic-ssh",
            "--name",
            "box",
            "--ssh",
            sshd_server.ssh_line,
            "--price",
            "0.6",
            "--root",
            str(root),
            "--json",
        )
    )
    audited = rgt("audit", "box", "--json")
    audit = json.loads(audited.stdout)
    # This test machine has no GPU: audit says so as a failing finding (exit 1) with its fix.
    assert audited.returncode == (0 if audit["ok"] else 1)
    assert audit["machine"] == "box" and audit["readings"]["tiers"]
    assert all(f["fix"] for f in audit["findings"] if f["severity"] == "bug")
    project = tmp_path / "proj"
    (project / "data").mkdir(parents=True)
    (project / "data" / "train.txt").write_text("hello data")
    (project / "job.py").write_text(JOB)
    pushed = ok(rgt("push", "box", "data", "--json", cwd=project))
    assert pushed["verified"] is True
    files = pushed["files"]
    assert isinstance(files, list) and [f["path"] for f in files] == ["data/train.txt"]
    remote_data = f"{pushed['remote']}/data/train.txt"  # rsync semantics: the folder itself
    gated = rgt("run", "box", "--json", "--", "python3", "job.py", cwd=project)
    if not audit["ok"]:  # the last audit's error (no GPU here) stops `run` until --force
        assert gated.returncode == 3 and "--force" in gated.stdout + gated.stderr
    launched = ok(
        rgt(
            "run",
            "box",
            "--force",
            "--env",
            f"DATA={remote_data}",
            "--probe-seconds",
            "2",
            "--json",
            "--",
            "python3",
            "job.py",
            cwd=project,
        )
    )
    job_id = str(launched["job_id"])
    assert ok(rgt("watch", job_id, "--json"))["state"] == "succeeded"
    refused = rgt("down", "box", "--json")
    assert refused.returncode == 3
    pulled = ok(rgt("pull", job_id, "--to", str(tmp_path / "pulled"), "--json"))
    assert pulled["ok"] is True
    result = json.loads((tmp_path / "pulled" / "outputs" / "result.json").read_text())
    assert result == {"data": "hello data"}
    still = rgt("down", "box", "--json")
    assert still.returncode == 3
    verdict = json.loads(still.stdout)["verdict"]
    assert [c["name"] for c in verdict["checks"] if not c["ok"]] == ["approved"]
    assert any("money clock" in note for note in json.loads(still.stdout)["notes"])
