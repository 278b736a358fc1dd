"""A status read of N Slurm jobs is ONE round trip to the machine: the agent's files and the
controller's word come back from one ``sh -c`` (``_slurm_read``). Counted on the real
single-node Slurm by a wrapper around the backend's real transport: every call it makes to
the machine (run, read, write, exists, copy) counts as one round trip.

When the controller cannot be reached, the read is still one round trip, the controller is
asked once (not once per job), and every job keeps the agent's own word."""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from rgt.backends.slurm import SlurmBackend
from rgt.backends.statusdoc import JobStatus
from rgt.models import JobSpec, JobState, Machine
from rgt.state.store import utcnow
from rgt.transport.base import Transport
from tests.slurm import SlurmCluster, free_port

CALLS = ("run", "read_bytes", "write_bytes", "exists", "mkdir", "put", "get")


class Counting:
    """The real transport, with every call to the machine recorded (name, first argument)."""

    def __init__(self, real: Transport) -> None:
        self.real, self.calls = real, []  # type: list[tuple[str, Any]]

    def __getattr__(self, name: str) -> Any:
        found = getattr(self.real, name)
        if name not in CALLS:
            return found

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls.append((name, args[0] if args else None))
            return found(*args, **kwargs)

        return counted


def counted(backend: SlurmBackend) -> Counting:
    wrapper = Counting(backend.transport)
    backend.transport = wrapper  # type: ignore[assignment]
    return wrapper


def submit_five(backend: SlurmBackend) -> list[str]:
    ids = [f"rt-{i}" for i in range(5)]
    specs = [
        JobSpec(job_id=j, machine="cluster", command=(sys.executable, "-c", "print(1)"),
                created=utcnow())
        for j in ids
    ]  # fmt: skip
    backend.submit_many(specs)
    return ids


def wait_ended(backend: SlurmBackend, ids: Sequence[str]) -> dict[str, JobStatus]:
    deadline = time.monotonic() + 180
    while True:
        found = backend.read_jobs(ids).statuses
        if all(s.has_ended for s in found.values()) or time.monotonic() > deadline:
            return found
        time.sleep(0.5)


def controller_gone(cluster: SlurmCluster, tmp_path: Path) -> Path:
    """A copy of the cluster's slurm.conf whose controller port has nobody behind it."""
    text = re.sub(r"SlurmctldPort=\d+", f"SlurmctldPort={free_port()}", cluster.conf.read_text())
    conf = tmp_path / "gone.conf"
    conf.write_text(text + "MessageTimeout=1\n")  # a refused connect fails fast
    return conf


@pytest.mark.slow
def test_five_slurm_jobs_are_one_round_trip(
    slurm_cluster: SlurmCluster,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    root = tmp_path / "shared fs"
    root.mkdir()
    machine = Machine(name="cluster", backend="slurm", profile="slurm",
                      connection={"slurm": {"grace_s": 30}}, durable_root=str(root))  # fmt: skip
    backend = SlurmBackend(machine)
    ids = submit_five(backend)
    assert {s.state for s in wait_ended(backend, ids).values()} == {JobState.SUCCEEDED}

    wire = counted(backend)
    found = backend.read_jobs([*ids, "never-launched"]).statuses
    assert [name for name, _ in wire.calls] == ["run"], wire.calls
    assert [found[j].state for j in ids] == [JobState.SUCCEEDED] * 5
    assert all(found[j].scheduler and found[j].scheduler["state"] == "COMPLETED" for j in ids)
    assert found["never-launched"].exists is False

    machine = backend.read_jobs()  # `rgt watch`, the gate: the same one round trip
    watched = machine.statuses
    assert len(wire.calls) == 2 and sorted(watched) == ids
    assert len(machine.patrol["jobs"]) == 5 and watched["rt-0"].scheduler is not None

    monkeypatch.setenv("SLURM_CONF", str(controller_gone(slurm_cluster, tmp_path)))
    down = backend.read_jobs(ids).statuses
    assert len(wire.calls) == 3
    assert [down[j].state for j in ids] == [JobState.SUCCEEDED] * 5  # the agent's word
    errors = {str((down[j].scheduler or {}).get("error")) for j in ids}
    assert len(errors) == 1 and "contact" in errors.pop()  # asked once, said for each
