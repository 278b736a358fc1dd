"""A fleet that cannot run as one group is refused before anything starts: no job recorded, no
job directory on any node, and an error that names the node and the fix."""

from __future__ import annotations

import json

import pytest

from tests.clirun import rgt
from tests.fleet.conftest import Fleet
from tests.sshd import add_unreachable


def refused(fleet: Fleet, *args: str) -> dict[str, str]:
    (fleet.project / "job.py").write_text("print('ran')\n")
    proc = rgt("run", *args, "--probe-seconds", "1", "--json", "--", "python3", "job.py",
               cwd=fleet.project)  # fmt: skip
    assert proc.returncode != 0, proc.stdout
    assert fleet.jobs_dirs() == [[], []]  # nothing started on either node
    listed = rgt("status", "--json")
    assert json.loads(listed.stdout)["jobs"] == [], listed.stdout  # nothing recorded
    doc: dict[str, str] = json.loads(proc.stdout)
    return doc


def test_a_machine_named_twice(fleet: Fleet) -> None:
    doc = refused(fleet, "a,b,a")
    assert "machine a is named twice in the fleet 'a,b,a'" in doc["message"], doc
    assert "--nproc_per_node" in doc["fix"]


def test_an_unknown_machine(fleet: Fleet) -> None:
    doc = refused(fleet, "a,nosuch")
    assert "nosuch" in doc["message"] and doc["error"] == "UnknownMachineError", doc


@pytest.mark.parametrize("nodes", ["3", "1"])
def test_nodes_that_disagree_with_the_list(fleet: Fleet, nodes: str) -> None:
    doc = refused(fleet, "a,b", "--nodes", nodes)
    assert doc["message"] == f"--nodes {nodes} but the fleet a,b is 2 machines (one node each)"
    assert "drop --nodes" in doc["fix"]


def test_zero_nodes(fleet: Fleet) -> None:
    doc = refused(fleet, "a,b", "--nodes", "0")
    assert doc["message"] == "resource nodes=0 (--nodes) is not valid", doc


def test_a_node_that_does_not_answer(fleet: Fleet) -> None:
    from rgt.state.store import Store

    add_unreachable(Store.open(), "gone", fleet.project.parent / "known_hosts", 1.0)
    doc = refused(fleet, "a,b,gone")
    assert doc["message"].startswith("node 2 (gone) does not answer: "), doc
    assert doc["message"].endswith("nothing was started on any node"), doc
    assert "leave it out of the fleet" in doc["fix"], doc
    assert not (fleet.roots[0] / ".rgt" / "code").exists()  # not even the code was copied


def test_a_node_with_other_code_under_the_same_snapshot(fleet: Fleet) -> None:
    from rgt.transport.snapshot import take_snapshot

    (fleet.project / "job.py").write_text("print('ran')\n")
    digest = take_snapshot(fleet.project).digest
    stale = fleet.roots[1] / ".rgt" / "code" / digest
    stale.mkdir(parents=True)
    (stale / "job.py").write_text("print('edited on the node')\n")
    doc = refused(fleet, "a,b")
    assert doc["message"].startswith(f"node 1 (b) has other code under the snapshot {digest[:12]}")
    assert "job.py" in doc["message"] and str(stale) in doc["fix"], doc


def test_a_single_machine_with_two_nodes_names_the_fleet(fleet: Fleet) -> None:
    doc = refused(fleet, "a", "--nodes", "2")
    assert "rgt run A,B -- CMD" in doc["fix"], doc


def test_the_help_names_the_fleet() -> None:
    text = rgt("run", "--help").stdout
    assert "--master-addr" in text and "A,B" in text


def test_a_forecast_is_per_machine(fleet: Fleet) -> None:
    doc = refused(fleet, "a,b", "--dry-run")
    assert doc["message"] == "--dry-run takes one machine, not the fleet a,b", doc
