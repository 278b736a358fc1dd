"""What the agent ships is one folder, ``rgt/agent/``, plus the two public packages it needs
(``rgt.triage``, whose rules the agent's classifier reads, and ``rgt.ckpt``, for the job's own
import) and three shared single files. A new package cannot join the zipapp silently, and no
bundled module imports rgt code that is not in it (it would fail on the machine, not here)."""

from __future__ import annotations

import ast
import shutil
import subprocess
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from rgt.agent import build

SRC = Path(build.PACKAGE_ROOT)
SINGLE_FILES = {"rgt/__init__.py", "rgt/_fs.py", "rgt/errors.py"}
TREES = ("agent", "triage", "ckpt")
# Under those trees but CLI-side: the packer itself, and the labelled logs that vet a learned
# rule before `rgt triage learn` keeps it.
LOCAL_ONLY = {"rgt/agent/build.py", "rgt/triage/known/logs.json"}
PY38 = sorted(Path.home().glob(".pyenv/versions/3.8*/bin/python3.8"))


def _tree(package: str) -> set[str]:
    return {
        f"rgt/{path.relative_to(SRC).as_posix()}"
        for path in (SRC / package).rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    }


def expected_bundle() -> set[str]:
    files = set(SINGLE_FILES)
    for package in TREES:
        files |= _tree(package)
    return files - LOCAL_ONLY


@pytest.fixture
def shipped(tmp_path: Path) -> dict[str, bytes]:
    """Every file of a freshly built zipapp (this test's RGT_HOME holds no learned rules)."""
    archive = zipfile.ZipFile(build.build_agent(tmp_path))
    return {name: archive.read(name) for name in archive.namelist() if name != "__main__.py"}


def test_the_bundle_is_the_agent_folder_the_public_packages_and_three_files(
    shipped: dict[str, bytes],
) -> None:
    assert set(shipped) == expected_bundle()
    assert "rgt/agent/probes/gpu.py" in shipped and "rgt/agent/verdicts/_tree.py" in shipped
    assert {name.split("/")[1] for name in shipped} - {"__init__.py", "_fs.py", "errors.py"} == {
        "agent",
        "triage",
        "ckpt",
    }


def test_a_new_top_level_package_does_not_join_the_agent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    copy = tmp_path / "pkg"
    shutil.copytree(SRC, copy, ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "newpkg").mkdir()
    (copy / "newpkg" / "__init__.py").write_text("")
    (copy / "agent" / "newlib").mkdir()
    (copy / "agent" / "newlib" / "__init__.py").write_text("")
    monkeypatch.setattr(build, "PACKAGE_ROOT", copy)
    names = {name for name, _ in build.bundled_sources()}
    assert "rgt/newpkg/__init__.py" not in names  # outside agent/: never shipped
    assert "rgt/agent/newlib/__init__.py" in names  # inside agent/: shipped with it


def _rgt_imports(source: bytes, module: tuple[str, ...]) -> Iterator[tuple[int, tuple[str, ...]]]:
    """(line, dotted target) of each import of rgt code: the ``from`` module and its names."""
    package = module[:-1]  # a module's package; ``__init__``'s: its own
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, tuple(alias.name.split("."))
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else ()
            target = base + tuple(node.module.split(".")) if node.module else base
            yield node.lineno, target
            for alias in node.names:
                yield node.lineno, (*target, alias.name)


def _module_file(target: tuple[str, ...], names: set[str] | frozenset[str]) -> str | None:
    """The archive name of the module ``target`` names, if ``names`` holds one."""
    path = "/".join(target)
    for candidate in (f"{path}.py", f"{path}/__init__.py"):
        if candidate in names:
            return candidate
    return None


def stray_imports(shipped: dict[str, str | bytes]) -> list[str]:
    """Imports in the shipped modules of rgt modules that exist in the source tree but do not
    ship (an attribute such as ``from rgt import __version__`` is no module: left alone)."""
    sources = frozenset(f"rgt/{p.relative_to(SRC).as_posix()}" for p in SRC.rglob("*.py"))
    names = set(shipped)
    strays = []
    for name, data in sorted(shipped.items()):
        if not name.endswith(".py"):
            continue
        module = tuple(name[: -len(".py")].split("/"))
        source = data.encode() if isinstance(data, str) else data
        for line, target in _rgt_imports(source, module):
            if target[0] != "rgt" or _module_file(target, names):
                continue
            if _module_file(target, sources):
                strays.append(f"{name}:{line}: {'.'.join(target)}")
    return strays


