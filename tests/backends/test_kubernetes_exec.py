"""`rgt up kubernetes`, the exec transport and the verbs Kubernetes refuses, against the fake API
server on loopback (``k8s_fake.py``); the job lifecycle itself is in test_conformance.py."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("kubernetes", reason="pip install 'remote-gpu-trainer[kubernetes]'")

from rgt.backends import get_backend
from rgt.backends.kubernetes import KubernetesBackend
from rgt.cli import main
from rgt.errors import NotSupportedError, TransportError
from rgt.state.store import Store
from tests.backends.k8s_fake import FakeApi, k8s_api  # noqa: F401  (the fixture)


def rgt_up(api: FakeApi, name: str, root: Path, *extra: str) -> int:
    """`rgt up kubernetes … --json` through the CLI's own entry point, in this process."""
    argv = ["up", "kubernetes", "--name", name, "--context", api.context, "--namespace", "ml"]
    argv += ["--kubeconfig", str(api.kubeconfig), "--root", str(root), "--json", *extra]
    try:
        main(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    return 0


@pytest.fixture
def kube(k8s_api: FakeApi, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Iterator[Any]:  # noqa: F811
    claim = tmp_path / "claim 'q' ü"
    claim.mkdir()
    code = rgt_up(k8s_api, "kube", claim, "--pvc", "rgt-claim")
    doc = json.loads(capsys.readouterr().out)
    assert code == 0, doc
    assert (doc["backend"], doc["durable_root"]) == ("kubernetes", str(claim))
    yield get_backend(Store.open().machine("kube"))


def test_up_starts_the_files_pod_with_the_claim(kube: KubernetesBackend, k8s_api: FakeApi) -> None:  # noqa: F811
    pod = k8s_api.cluster.pods["rgt-files-kube"]
    volume = pod["spec"]["volumes"][0]["persistentVolumeClaim"]
    assert volume == {"claimName": "rgt-claim"}
    mount = pod["spec"]["containers"][0]["volumeMounts"][0]["mountPath"]
    assert mount == kube.machine.durable_root and Path(kube.root.root).is_dir()


def test_up_without_a_claim_is_refused_with_the_fix(
    k8s_api: FakeApi,  # noqa: F811
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = rgt_up(k8s_api, "noclaim", tmp_path)
    doc = json.loads(capsys.readouterr().out)
    assert code == 2 and "--pvc" in doc["fix"]
    assert "rgt-files-noclaim" not in k8s_api.cluster.pods


def test_exec_carries_bytes_exit_codes_and_stderr(kube: KubernetesBackend, tmp_path: Path) -> None:
    every_byte = bytes(range(256)) * 300  # several frames, every value
    assert kube.transport.run(["cat"], input=every_byte).stdout == every_byte
    failed = kube.transport.run(["sh", "-c", 'echo out; echo "$1" >&2; exit 7', "sh", "a b"])
    assert (failed.returncode, failed.stdout, failed.stderr) == (7, b"out\n", b"a b\n")
    hostile = f"{kube.root.root}/it's $(touch PWNED) ü"
    kube.transport.write_bytes(hostile, b"data")
    assert kube.transport.read_bytes(hostile) == b"data"
    assert not list(Path(kube.machine.durable_root).rglob("PWNED"))


@pytest.mark.slow  # > 1 s on two cores
def test_put_and_get_copy_trees(kube: KubernetesBackend, tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    (tree / "sub dir").mkdir(parents=True)
    (tree / "sub dir" / "a.txt").write_text("a")
    (tree / "b.bin").write_bytes(b"\0\1")
    remote = f"{kube.root.root}/copied tree"
    kube.transport.put(tree, remote)
    kube.transport.get(remote, tmp_path / "back")
    assert (tmp_path / "back" / "sub dir" / "a.txt").read_text() == "a"
    assert (tmp_path / "back" / "b.bin").read_bytes() == b"\0\1"
    one = f"{kube.root.root}/new dir/one file.bin"  # a file: its folder made, written whole
    kube.transport.put(tree / "b.bin", one)
    assert kube.transport.read_bytes(one) == b"\0\1"
    assert kube.transport.run(["ls", "-A", "--", f"{kube.root.root}/new dir"]).stdout == (
        b"one file.bin\n"
    )


def test_a_deleted_files_pod_is_a_transport_error(
    kube: KubernetesBackend,
    k8s_api: FakeApi,  # noqa: F811
) -> None:
    kube.stop_meter()  # deletes the files pod rgt started
    with pytest.raises(TransportError) as lost:
        kube.transport.run(["true"])
    assert "rgt up kubernetes" in str(lost.value.fix)


def test_verbs_kubernetes_cannot_do_raise_a_typed_error(kube: KubernetesBackend) -> None:
    with pytest.raises(NotSupportedError) as refused:
        kube.start_agent("agent.pyz", kube.job_paths("j1"), None)
    assert refused.value.backend == "kubernetes" and refused.value.fix
    assert refused.value.exit_code == 2


def test_help_and_ckpt_never_import_the_kubernetes_client() -> None:
    code = (
        "import sys, rgt.ckpt, rgt.backends.kubernetes, rgt.backends._k8s_up\n"
        "from rgt.cli import cli\n"
        "try:\n    cli.main(['up', '--help'], standalone_mode=False)\n"
        "except SystemExit:\n    pass\n"
        "print('kubernetes' in sys.modules)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "--pvc" in proc.stdout and proc.stdout.splitlines()[-1] == "False"


def test_an_unknown_context_is_a_usage_error_naming_the_fix(
    k8s_api: FakeApi,  # noqa: F811
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["up", "kubernetes", "--name", "nope", "--context", "no-such-context", "--pvc", "c"]
    argv += ["--kubeconfig", str(k8s_api.kubeconfig), "--root", str(tmp_path), "--json"]
    with pytest.raises(SystemExit) as ended:
        main(argv)
    doc = json.loads(capsys.readouterr().out)
    assert ended.value.code == 2 and "--context" in doc["fix"]
