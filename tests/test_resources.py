"""The resource vocabulary on every run: bad input said precisely, each backend's translation
(the Kubernetes manifest) and refusals (Kubernetes: Slurm keys and pods > 1; ssh/local: what no
scheduler enforces, nodes > 1), and ``rgt run``'s flags over ``rgt.toml`` over the machine's
defaults. Slurm's translation is checked on the real cluster (tests/backends/
test_resources_slurm.py)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from rgt.backends._render.fit import box_gpus, fit
from rgt.errors import NotSupportedError, SpecError, UsageError
from rgt.models import JobSpec, Machine
from rgt.resources import Resources
from tests.clirun import ok, rgt


@pytest.mark.parametrize(
    ("given", "fix"),
    [
        ({"nodes": 0}, "nodes must be a whole number >= 1"),
        ({"gpus": "A100:x"}, "gpus must be TYPE:COUNT with a whole-number COUNT, not 'x'"),
        ({"gpus": "-1"}, "gpus must be a count >= 0 (0: no GPU, the job sees none)"),
        ({"gpus": "A100:-2"}, "gpus must be a count >= 0"),
        ({"mem_gb": 0}, "mem_gb must be a number of GiB > 0"),
        ({"gpus": "2xA100"}, "gpus must be TYPE:COUNT, here A100:2"),
        ({"gpus": "RTX4090x2"}, "gpus must be TYPE:COUNT, here RTX4090:2"),
        ({"gpus": "A100"}, "the count is missing, e.g. A100:1"),
        ({"gpus": "A 100:1"}, "TYPE one word"),
        ({"gpus": "1000"}, "a count per node or TYPE:COUNT"),
        ({"nodes": "two"}, "nodes must be a number"),
    ],
)
def test_bad_input_names_the_key_the_flag_and_the_fix(given: dict[str, object], fix: str) -> None:
    with pytest.raises(SpecError) as caught:
        Resources.from_mapping(given)
    key = next(iter(given))
    assert caught.value.field == key
    assert caught.value.fix is not None and fix in caught.value.fix
    assert f"resource {key}=" in caught.value.message


def test_gpus_zero_and_counts_from_toml() -> None:
    assert Resources.from_mapping({"gpus": 0}).gpu_request() == (None, 0)
    assert Resources.from_mapping({"gpus": 4, "nodes": 1}).gpus == "4"
    # An override that asks for no GPU replaces the machine's default GPUs.
    assert Resources(gpus="A100:4").merged(Resources(gpus="0")).gpus == "0"


def machine(backend: str, **connection: object) -> Machine:
    return Machine(
        name="m", backend=backend, profile=backend, connection=dict(connection), durable_root="/d"
    )


def backend_of(kind: str, **connection: object) -> object:
    from rgt.backends import get_backend

    return get_backend(machine(kind, **connection))


@pytest.mark.parametrize(
    ("resources", "said"),
    [
        (Resources(partition="gpu"), "--partition: partition, account and qos are Slurm"),
        (Resources(account="a", qos="q"), "--account, --qos: partition, account and qos"),
        (Resources(nodes=65), "--nodes 65: over 64 pods for one Kubernetes job"),
    ],
)
def test_kubernetes_refuses_what_it_has_not(resources: Resources, said: str) -> None:
    pytest.importorskip("kubernetes")
    backend = backend_of("kubernetes", namespace="ml", pvc="c", image="python:3.12-slim")
    with pytest.raises(UsageError) as caught:
        fit(backend, resources)  # type: ignore[arg-type]
    assert said in caught.value.message and caught.value.fix


def test_kubernetes_manifest_carries_run_resources_over_machine_defaults() -> None:
    pytest.importorskip("kubernetes")
    from rgt.backends.kubernetes import check_manifest

    defaults = {"gpus": "1", "mem_gb": 16, "cpus": 2}
    backend = backend_of(
        "kubernetes", namespace="ml", pvc="c", image="python:3.12-slim", resources=defaults
    )
    spec = JobSpec(job_id="j1", machine="m", command=("python", "t.py"))
    run = Resources(gpus="H100:4", cpus=8, timeout_min=30, nodes=1)
    job = backend.manifests(spec, fit(backend, run))[1]  # type: ignore[attr-defined]
    check_manifest(job)
    container = job["spec"]["template"]["spec"]["containers"][0]
    assert container["resources"] == {
        "requests": {"cpu": "8", "memory": "16Gi"},
        "limits": {"cpu": "8", "memory": "16Gi", "nvidia.com/gpu": "4"},
    }
    assert job["spec"]["activeDeadlineSeconds"] == 1800
    assert job["metadata"]["annotations"] == {"rgt/gpu-type": "H100"}
    none = backend.manifests(spec, Resources(gpus="0"))[1]  # type: ignore[attr-defined]
    limits = none["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]
    assert "nvidia.com/gpu" not in limits


@pytest.mark.parametrize("kind", ["local", "ssh"])
@pytest.mark.parametrize(
    ("resources", "said"),
    [
        (Resources(nodes=2), "--nodes 2 is not supported on {kind}: multi-node jobs"),
        (Resources(partition="p"), "--partition is not supported on {kind}"),
        (Resources(cpus=4, mem_gb=8, timeout_min=5), "--cpus, --mem, --time is not supported"),
    ],
)
def test_a_box_refuses_what_no_scheduler_enforces(
    kind: str, resources: Resources, said: str
) -> None:
    ssh = {"host": "127.0.0.1", "port": 1, "known_hosts": "/nonexistent"}
    connection = ssh if kind == "ssh" else {}
    backend = backend_of(kind, **connection)
    with pytest.raises(NotSupportedError) as caught:
        fit(backend, resources)  # type: ignore[arg-type]
    assert said.format(kind=kind) in caught.value.message
    assert caught.value.fix
    if resources.nodes:
        assert "`rgt run A,B -- CMD`" in caught.value.fix and "RGT_NODE_RANK" in caught.value.fix


def test_a_box_takes_gpus_for_its_agent_and_a_scheduler_does_not() -> None:
    assert box_gpus("ssh", Resources(gpus="A100:2")) == "A100:2"
    assert box_gpus("local", Resources(gpus="0")) == "0"
    assert box_gpus("local", None) is None
    assert box_gpus("slurm", Resources(gpus="2")) is None


@pytest.mark.slow
def test_rgt_run_refusals_start_nothing_and_gpus_reach_the_spec(tmp_path: Path) -> None:
    ok(rgt("up", "local", "--name", "box", "--root", str(tmp_path / "root"), "--json"))
    (tmp_path / "job.py").write_text("print('hi')\n")
    for flags in (("--nodes", "2"), ("--qos", "q"), ("--gpus", "A100:x"), ("--mem", "0")):
        proc = rgt("run", "box", *flags, "--json", "--", "python3", "job.py", cwd=tmp_path)
        assert proc.returncode == 2, proc.stderr
        assert json.loads(proc.stdout)["fix"]
    assert ok(rgt("status", "--json"))["jobs"] == []
    (tmp_path / "rgt.toml").write_text("[resources]\ngpus = 0\n")
    doc = ok(rgt("run", "box", "--probe-seconds", "1", "--json", "--", "python3", "job.py",
                 cwd=tmp_path))  # fmt: skip
    spec_file = tmp_path / "root" / ".rgt" / "jobs" / str(doc["job_id"]) / "spec.json"
    assert json.loads(spec_file.read_text())["gpus"] == "0"


@pytest.mark.slow
def test_up_refuses_defaults_where_no_scheduler_keeps_them(tmp_path: Path) -> None:
    proc = rgt("up", "local", "--name", "box", "--gpus", "2", "--json")
    assert proc.returncode == 2
    assert "resource defaults are for Slurm and Kubernetes machines" in proc.stdout
    assert ok(rgt("status", "--json"))["machines"] == []


# `sinfo -h -o %G` lines as Slurm prints them: typed GRES with socket affinity, untyped, none.
SINFO_TYPED = "gpu:a100:4(S:0-1)\ngpu:nvidia_h100_80gb_hbm3:8(S:0-1),shard:8\n(null)\n"


@pytest.mark.parametrize(
    ("sinfo", "gpus", "said"),
    [
        ("(null)\n", "1", "this Slurm cluster has no GPU"),
        (SINFO_TYPED, "A100:2", "the cluster spells it 'a100': --gpus a100:2"),
        (SINFO_TYPED, "V100:1", "give one of its types (--gpus TYPE:1)"),
        ("gpu:2\n", "A100:1", "give one of its types"),
    ],
)
def test_gpu_types_are_checked_against_the_cluster_gres(sinfo: str, gpus: str, said: str) -> None:
    from rgt.backends._render.fit import check_gres

    gpu_type, count = Resources(gpus=gpus).gpu_request()
    with pytest.raises(UsageError) as caught:
        check_gres(sinfo, gpu_type, count)
    assert said in f"{caught.value.message} {caught.value.fix}"


def test_gres_the_cluster_has_pass() -> None:
    from rgt.backends._render.fit import check_gres

    for gpus in ("a100:4", "nvidia_h100_80gb_hbm3:8", "2"):
        gpu_type, count = Resources(gpus=gpus).gpu_request()
        check_gres(SINFO_TYPED, gpu_type, count)


def test_machine_defaults_land_where_each_backend_reads_them() -> None:
    from rgt.backends._render.fit import check_defaults, with_defaults
    from rgt.backends.slurm import SlurmBackend

    defaults = Resources(partition="gpu", gpus="A100:1", timeout_min=60)
    slurm = with_defaults(machine("slurm", slurm={"grace_s": 50}), defaults)
    assert slurm.connection["slurm"]["grace_s"] == 50
    assert SlurmBackend(slurm).defaults == defaults
    kube = with_defaults(machine("kubernetes"), Resources(gpus="2", mem_gb=8))
    assert kube.connection["resources"] == {"gpus": "2", "mem_gb": 8}
    with pytest.raises(UsageError, match="partition, account and qos are Slurm resources"):
        check_defaults("kubernetes", defaults)
    with pytest.raises(UsageError, match="resource defaults are for Slurm and Kubernetes"):
        check_defaults("generic-ssh", Resources(gpus="1"))


def test_settings_layers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """$RGT_RESOURCES over the project's rgt.toml over the user's config.toml."""
    project = tmp_path / "p" / "sub"
    project.mkdir(parents=True)
    assert Resources.from_settings(project) == Resources()
    (Path(os.environ["RGT_HOME"]) / "config.toml").write_text('[resources]\npartition = "u"\n')
    assert Resources.from_settings(project).partition == "u"
    (tmp_path / "p" / "rgt.toml").write_text('[resources]\ngpus = "A100:2"\n')
    assert Resources.from_settings(project) == Resources(gpus="A100:2")
    monkeypatch.setenv("RGT_RESOURCES", "gpus=0,cpus=4")
    assert Resources.from_settings(project) == Resources(gpus="0", cpus=4)
    (tmp_path / "p" / "rgt.toml").write_text("[resources]\ngpu = 2\n")
    monkeypatch.delenv("RGT_RESOURCES")
    with pytest.raises(SpecError, match="unknown resource key 'gpu'") as caught:
        Resources.from_settings(project)
    assert caught.value.path and caught.value.path.endswith("rgt.toml")
