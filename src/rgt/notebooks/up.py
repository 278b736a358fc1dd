"""`rgt up colab` / `rgt up kaggle-notebook`: this notebook VM as a local machine.

Run inside the notebook's own VM (a ``!rgt up colab --name N`` cell, or ``%rgt`` through
``rgt.notebook``). The machine is the local backend: the agent, the job's working directory and
the checkpoints it writes stay on the VM's fast disk, and every checkpoint is then mirrored with
a verified flush (``rgt.ckpt.mirror``) to the durable folder, which outlives the VM:

    colab            a folder on the mounted Google Drive (default /content/drive/MyDrive/rgt)
    kaggle-notebook  /kaggle/working/rgt (saved with the notebook's version)

The machine's record keeps the platform, tier, durable folder and the time the VM booted, which
start the session clock (``rgt.profiles.session``) that ``watch`` and the agent read.
"""

from __future__ import annotations

import os
import time
from dataclasses import replace
from pathlib import Path

from rgt.config import rgt_home
from rgt.errors import GateRefused, UsageError
from rgt.lifecycle.machines import (
    UpResult,
    _profile_notes,
    guard_replacement,
    register_local,
    validate_name,
)
from rgt.profiles.session import session_facts
from rgt.state.store import Store

PLATFORMS = ("colab", "kaggle-notebook")
DEFAULT_DURABLE = {
    "colab": "/content/drive/MyDrive/rgt",
    "kaggle-notebook": "/kaggle/working/rgt",
}
MARKERS = {  # environment variables each platform documents inside its notebook VMs
    "colab": ("COLAB_RELEASE_TAG", "COLAB_GPU"),
    "kaggle-notebook": ("KAGGLE_KERNEL_RUN_TYPE", "KAGGLE_URL_BASE"),
}
PROFILE = {"colab": "colab", "kaggle-notebook": "kaggle"}
VM_DISKS = {"colab": ("/content",)}  # the VM's own disks: a Drive folder is on neither
MOUNT_FIX = (
    "mount Drive first, in a notebook cell: `from google.colab import drive; "
    "drive.mount('/content/drive')`, then run `rgt up colab` again"
)


def register_notebook(
    store: Store,
    platform: str,
    name: str,
    *,
    durable: str | None = None,
    tier: str = "free",
    force_here: bool = False,
    root: str | None = None,
    replace_machine: bool = False,
) -> UpResult:
    """Register this notebook VM as machine ``name`` with its durable folder, after checking
    that this is such a VM and that the folder is really on durable storage."""
    facts = session_facts(platform, tier)
    _check_vm(platform, force_here)
    guard_replacement(store, validate_name(name), replace=replace_machine)
    local_root = Path(root) if root else rgt_home() / "machines" / name
    folder = check_durable(platform, durable or DEFAULT_DURABLE[platform], local_root)
    local = register_local(store, name, local_root)
    connection = {
        "notebook": platform,
        "tier": facts.tier,
        "durable": folder,
        "session_started": session_started(facts.cap_s),
    }
    machine = replace(local.machine, profile=PROFILE[platform], connection=connection)
    store.add_machine(machine)
    notes = (f"checkpoints are mirrored with a verified flush to {folder}",)
    return UpResult(machine=machine, notes=notes + _profile_notes(PROFILE[platform]))


def in_vm(platform: str) -> bool:
    return any(os.environ.get(marker) for marker in MARKERS[platform])


def _check_vm(platform: str, force_here: bool) -> None:
    if force_here or in_vm(platform):
        return
    markers = " or ".join(MARKERS[platform])
    raise GateRefused(
        f"this is not a {platform} notebook VM (no {markers} in the environment)",
        [f"rgt up {platform} registers the VM it runs in; here it would register this host"],
        fix=f"run it in a notebook cell (`!rgt up {platform} --name N` or `%rgt up {platform} "
        "--name N`), or add --force-here to register this host anyway",
    )


def check_durable(platform: str, folder: str, local_root: Path) -> str:
    """The durable folder, created if its mount is there. Colab: refused unless it lies on a
    filesystem other than the VM disk rgt works on (Drive not mounted: the path would be an
    ordinary folder on the VM disk, lost with it)."""
    path = Path(folder).expanduser().absolute()
    vm_disks = [local_root, *(Path(p) for p in VM_DISKS.get(platform, ()) if Path(p).exists())]
    if platform == "colab" and _device(path) in {_device(disk) for disk in vm_disks}:
        mount = _mount_point(path)
        raise GateRefused(
            f"{path} is not on a mounted Google Drive (it is on {mount}, the VM's own disk)",
            [f"a checkpoint there is lost with the VM: nothing is mounted at {path.parent}"],
            fix=MOUNT_FIX + " (or pass --drive with a folder on the mounted Drive)",
        )
    if platform == "kaggle-notebook" and not _nearest(path).is_dir():
        raise UsageError(f"{path} does not exist", fix="pass --drive /kaggle/working/<folder>")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot create {path}: {exc}", fix=MOUNT_FIX) from exc
    return str(path)


def _nearest(path: Path) -> Path:
    """``path`` or its nearest ancestor that exists."""
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def _device(path: Path) -> int:
    return os.stat(_nearest(path)).st_dev


def _mount_point(path: Path) -> str:
    path = _nearest(path)
    while not os.path.ismount(path) and path != path.parent:
        path = path.parent
    return str(path)


def session_started(cap_s: int) -> float:
    """When the VM booted (``btime`` in /proc/stat): the platform's clock counts from there.
    A boot time older than the cap cannot be this session's VM (a container on a long-lived
    host): then the clock starts now."""
    now = time.time()
    try:
        with open("/proc/stat", encoding="ascii") as handle:
            fields = dict(line.split(None, 1) for line in handle if line.startswith("btime"))
        booted = float(fields["btime"])
    except (OSError, KeyError, ValueError):
        return now
    return booted if 0 <= now - booted < cap_s else now