def test_nothing_bundled_imports_rgt_code_that_is_not_bundled(shipped: dict[str, bytes]) -> None:
    assert stray_imports(dict(shipped)) == []


def test_the_import_check_sees_a_stray() -> None:
    shipped: dict[str, str | bytes] = {
        "rgt/__init__.py": "",
        "rgt/agent/__init__.py": "",
        "rgt/agent/probes/__init__.py": "",
        "rgt/agent/probes/x.py": "from rgt import __version__, _fs\nfrom rgt.config import a\n",
        "rgt/agent/y.py": "from .probes import x\nfrom ..verify import artifacts\nimport os\n",
        "rgt/_fs.py": "",
    }
    assert stray_imports(shipped) == [
        "rgt/agent/probes/x.py:2: rgt.config",
        "rgt/agent/y.py:2: rgt.verify",
        "rgt/agent/y.py:2: rgt.verify.artifacts",
    ]


# What the agent may import must import, not only parse, on the oldest Python a rented image has
# (a module-level ``X | Y`` or ``list[int]`` parses on 3.8 and fails when run). ``rgt.ckpt`` and
# ``rgt.errors`` are the job's (tested below), never imported by the agent itself.
IMPORT_ALL = """
import importlib, sys, zipfile
sys.path.insert(0, sys.argv[1])
names = [n for n in zipfile.ZipFile(sys.argv[1]).namelist() if n.endswith(".py")]
for name in names:
    if name.startswith(("rgt/agent/", "rgt/triage/", "rgt/_fs.py", "rgt/__init__.py")):
        importlib.import_module(name[:-3].replace("/", ".").replace(".__init__", ""))
print(sorted(m for m in sys.modules if m == "rgt" or m.startswith("rgt.")))
"""


@pytest.mark.skipif(not PY38, reason="no Python 3.8 interpreter on this machine")
def test_every_module_the_agent_may_import_imports_on_python_3_8(tmp_path: Path) -> None:
    done = _on_python38(tmp_path, IMPORT_ALL)
    assert done.returncode == 0, done.stderr
    assert "rgt.agent.verdicts._tree" in done.stdout and "rgt.agent.probes.gpu" in done.stdout
    assert "'rgt.ckpt" not in done.stdout and "'rgt.errors'" not in done.stdout


# ``import rgt.ckpt`` in a job on the oldest Python README promises (3.8), from the archive the
# agent puts on the job's path: the package and every module that needs no torch at import.
IMPORT_CKPT = """
import importlib, pkgutil, sys
sys.path.insert(0, sys.argv[1])
import rgt.ckpt
failed = []
for info in pkgutil.walk_packages(rgt.ckpt.__path__, "rgt.ckpt."):
    try:
        importlib.import_module(info.name)
    except ModuleNotFoundError as exc:  # torch, transformers, lightning: the job brings them
        if exc.name.split(".")[0] not in ("torch", "transformers", "lightning", "numpy"):
            failed.append((info.name, repr(exc)))
    except Exception as exc:
        failed.append((info.name, repr(exc)))
print(failed, "torch" in sys.modules, "rgt.errors" in sys.modules)
"""


@pytest.mark.skipif(not PY38, reason="no Python 3.8 interpreter on this machine")
def test_the_jobs_rgt_ckpt_imports_on_python_3_8(tmp_path: Path) -> None:
    done = _on_python38(tmp_path, IMPORT_CKPT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["[]", "False", "True"], done.stdout


def _on_python38(tmp_path: Path, code: str) -> subprocess.CompletedProcess[str]:
    """``code`` run by Python 3.8, isolated and without site-packages, with the agent archive
    built here as its ``sys.argv[1]``."""
    agent = build.build_agent(tmp_path)
    return subprocess.run(
        [str(PY38[-1]), "-I", "-S", "-c", code, str(agent)],
        capture_output=True,
        text=True,
        check=False,
    )
