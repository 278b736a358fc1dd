"""Backends by name, imported lazily; a missing optional dependency names the extra to install."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from rgt.errors import UsageError

if TYPE_CHECKING:
    from rgt.backends.base import Backend
    from rgt.models import Machine
    from rgt.state.store import Store

# name -> (module, class, pip extra that provides its dependencies or None)
REGISTRY: dict[str, tuple[str, str, str | None]] = {
    "local": ("rgt.backends.local", "LocalBackend", None),
    "ssh": ("rgt.backends.ssh", "SshBackend", None),
    "slurm": ("rgt.backends.slurm", "SlurmBackend", None),
    "kubernetes": ("rgt.backends.kubernetes", "KubernetesBackend", "kubernetes"),
    "kaggle": ("rgt.notebooks.kaggle", "KaggleBackend", None),
}


def register_backend(name: str, module: str, class_name: str, extra: str | None = None) -> None:
    """Add a backend by name (the tests' in-memory fake registers itself this way)."""
    REGISTRY[name] = (module, class_name, extra)


def backend_class(name: str) -> type[Backend]:
    """The class registered as backend ``name``, imported now."""
    try:
        module_name, class_name, extra = REGISTRY[name]
    except KeyError:
        raise UsageError(
            f"unknown backend {name!r}", fix=f"known backends: {', '.join(sorted(REGISTRY))}"
        ) from None
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        hint = f"pip install 'remote-gpu-trainer[{extra}]'" if extra else "reinstall rgt"
        raise UsageError(f"backend {name!r} needs {exc.name}", fix=hint) from exc
    cls: type[Backend] = getattr(module, class_name)
    return cls


def get_backend(machine: Machine) -> Backend:
    factory: Any = backend_class(machine.backend)  # every registered class takes the machine
    backend: Backend = factory(machine)
    return backend


def backend_for(store: Store, name: str) -> Backend:
    """The backend object of a registered machine."""
    return get_backend(store.machine(name))
