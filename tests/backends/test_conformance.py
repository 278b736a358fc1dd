"""The backend contract (``conformance.BackendContract`` and its promise mixins) on every
registered backend: the in-memory fake, this machine, a real sshd, a real single-node Slurm,
Kubernetes (a fake API server on loopback that runs pods on this host, ``k8s_fake.py``) and
Kaggle (a fake of its documented API that runs each pushed kernel as a local process,
``tests/kaggle/fake.py``). A backend added to ``rgt.backends.REGISTRY`` without a class here
fails ``test_every_registered_backend_runs_the_contract``."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from rgt.backends import REGISTRY, get_backend
from rgt.backends._k8s_up import KubeUp, register_kubernetes
from rgt.backends.base import Backend
from rgt.backends.slurm import SlurmBackend
from rgt.lifecycle.machines import register_local
from rgt.models import Machine
from rgt.notebooks.kaggle_up import KaggleUp, register_kaggle
from rgt.resources import Resources
from rgt.state.store import Store
from tests.backends.conformance import (
    HOSTILE_ROOT,
    BackendContract,
    Cancels,
    RefusesCancel,
    RefusesSecrets,
    Run,
    job_spec,
    wait_terminal,
)
from tests.backends.fake import FakeBackend
from tests.backends.k8s_fake import FakeApi, k8s_api  # noqa: F401  (the fixture)
from tests.kaggle.conftest import KEY, USER
from tests.kaggle.fake import FakeKaggle
from tests.kaggle.fake import serve as serve_kaggle
from tests.slurm import SlurmCluster
from tests.sshd import SshServer, register


class TestFake(BackendContract, Cancels):
    registered = "fake"  # the tests' in-memory backend registers itself

    @pytest.fixture(scope="class")
    @classmethod
    def backend(cls, home: Path, tmp_path_factory: pytest.TempPathFactory) -> Backend:
        root = tmp_path_factory.mktemp("fake") / HOSTILE_ROOT
        return FakeBackend(Machine("fk", "fake", "local", {}, str(root)))


class TestLocal(BackendContract, Cancels):
    registered = "local"

    @pytest.fixture(scope="class")
    @classmethod
    def backend(cls, home: Path, tmp_path_factory: pytest.TempPathFactory) -> Backend:
        root = tmp_path_factory.mktemp("local") / HOSTILE_ROOT
        return get_backend(register_local(Store.open(), "here", root).machine)


class TestSsh(BackendContract, Cancels):
    registered = "ssh"

    @pytest.fixture(scope="class")
    @classmethod
    def backend(
        cls, home: Path, tmp_path_factory: pytest.TempPathFactory, sshd_server: SshServer
    ) -> Backend:
        root = tmp_path_factory.mktemp("ssh") / HOSTILE_ROOT
        return get_backend(register(sshd_server, "box", root))


@pytest.mark.slow
class TestSlurm(BackendContract, Cancels, RefusesSecrets):
    carries_secrets = False
    registered = "slurm"

    @pytest.fixture(scope="class")
    @classmethod
    def backend(
        cls,
        home: Path,
        tmp_path_factory: pytest.TempPathFactory,
        slurm_cluster: SlurmCluster,
    ) -> Backend:
        root = tmp_path_factory.mktemp("slurm") / HOSTILE_ROOT
        root.mkdir()
        connection = {"slurm": {"grace_s": 30}}
        return SlurmBackend(Machine("cluster", "slurm", "slurm", connection, str(root)))

    def test_resources_reach_sbatch_and_a_resume_reuses_them(
        self,
        run: Run,
        slurm_cluster: SlurmCluster,
    ) -> None:
        backend = run.backend
        assert isinstance(backend, SlurmBackend)
        spec = job_spec(backend, "conf-slurm-res", run.snapshot)
        spec = replace(spec, command=(backend.python, "-c", "import time; time.sleep(60)"))
        job = backend.submit(spec, None, Resources(timeout_min=3))
        first = backend.slurm_id(spec.job_id)
        backend.start_agent(backend.install_agent(), job, None)  # what `rgt resume` does
        second = backend.slurm_id(spec.job_id)
        try:
            assert first and second and first != second
            for slurm_id in (first, second):
                assert slurm_cluster.job(slurm_id).time_limit == "00:03:00"
        finally:
            slurm_cluster.run("scancel", str(first), str(second), check=False)


@pytest.mark.slow
class TestKubernetes(BackendContract, Cancels, RefusesSecrets):
    carries_secrets = False
    registered = "kubernetes"

    @pytest.fixture(scope="class")
    @classmethod
    def backend(
        cls,
        home: Path,
        tmp_path_factory: pytest.TempPathFactory,
        k8s_api: FakeApi,  # noqa: F811
    ) -> Backend:
        root = tmp_path_factory.mktemp("k8s") / HOSTILE_ROOT
        root.mkdir()  # the claim, as the fake cluster mounts it
        up = KubeUp(
            context=k8s_api.context,
            namespace="ml",
            pvc="rgt-claim",
            kubeconfig=str(k8s_api.kubeconfig),
        )
        return get_backend(register_kubernetes(Store.open(), "kube", up, str(root)))

    def test_resources_reach_the_job(self, run: Run, k8s_api: FakeApi) -> None:  # noqa: F811
        spec = job_spec(run.backend, "conf-k8s-res", run.snapshot)
        run.backend.submit(spec, None, Resources(timeout_min=3, cpus=2))
        job = k8s_api.cluster.jobs["rgt-conf-k8s-res"]
        assert job["spec"]["activeDeadlineSeconds"] == 180
        container = job["spec"]["template"]["spec"]["containers"][0]
        assert container["resources"]["requests"] == {"cpu": "2"}
        wait_terminal(run.backend, spec.job_id)


@pytest.mark.slow
class TestKaggle(BackendContract, RefusesCancel, RefusesSecrets):
    carries_secrets = False
    registered = "kaggle"

    @pytest.fixture(scope="class")
    @classmethod
    def backend(cls, home: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Backend]:
        fake = FakeKaggle(tmp_path_factory.mktemp("kaggle-fake"), USER, KEY)
        server = serve_kaggle(fake)
        try:
            with pytest.MonkeyPatch.context() as patch:
                patch.setenv("RGT_KAGGLE_API_URL", fake.url + "/v1")
                patch.setenv("KAGGLE_USERNAME", USER)
                patch.setenv("KAGGLE_KEY", KEY)
                patch.setenv("KAGGLE_CONFIG_DIR", str(tmp_path_factory.mktemp("no-kaggle-dir")))
                machine, _ = register_kaggle(Store.open(), "kg", KaggleUp())
                yield get_backend(machine)
        finally:
            server.shutdown()
            server.server_close()
            fake.stop()


def test_every_registered_backend_runs_the_contract() -> None:
    """The guard: each name in the registry has a class here, and each class says which
    cancel promise it keeps (a backend that cannot cancel says so, with the fix)."""
    classes = [c for c in globals().values() if isinstance(c, type)]
    classes = [c for c in classes if issubclass(c, BackendContract)]
    covered = {c.registered for c in classes if c is not BackendContract}
    assert set(REGISTRY) - covered == set(), "add a TestX(BackendContract, ...) class"
    for cls in classes:
        if cls is not BackendContract:
            assert issubclass(cls, (Cancels, RefusesCancel)), cls
            assert cls.carries_secrets or issubclass(cls, RefusesSecrets), cls
