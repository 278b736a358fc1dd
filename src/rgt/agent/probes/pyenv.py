"""The interpreter a job really runs, and where its caches land (``agent audit``).

A job's command is started with the agent's environment, which is the environment of a
non-interactive ssh command: no ``~/.bashrc`` activation, no ``conda activate``. So
``python`` there is often ``/usr/bin/python3`` while the image's environment (the profile's
``[environment] python``) is ``/root/miniconda3/bin/python``. Interpreters are compared by
``sys.prefix``, not by path: a venv's ``python`` is a symlink to the base interpreter but has
its own site-packages.

Caches (pip, Hugging Face, conda packages, torch hub) are resolved the way each tool does,
from the job's environment, and measured with ``statvfs``: a 30 GB system disk fills with one
model download while the data disk is empty.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from typing import Any, Dict, List, Mapping, Optional

from rgt.agent.probes import disk

IDENTIFY = (
    "import json, sys; print(json.dumps([sys.executable, sys.prefix, sys.version.split()[0]]))"
)

# tool -> (env vars, most specific first, each with the subdirectory it implies; default)
HF_VARS = (("HF_HUB_CACHE", ""), ("HF_HOME", "hub"), ("XDG_CACHE_HOME", "huggingface/hub"))
CACHES = (
    ("huggingface", HF_VARS, "~/.cache/huggingface/hub"),
    ("pip", (("PIP_CACHE_DIR", ""), ("XDG_CACHE_HOME", "pip")), "~/.cache/pip"),
    ("torch hub", (("TORCH_HOME", "hub"), ("XDG_CACHE_HOME", "torch/hub")), "~/.cache/torch/hub"),
    ("conda pkgs", (("CONDA_PKGS_DIRS", ""),), ""),
)  # fmt: skip
FIX_VAR = {
    "huggingface": "HF_HOME",
    "pip": "PIP_CACHE_DIR",
    "torch hub": "TORCH_HOME",
    "conda pkgs": "CONDA_PKGS_DIRS",
}


def identify(python: str, timeout: float = 30.0) -> Dict[str, Any]:
    """``{"path", "executable", "prefix", "version"}`` of ``python``, or ``{"path", "error"}``
    (without -S: site.py is what makes a venv's prefix its own)."""
    try:
        proc = subprocess.run(
            [python, "-c", IDENTIFY],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            timeout=timeout,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return {"path": python, "error": str(exc)[:300]}
    if proc.returncode != 0:
        return {"path": python, "error": proc.stderr.decode("utf-8", "replace")[-300:]}
    executable, prefix, version = json.loads(proc.stdout.decode("utf-8", "replace"))
    return {"path": python, "executable": executable, "prefix": prefix, "version": version}


# Whether an interpreter has torch, without importing it (an import takes seconds and may
# touch the GPU): the package's spec, and its version.py (``__version__``, ``cuda``: the CUDA
# it was built for, None for a CPU build). Python 3.8 syntax: it runs in the job's Python.
TORCH_FIND = (
    "import importlib.util, json, os, re, sys\n"
    "spec = importlib.util.find_spec('torch')\n"
    "out = {'installed': spec is not None and bool(spec.submodule_search_locations)}\n"
    "out.update(executable=sys.executable, python=sys.version.split()[0])\n"
    "if out['installed']:\n"
    "    path = os.path.join(list(spec.submodule_search_locations)[0], 'version.py')\n"
    "    try:\n"
    "        text = open(path).read()\n"
    "    except OSError:\n"
    "        text = ''\n"
    "    for key in ('__version__', 'cuda'):\n"
    "        m = re.search(r'^' + key + r\"\\s*(?::[^=]*)?=\\s*['\\\"]([^'\\\"]+)\", text, re.M)\n"
    "        out[key.strip('_')] = m.group(1) if m else None\n"
    "print(json.dumps(out))\n"
)


def interpreters(expected: Optional[str], env: Mapping[str, str]) -> Dict[str, Any]:
    """What ``python``/``python3`` resolve to on the job's PATH, and the expected one; each
    with ``torch`` (installed, version, CUDA build) when it runs."""
    path = env.get("PATH", os.defpath)
    found = {}  # type: Dict[str, Any]
    for name in ("python", "python3"):
        where = shutil.which(name, path=path)
        found[name] = identify(where) if where else None
    found["expected"] = identify(expected) if expected else None
    seen = {}  # type: Dict[str, Dict[str, Any]]
    for reading in found.values():
        if reading and not reading.get("error"):
            key = "%s|%s" % (reading["executable"], reading["prefix"])
            reading["torch"] = seen.get(key) or seen.setdefault(key, torch_of(reading["path"]))
            reading["conda"] = conda_of(reading["prefix"], env)
    return dict(found, path_env=path)


def conda_of(prefix: str, env: Mapping[str, str]) -> Optional[Dict[str, Any]]:
    """None unless ``prefix`` is a conda environment (it has ``conda-meta/``); ``base`` True
    when it is the conda root itself: ``envs/`` beside its ``conda-meta/``, or the shell says
    ``CONDA_DEFAULT_ENV=base`` for this very prefix. ``envs``: the named environments there."""
    if not os.path.isdir(os.path.join(prefix, "conda-meta")):
        return None
    envs_dir = os.path.join(prefix, "envs")
    activated = env.get("CONDA_DEFAULT_ENV") == "base" and _same(env.get("CONDA_PREFIX"), prefix)
    names = []  # type: List[str]
    if os.path.isdir(envs_dir):
        for name in sorted(os.listdir(envs_dir)):
            if os.path.isdir(os.path.join(envs_dir, name, "conda-meta")):
                names.append(name)
    base = os.path.isdir(envs_dir) or activated
    return {"prefix": prefix, "base": base, "envs_dir": envs_dir, "envs": names[:30]}


def _same(a: Optional[str], b: str) -> bool:
    return bool(a) and os.path.realpath(str(a)) == os.path.realpath(b)


def torch_of(python: str, timeout: float = 30.0) -> Dict[str, Any]:
    """``{"installed", "version", "cuda"}`` of torch in ``python`` (``error`` when the probe
    could not run), without importing torch."""
    try:
        proc = subprocess.run(
            [python, "-c", TORCH_FIND],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            timeout=timeout,
            check=False,
        )
        return dict(json.loads(proc.stdout.decode("utf-8", "replace").strip().splitlines()[-1]))
    except (OSError, subprocess.TimeoutExpired, ValueError, IndexError) as exc:
        return {"installed": False, "error": str(exc)[:300]}


def job_python(readings: Dict[str, Any]) -> Optional[str]:
    """The interpreter to ask about torch: the expected one when it runs, else PATH's."""
    for key in ("expected", "python", "python3"):
        found = readings.get(key)
        if found and not found.get("error"):
            return str(found["path"])
    return None


def caches(env: Mapping[str, str], home: str, prefix: Optional[str]) -> List[Dict[str, Any]]:
    """Each tool's cache directory (from ``env`` or its default) and the disk holding it;
    conda's package cache defaults to ``pkgs`` beside the job interpreter's conda base."""
    out = []
    for tool, variables, default in CACHES:
        if tool == "conda pkgs" and prefix and os.path.isdir(os.path.join(prefix, "pkgs")):
            default = os.path.join(prefix, "pkgs")
        where, source = _resolve(env, variables, default, home)
        if not where:
            continue
        reading = disk.usage(where)
        out.append(
            {
                "tool": tool,
                "dir": where,
                "source": source,
                "fix_var": FIX_VAR[tool],
                "mount": reading.get("mount"),
                "bytes_total": reading.get("bytes_total"),
                "bytes_free": reading.get("bytes_free"),
            }
        )
    return out


def _resolve(env: Mapping[str, str], variables: Any, default: str, home: str) -> Any:
    for name, sub in variables:
        value = env.get(name, "")
        if value:
            first = value.split(os.pathsep)[0]
            return os.path.join(first, sub) if sub else first, name
    if not default:
        return "", ""
    return (home + default[1:] if default.startswith("~") else default), "default"
