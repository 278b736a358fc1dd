"""`rgt run a,b -- CMD`: one job on two machines (two real sshd on loopback ports), one agent per
node under one job id, each given the rendezvous variables; the job's status is the group's,
`rgt logs --node R` reads node R's log, `rgt pull` brings every node's artifacts into
``node-R/`` and verifies them, and each machine's teardown gate counts the job."""

from __future__ import annotations

import json
from pathlib import Path

from tests.clirun import rgt
from tests.fleet.conftest import Fleet, status, wait_ended

JOB = """
import json, os, pathlib, time
keys = ("RGT_JOB_ID", "RGT_NNODES", "RGT_NODE_RANK", "RGT_MASTER_ADDR", "RGT_MASTER_PORT")
seen = {k: os.environ.get(k) for k in keys}
print("NODE " + json.dumps(seen), flush=True)
out = pathlib.Path(os.environ["RGT_OUTPUT_DIR"])
(out / "node.json").write_text(json.dumps(seen))
time.sleep(float(os.environ.get("NAP", "0")))
"""


def test_a_fleet_runs_one_job_on_both_machines(fleet: Fleet) -> None:
    (fleet.project / "job.py").write_text(JOB)
    launched = rgt("run", "a,b", "--probe-seconds", "1", "--env", "NAP=6", "--json", "--",
                   "python3", "job.py", cwd=fleet.project)  # fmt: skip
    assert launched.returncode == 0, launched.stderr[-3000:]
    job_id = json.loads(launched.stdout)["job_id"]
    running = status(job_id)  # read from both nodes while they run
    assert running["state"] == "running", running
    assert [(n["node"], n["machine"], n["state"], n["agent_alive"]) for n in running["nodes"]] == [
        (0, "a", "running", True),
        (1, "b", "running", True),
    ]
    watched = rgt("watch", job_id, "--json")  # follows the group until it ends
    assert watched.returncode == 0, watched.stderr[-2000:]
    assert json.loads(watched.stdout)["state"] == "succeeded"
    job = status(job_id)
    assert job["state"] == "succeeded", job
    assert fleet.jobs_dirs() == [[job_id], [job_id]]  # one job id, one dir on each node

    seen = []
    for rank in (0, 1):
        log = rgt("logs", job_id, "--node", str(rank))
        assert log.returncode == 0, log.stderr
        (line,) = [x for x in log.stdout.splitlines() if x.startswith("NODE ")]
        seen.append(json.loads(line[5:]))
    port = seen[0]["RGT_MASTER_PORT"]
    assert port.isdigit() and 0 < int(port) < 65536
    assert seen == [
        {"RGT_JOB_ID": job_id, "RGT_NNODES": "2", "RGT_NODE_RANK": str(rank),
         "RGT_MASTER_ADDR": "127.0.0.1", "RGT_MASTER_PORT": port}
        for rank in (0, 1)
    ]  # fmt: skip
    bad_node = rgt("logs", job_id, "--node", "2")
    assert bad_node.returncode != 0 and "no node 2" in bad_node.stderr

    dest = fleet.project.parent / "pulled"
    pulled = rgt("pull", job_id, "--to", str(dest), "--json")
    assert pulled.returncode == 0, pulled.stderr[-3000:]
    report = json.loads(pulled.stdout)
    assert report["ok"] is True and report["copied"] == 2, report
    for rank in (0, 1):
        node = json.loads((dest / f"node-{rank}" / "outputs" / "node.json").read_text())
        assert node["RGT_NODE_RANK"] == str(rank)
    assert sorted(f["path"] for f in report["verify"]["files"]) == [
        "node-0/outputs/node.json",
        "node-1/outputs/node.json",
    ]
    for name in fleet.names:  # every machine's gate counts the fleet job, pulled and verified
        gate = rgt("down", name, "--json", "--check")
        refused = json.loads(gate.stdout)  # only a human's approval is missing
        assert gate.returncode == 3 and refused["error"] == "GateRefused", refused
        assert refused["fix"] == (
            f"everything is pulled and verified; a human must run `rgt approve {name}`"
        )
        checks = {c["name"]: c for c in refused["verdict"]["checks"]}
        assert checks["known"]["detail"] == "all 1 job(s) on the machine are known here"
    assert status(job_id)["state"] == "succeeded"


def test_master_addr_and_a_pulled_copy_changed_on_one_node_fail_each_gate(
    fleet: Fleet, tmp_path: Path
) -> None:
    (fleet.project / "job.py").write_text(JOB)
    launched = rgt("run", "a,b", "--probe-seconds", "1", "--json", "--master-addr", "node0.lan",
                   "--", "python3", "job.py", cwd=fleet.project)  # fmt: skip
    job_id = json.loads(launched.stdout)["job_id"]
    assert wait_ended(job_id)["state"] == "succeeded"
    dest = tmp_path / "pulled"
    assert rgt("pull", job_id, "--to", str(dest), "--json").returncode == 0
    for rank in (0, 1):  # --master-addr: the address the nodes are given, not the one rgt uses
        node = json.loads((dest / f"node-{rank}" / "outputs" / "node.json").read_text())
        assert node["RGT_MASTER_ADDR"] == "node0.lan"
    resumed = rgt("resume", job_id, "--json")  # one node's agent would join no group
    assert resumed.returncode == 2 and "is a fleet (a, b)" in resumed.stdout, resumed.stdout
    (dest / "node-1" / "outputs" / "node.json").write_text("{}")  # no longer what was verified
    for name in fleet.names:
        gate = rgt("down", name, "--json", "--check")
        reasons = json.loads(gate.stdout)["reasons"]
        assert gate.returncode == 3 and any(
            r.startswith(f"job {job_id}: the pulled copy changed since it was verified: "
                         "node-1/outputs/node.json changed size") for r in reasons
        ), reasons  # fmt: skip
