"""``rgt up PROFILE --name NAME …``: register (or rent) a machine, and keep what ``up`` was told
about it: every run's resource defaults, the GPUs it should have, autostop's self-stop.

The CLI and the MCP ``up`` tool both call ``up``; the registering itself is the platform's entry
in ``rgt.platforms``. Everything that can be refused is checked before anything is registered
or rented (a bad resource default, self-stop command or GPU expectation costs nothing then).
The document is what ``rgt up --json`` prints.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rgt import platforms
from rgt.platforms import UpRequest
from rgt.state.store import Store

if TYPE_CHECKING:
    from rgt.lifecycle.machines import UpResult
    from rgt.resources import Resources
    from rgt.vendors.lifecycle import VendorUp

# The renting options of `rgt up` (`--gpu`, `--offer`, …) by VendorUp's field names.
RENTING = (
    *("gpu", "offer", "image", "disk_gb", "spot", "bid", "max_price", "region"),
    *("identity_file", "ssh_user", "ssh_port", "resume"),
)


@dataclass(frozen=True)
class Told:
    """What ``up`` records beside the registration itself."""

    resources: Resources | None = None  # every run's defaults (`rgt run`'s flags win per key)
    expect_gpu: str | None = None  # TYPE:COUNT the machine must show (`rgt audit`)
    self_stop: str | None = None  # autostop's stop command for this machine


def rental(values: Mapping[str, Any]) -> VendorUp | None:
    """The renting options as the vendor lifecycle takes them; None unless ``gpu`` or
    ``resume`` was given (then ``up`` registers a machine that exists already)."""
    if not (values.get("gpu") or values.get("resume")):
        return None
    from rgt.vendors.lifecycle import VendorUp

    given = {key: values[key] for key in RENTING if values.get(key) is not None}
    return VendorUp(**{**given, "image": values.get("image") or None})


def up(request: UpRequest, told: Told = Told()) -> dict[str, Any]:
    """Register ``request``'s machine through its platform's entry; the ``--json`` document."""
    _check(request, told)
    store = Store.open()
    result = platforms.up(store, request)
    if told.resources is not None:
        from rgt.backends._render.fit import with_defaults

        result = dataclasses.replace(result, machine=with_defaults(result.machine, told.resources))
        store.add_machine(result.machine)
    expected = _expect_gpu(store, result.machine.name, request, told.expect_gpu)
    if told.self_stop:  # autostop's stop for this machine (README: Autostop)
        from rgt.autostop.arm import declare_self_stop

        note = declare_self_stop(store, result.machine.name, told.self_stop)
        result = dataclasses.replace(result, notes=(*result.notes, str(note)))
    return _document(result, expected)


def _check(request: UpRequest, told: Told) -> None:
    from rgt.backends._render.fit import check_defaults

    check_defaults(request.profile, told.resources)
    if told.self_stop:
        from rgt.autostop.policy import check_self_stop

        check_self_stop(told.self_stop)
    if told.expect_gpu:
        from rgt.watch.gpu_expect import GpuExpectation

        GpuExpectation.parse(told.expect_gpu)  # a bad value fails before anything is rented


def _expect_gpu(
    store: Store, name: str, request: UpRequest, text: str | None
) -> dict[str, Any] | None:
    """Record the GPUs the machine should have: --expect-gpu, else the rented offer's."""
    from rgt.watch.gpu_expect import GpuExpectation, record

    offer = getattr(request.vendor, "gpu", None)
    if not text and not offer:
        return None
    source = "--expect-gpu" if text else f"the {request.profile} offer rented with --gpu {offer}"
    spec = str(text or offer)
    expectation = GpuExpectation.parse(spec if ":" in spec else f"{spec}:1", source)
    record(store, name, expectation)
    return expectation.to_json()


def _document(result: UpResult, expected: dict[str, Any] | None) -> dict[str, Any]:
    from rgt.profiles.network import machine_plan

    machine = result.machine
    return {
        "expect_gpu": expected,
        "machine": machine.name,
        "backend": machine.backend,
        "profile": machine.profile,
        "durable_root": machine.durable_root,
        "price_per_hour": machine.price_per_hour,
        "notes": list(result.notes),
        "network": machine_plan(machine.profile, machine.connection).to_json(),
    }
