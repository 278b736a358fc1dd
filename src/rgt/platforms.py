"""One registry of platforms: what ``rgt up PROFILE`` does, one entry per kind of place.

Each entry is a function ``(store, UpRequest) -> UpResult`` registered under the profiles it
serves; ``up(store, request)`` looks the profile up and calls it, so a new platform is one
function and one ``@registers("name")`` line, never another branch in a front end. A profile
with no entry of its own is a box reached over SSH (``generic-ssh`` and every SSH rental,
``rgt.profiles``), rented through its vendor's API first when ``--gpu`` asks for it
(``rgt.vendors.lifecycle``).

- ``kubernetes``: the API server from a kubeconfig, rgt's files pod and its PVC;
- ``kaggle``: the Kaggle API's credentials, the kernels' GPU and internet;
- ``colab``, ``kaggle-notebook``: the notebook VM this runs in, its durable folder mirrored;
- any other profile (``rgt.lifecycle.machines.register``): ``local``, a durable folder here with no
  meter; ``slurm``, this host when ``sbatch`` is on PATH, else a login node over ssh; an SSH
  box by its ssh line, or a vendor rental with ``--gpu``.

Every entry refuses a bad name, and an active machine under the same name unless ``replace``
releases it through the gate first (``rgt.lifecycle.machines.guard_replacement``). Front ends
(the CLI, the MCP server, the UI) build an ``UpRequest`` and call ``up``; none prompts from here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from rgt.errors import UsageError
from rgt.lifecycle.machines import UpResult, guard_replacement, register, validate_name
from rgt.state.store import Store


@dataclass(frozen=True)
class UpRequest:
    """Everything ``rgt up`` was given; each entry reads the fields that concern it and
    refuses the ones that make no sense for it (an ssh line for ``local``)."""

    profile: str
    name: str
    ssh: str | None = None
    price: float | None = None
    root: str | None = None
    replace: bool = False
    vendor: Any = None  # rgt.vendors.lifecycle.VendorUp: --gpu, --image, … of a rental
    mirrors: Mapping[str, str] = field(default_factory=dict)
    no_mirrors: bool = False
    kube: Mapping[str, str | None] = field(default_factory=dict)  # context, namespace, pvc, …
    notebook: Mapping[str, Any] = field(default_factory=dict)  # drive, tier, force_here
    internet: bool = False  # kaggle: the kernel may reach the internet
    datasets: tuple[str, ...] = ()  # kaggle: datasets attached to the kernel


Registrar = Callable[[Store, UpRequest], UpResult]
_REGISTRY: dict[str, Registrar] = {}


def registers(*profiles: str) -> Callable[[Registrar], Registrar]:
    """Decorator: ``fn`` registers the machines of ``profiles``."""

    def add(fn: Registrar) -> Registrar:
        for profile in profiles:
            if profile in _REGISTRY:
                raise ValueError(f"profile {profile!r} is registered twice")
            _REGISTRY[profile] = fn
        return fn

    return add


def registrar(profile: str) -> Registrar:
    """The entry for ``profile``; SSH boxes and vendor rentals for any other profile."""
    return _REGISTRY.get(profile, _ssh_box)


def platforms() -> dict[str, str]:
    """profile -> the entry's name, for ``rgt up --help`` and the docs' table."""
    return {profile: fn.__name__.lstrip("_") for profile, fn in sorted(_REGISTRY.items())}


def up(store: Store, request: UpRequest) -> UpResult:
    """Register the machine ``request`` describes, by its profile's entry."""
    return registrar(request.profile)(store, request)


# -- the entries ---------------------------------------------------------------------------


def _ssh_box(store: Store, request: UpRequest) -> UpResult:
    # rgt.lifecycle.machines keeps the local/slurm/vendor/ssh branches and the mirror choices.
    return register(
        store,
        request.profile,
        request.name,
        ssh=request.ssh,
        price=request.price,
        root=request.root,
        replace=request.replace,
        vendor=request.vendor,
        mirrors=dict(request.mirrors),
        no_mirrors=request.no_mirrors,
    )


@registers("kubernetes")
def _kubernetes(store: Store, request: UpRequest) -> UpResult:
    from rgt.backends._k8s_up import kube_up, register_kubernetes
    from rgt.backends.kubernetes import files_pod_name

    _refuse(request, ssh=True, vendor=True)
    guard_replacement(store, validate_name(request.name), replace=request.replace)
    machine = register_kubernetes(store, request.name, kube_up(dict(request.kube)), request.root)
    note = (
        f"rgt's files pod {files_pod_name(request.name)} runs in {machine.connection['namespace']}"
    )
    return UpResult(machine=machine, notes=(note,))


@registers("kaggle")
def _kaggle(store: Store, request: UpRequest) -> UpResult:
    from rgt.notebooks.kaggle_up import KaggleUp, register_kaggle

    _refuse(request, ssh=True)
    guard_replacement(store, validate_name(request.name), replace=request.replace)
    gpu = getattr(request.vendor, "gpu", None) or "none"
    machine, notes = register_kaggle(
        store, request.name, KaggleUp(gpu, request.internet, request.datasets)
    )
    return UpResult(machine=machine, notes=notes)


@registers("colab", "kaggle-notebook")
def _notebook_vm(store: Store, request: UpRequest) -> UpResult:
    from rgt.notebooks.up import register_notebook

    _refuse(request, ssh=True, vendor=True)
    options = request.notebook
    return register_notebook(
        store,
        request.profile,
        request.name,
        durable=options.get("drive"),
        tier=str(options.get("tier") or "free"),
        force_here=bool(options.get("force_here")),
        root=request.root,
        replace_machine=request.replace,
    )


def _refuse(request: UpRequest, *, ssh: bool = False, vendor: bool = False) -> None:
    """Options that mean nothing to this platform fail, rather than being dropped unread."""
    if ssh and request.ssh:
        raise UsageError(
            f"`rgt up {request.profile}` takes no --ssh line: rgt reaches it through its API",
            fix=f"drop --ssh (an SSH box: `rgt up generic-ssh --name {request.name} --ssh '…'`)",
        )
    if vendor and getattr(request.vendor, "gpu", None):
        raise UsageError(
            f"`rgt up {request.profile}` rents nothing: --gpu is for vendor APIs and Kaggle",
            fix=f"drop --gpu; ask for GPUs per run: `rgt run {request.name} --gpus N -- …`",
        )
