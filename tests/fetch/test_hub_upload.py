"""`rgt pull JOB --to hf://ORG/REPO`: a real job's verified artifacts to a local Hub fake
(tests/fetch/hub_fake.py) with an upload dropped mid-file: the first run fails naming the
fix, the second resumes and sends nothing the Hub had acknowledged, a third sends nothing.
The token comes from stdin, reaches only the Hub's own origin, and is written nowhere."""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path

import pytest

from tests.clirun import ok, rgt
from tests.fetch.hub_fake import TOKEN, hub_fake

JOB = """
import os, pathlib, random
out = pathlib.Path(os.environ["RGT_OUTPUT_DIR"])
rng = random.Random(7)
(out / "weights.dat").write_bytes(bytes(rng.getrandbits(8) for _ in range(300_000)))
(out / "optimizer.dat").write_bytes(bytes(rng.getrandbits(8) for _ in range(200_000)))
(out / "config.json").write_text('{"hidden": 8}')
"""


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture
def pulled_job(tmp_path: Path) -> tuple[str, Path]:
    assert rgt("up", "local", "--name", "box", "--root", str(tmp_path / "root")).returncode == 0
    (tmp_path / "proj").mkdir()
    (tmp_path / "proj" / "job.py").write_text(JOB)
    job = ok(rgt("run", "box", "--probe-seconds", "0", "--json", "--", sys.executable, "job.py",
                 cwd=tmp_path / "proj"))["job_id"]  # fmt: skip
    assert rgt("logs", job, "-f").returncode == 0
    dest = tmp_path / "pulled"
    assert ok(rgt("pull", job, "--to", str(dest), "--json"))["ok"]
    return job, dest / "outputs"


def _push(job: str, api: str, token: str = TOKEN):  # type: ignore[no-untyped-def]
    return rgt("pull", job, "--to", "hf://org/model@main", "--hf-token", "-", "--json",
               stdin=token + "\n", env={"HF_ENDPOINT": api})  # fmt: skip


@pytest.mark.slow
def test_a_dropped_upload_resumes_and_resends_nothing_acknowledged(
    pulled_job: tuple[str, Path],
) -> None:
    job, outputs = pulled_job
    model = _sha((outputs / "weights.dat").read_bytes())
    optim = _sha((outputs / "optimizer.dat").read_bytes())
    with hub_fake() as (api, hub):
        hub.drop_puts[model] = 3  # every try of the first run is cut half way
        first = _push(job, api)
        assert first.returncode == 1, first.stdout + first.stderr
        assert "run the same command again" in first.stderr
        assert hub.puts == {optim: 1, model: 3} and optim in hub.objects and not hub.commits
        second = _push(job, api)
        assert second.returncode == 0, second.stdout + second.stderr
        data = json.loads(second.stdout)
        assert data["lfs_sent"] == ["outputs/weights.dat"]
        assert data["lfs_skipped"] == ["outputs/optimizer.dat"]  # acknowledged: not sent again
        assert hub.puts == {optim: 1, model: 4} and hub.batches[-1] == [model]
        (commit,) = hub.commits
        assert {line["key"] for line in commit} == {"header", "lfsFile", "file"}
        files = hub.repos["org/model"]
        for name in ("weights.dat", "optimizer.dat", "config.json"):
            assert files[f"outputs/{name}"] == (outputs / name).read_bytes()
        third = ok(_push(job, api))
        assert third["already_committed"] and len(hub.commits) == 1 and hub.puts[model] == 4
    api_calls = [(verb, auth) for verb, path, auth in hub.requests if verb == "POST"]
    assert api_calls and all(auth == f"Bearer {TOKEN}" for _verb, auth in api_calls)
    assert all(auth is None for verb, _p, auth in hub.requests if verb == "PUT")  # storage
    _nowhere(TOKEN.encode(), Path(os.environ["RGT_HOME"]))


@pytest.mark.slow
def test_a_wrong_token_and_a_changed_file_are_refused(pulled_job: tuple[str, Path]) -> None:
    job, outputs = pulled_job
    with hub_fake() as (api, hub):
        refused = _push(job, api, token="hf_not_the_right_one")
        assert refused.returncode == 1 and "401" in refused.stderr and "token" in refused.stderr
        (outputs / "config.json").write_text('{"hidden": 9}')  # edited after it was verified
        again = _push(job, api)
        assert again.returncode == 0, again.stderr  # re-pulled and verified before upload
        assert hub.repos["org/model"]["outputs/config.json"] == b'{"hidden": 8}'
    argv = rgt("pull", job, "--to", "hf://org/model", "--hf-token", TOKEN)
    assert argv.returncode == 2 and "shell history" in argv.stderr


def _nowhere(secret: bytes, root: Path) -> None:
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            assert secret not in path.read_bytes(), f"the token leaked into {path}"
