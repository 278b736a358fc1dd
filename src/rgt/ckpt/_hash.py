"""The hashes a checkpoint carries: XXH3-128 when ``xxhash`` is installed, else SHA-256.

A checkpoint's hashes guard against accidents, not adversaries: a torn or truncated write, a
flipped bit on a worn disk, a copy cut short, a training state that differs from another run's.
XXH3-128 catches all of those (a 128-bit digest; accidental collisions are out of reach) at
~10 GB/s on this machine, where SHA-256 runs at ~1.4 GB/s. The difference is what an
asynchronous save costs the training loop: on a 2-core box the writer's hash competes with the
training threads, and a 500 MB state took ~0.35 CPU-seconds of SHA-256 against ~0.05 of XXH3.
Artifacts that leave the machine (``manifest.json``, pull, DELIVER) keep SHA-256.

Hash strings name their algorithm: ``"xxh3_128:<32 hex>"``. A bare 64-hex string is SHA-256,
as format ``rgt.ckpt/2`` records wrote it, so those checkpoints still verify.
"""

from __future__ import annotations

import hashlib
from typing import Any, Protocol

from rgt.errors import CheckpointError

XXH3 = "xxh3_128"
SHA256 = "sha256"


class Hasher(Protocol):
    def update(self, data: Any, /) -> None: ...

    def copy(self) -> Hasher: ...

    def hexdigest(self) -> str: ...


def _xxhash() -> Any:
    try:
        import xxhash
    except ImportError:
        return None
    return xxhash


def default_algorithm() -> str:
    """What new checkpoints are hashed with."""
    return XXH3 if _xxhash() is not None else SHA256


def new(algorithm: str) -> Hasher:
    """An incremental hasher for ``algorithm`` (``xxh3_128`` or ``sha256``)."""
    if algorithm == SHA256:
        return hashlib.sha256()
    module = _xxhash()
    if algorithm != XXH3:
        raise CheckpointError(
            f"unknown checkpoint hash algorithm {algorithm!r}",
            fix=f"the record was written by a newer rgt: upgrade rgt (known: {XXH3}, {SHA256})",
        )
    if module is None:
        raise CheckpointError(
            "this checkpoint is hashed with XXH3-128 but the xxhash package is not installed",
            fix="pip install xxhash (a dependency of remote-gpu-trainer)",
        )
    hasher: Hasher = module.xxh3_128()
    return hasher


def tagged(algorithm: str, hexdigest: str) -> str:
    """The stored form: SHA-256 bare (as format 2 wrote it), anything else ``alg:hex``."""
    return hexdigest if algorithm == SHA256 else f"{algorithm}:{hexdigest}"


def algorithm_of(value: str) -> str:
    """The algorithm a stored hash string was made with."""
    name, sep, _ = value.partition(":")
    return name if sep else SHA256


def of_bytes(data: Any, like: str) -> str:
    """The stored-form hash of ``data`` with the algorithm that made ``like``."""
    algorithm = algorithm_of(like)
    hasher = new(algorithm)
    hasher.update(data)
    return tagged(algorithm, hasher.hexdigest())
