"""What every vendor client speaks: offers, instances, rgt's five instance states, GPU names.

Vendors name the same GPU many ways (RunPod "A100 PCIe", vast.ai "A100 SXM4", Lambda
"A100 (40 GB PCIe)", Paperspace "A100-80G"). Users type a *family* ("A100", "H100",
"RTX4090"); ``family`` reduces a vendor's name to it, so ``--gpu A100:1`` means any A100.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from rgt.errors import UsageError

# rgt's instance states. ``provisioning`` covers every transition the vendor reports (booting,
# starting, stopping, terminating): the instance may still bill and is not settled.
PROVISIONING = "provisioning"
RUNNING = "running"
STOPPED = "stopped"
TERMINATED = "terminated"
ERROR = "error"
STATES = (PROVISIONING, RUNNING, STOPPED, TERMINATED, ERROR)

_NOISE = re.compile(r"\b(NVIDIA|GEFORCE|TESLA)\b", re.IGNORECASE)
_TWO_WORD = ("RTX", "GTX", "QUADRO")


@dataclass(frozen=True)
class Offer:
    """Something rentable now. ``price_per_hour`` is for all ``count`` GPUs."""

    id: str
    gpu: str
    count: int
    price_per_hour: float
    spot: bool
    disk_gb: float | None = None
    region: str | None = None
    reliability: float | None = None

    def to_json(self) -> dict[str, object]:
        return {**self.__dict__, "family": family(self.gpu)}


@dataclass(frozen=True)
class Instance:
    """One instance as the vendor reports it, its state mapped onto rgt's."""

    id: str
    name: str
    state: str
    raw_state: str
    price_per_hour: float | None = None
    ssh_host: str | None = None
    ssh_port: int | None = None
    ssh_user: str = "root"
    gpu: str | None = None

    @property
    def reachable(self) -> bool:
        return self.state == RUNNING and bool(self.ssh_host) and bool(self.ssh_port)

    def to_json(self) -> dict[str, object]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class CreateRequest:
    name: str  # the idempotency key: rgt's machine name, the vendor's name/label
    offer: Offer
    image: str
    disk_gb: int
    bid: float | None = None  # spot: the bid per hour for the whole instance
    ssh_public_key: str | None = None


@dataclass(frozen=True)
class GpuSpec:
    family: str
    count: int

    @classmethod
    def parse(cls, text: str) -> GpuSpec:
        name, _, count = text.partition(":")
        if not name.strip() or (count and not count.isdigit()) or count == "0":
            raise UsageError(f"bad --gpu {text!r}", fix="write NAME[:COUNT], e.g. A100:1")
        return cls(family=_key(name), count=int(count or 1))


def _key(name: str) -> str:
    return re.sub(r"[\s_\-]+", "", _NOISE.sub("", name)).upper()


def family(gpu: str) -> str:
    """``"NVIDIA GeForce RTX 4090"`` → ``"RTX4090"``; ``"A100 (40 GB PCIe)"`` → ``"A100"``."""
    words = re.split(r"[\s\-_(]+", _NOISE.sub("", gpu).strip())
    words = [w for w in words if w]
    if not words:
        return gpu.upper()
    take = 2 if words[0].upper() in _TWO_WORD and len(words) > 1 else 1
    return _key("".join(words[:take]))


def matching(offers: list[Offer], spec: GpuSpec) -> list[Offer]:
    """The offers of ``spec``'s family and count; an unknown family lists the valid ones."""
    families = sorted({family(o.gpu) for o in offers})
    if spec.family not in families:
        raise UsageError(
            f"unknown GPU {spec.family!r}",
            fix=f"valid GPU names here: {', '.join(families) or 'none offered now'}",
        )
    return [o for o in offers if family(o.gpu) == spec.family and o.count == spec.count]
