"""`rgt up` dispatches through one registry (``rgt.platforms``): the entries, their refusals,
and the CLI reaching each through it (no branch per platform left in the front end)."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

from rgt.cli import machines as cli_machines
from rgt.errors import GateRefused, UsageError
from rgt.platforms import UpRequest, platforms, registers, registrar, up
from rgt.state.store import Store
from tests.clirun import rgt


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Store:
    monkeypatch.setenv("RGT_HOME", str(tmp_path / "home"))
    return Store.open()


def test_every_non_ssh_platform_has_one_entry_and_the_rest_fall_through() -> None:
    table = platforms()
    assert set(table) == {"kubernetes", "kaggle", "colab", "kaggle-notebook"}, table
    assert registrar("colab") is registrar("kaggle-notebook")
    # local, slurm and every SSH rental share the machines entry (rgt.lifecycle.machines.register)
    assert registrar("local") is registrar("slurm") is registrar("autodl")
    assert registrar("autodl") is not registrar("kubernetes")


def test_a_profile_registered_twice_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="registered twice"):
        registers("kaggle")(lambda store, request: None)  # type: ignore[arg-type,return-value]


def test_local_through_the_registry(store: Store, tmp_path: Path) -> None:
    result = up(store, UpRequest(profile="local", name="here", root=str(tmp_path / "root")))
    assert result.machine.backend == "local" and store.machine("here").durable_root.endswith("root")
    with pytest.raises(UsageError, match="takes no --ssh"):
        up(store, UpRequest(profile="local", name="there", ssh="ssh root@127.0.0.1"))


@pytest.mark.parametrize("profile", ["kubernetes", "kaggle", "colab"])
def test_api_platforms_refuse_an_ssh_line_before_anything_is_registered(
    store: Store, profile: str
) -> None:
    with pytest.raises(UsageError, match="takes no --ssh") as caught:
        up(store, UpRequest(profile=profile, name="m", ssh="ssh -p 2222 root@127.0.0.1"))
    assert "generic-ssh" in caught.value.fix
    assert [m.name for m in store.machines()] == []


def test_a_rental_gpu_on_a_cluster_is_refused_with_the_per_run_fix(store: Store) -> None:
    class Rental:
        gpu = "A100"

    with pytest.raises(UsageError, match="rents nothing") as caught:
        up(store, UpRequest(profile="kubernetes", name="k", vendor=Rental()))
    assert "rgt run k --gpus N" in caught.value.fix


def test_an_active_machine_is_not_replaced_by_another_platform(
    store: Store, tmp_path: Path
) -> None:
    from rgt.models import JobSpec
    from rgt.state.store import utcnow

    up(store, UpRequest(profile="local", name="box", root=str(tmp_path / "r")))
    store.add_job(JobSpec(job_id="job1", machine="box", command=("true",), created=utcnow()))
    with pytest.raises(GateRefused, match="active with 1 job"):
        up(store, UpRequest(profile="kubernetes", name="box", kube={"namespace": "x"}))
    assert store.machine("box").backend == "local"


def test_the_cli_up_body_has_no_branch_per_platform() -> None:
    body = ast.parse(inspect.getsource(cli_machines.up.callback))  # type: ignore[union-attr]
    compared = {
        node.value
        for node in ast.walk(body)
        if isinstance(node, ast.Constant) and node.value in ("kubernetes", "kaggle", "colab")
    }
    assert compared == set(), compared


@pytest.mark.slow
def test_rgt_up_on_the_command_line_goes_through_the_registry(tmp_path: Path) -> None:
    env = {"RGT_HOME": str(tmp_path / "home")}
    refused = rgt("up", "kubernetes", "--name", "k", "--ssh", "ssh root@127.0.0.1", env=env)
    assert refused.returncode != 0 and "takes no --ssh" in refused.stderr, refused.stderr
    done = rgt("up", "local", "--name", "here", "--json", env=env)
    assert done.returncode == 0, done.stderr
    assert '"backend": "local"' in done.stdout.replace('":"', '": "')
