"""Load one artifact by type and say what is in it, or why it is not what it claims to be.

Each loader returns a one-line description ("12 tensors, 1.2M values, all finite") or raises
``BadArtifact`` with the reason. A file that parses but holds NaN/inf weights is as useless as a
truncated one — a run that diverged at hour 9 still writes a perfectly loadable checkpoint — so
every floating tensor and array is checked for finiteness. Heavy libraries are imported inside
the loaders: ``import rgt.verify.artifacts`` must stay cheap for ``rgt --help``.
"""

from __future__ import annotations

import math
import sys
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from rgt.verify._loaders_tables import (
    BadArtifact,
    load_csv,
    load_image,
    load_json,
    load_jsonl,
    load_parquet,
    short,
)

SUFFIX_KINDS = {
    ".pt": "torch",
    ".pth": "torch",
    ".ckpt": "torch",
    ".bin": "torch",
    ".safetensors": "safetensors",
    ".npz": "npz",
    ".npy": "npy",
    ".json": "json",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".csv": "csv",
    ".png": "image",
    ".jpg": "image",
    ".jpeg": "image",
    ".gif": "image",
    ".bmp": "image",
    ".tif": "image",
    ".tiff": "image",
    ".webp": "image",
    ".parquet": "parquet",
}


def kind_of(path: Path) -> str:
    """The artifact kind, from the suffix or, for checkpoint files with any name, the content."""
    if _is_rgt_ckpt(path):
        return "rgt.ckpt"
    kind = SUFFIX_KINDS.get(path.suffix.lower())
    if kind is not None:
        return kind
    return "torch" if _is_torch_zip(path) else "other"


def _is_rgt_ckpt(path: Path) -> bool:
    # rgt.ckpt data files (formats 2, 3) start with the canonical stream header, whatever the name.
    try:
        with path.open("rb") as handle:
            return handle.read(18) == b"rgt.state_digest/1"
    except OSError:
        return False


def load_rgt_ckpt(path: Path) -> str:
    """An rgt.ckpt data file: parsed by rgt.ckpt's own loader (no unpickling), checked against
    its commit record when one sits next to it, then the same finiteness walk as torch files."""
    from rgt.ckpt import load_data_file
    from rgt.errors import CheckpointError

    try:
        obj = load_data_file(path)
    except CheckpointError as exc:
        raise BadArtifact(exc.message) from exc
    arrays = tuple(
        kind for kind in (_module_attr("torch", "Tensor"), _module_attr("numpy", "ndarray")) if kind
    )
    tally = _Tally()
    for name, leaf in _walk(obj):
        if isinstance(leaf, arrays):
            tally.add(name or "<root>", _numel(leaf), _finite(leaf))
        elif isinstance(leaf, float) and not math.isfinite(leaf):
            tally.nonfinite.append(name)
    if tally.tensors == 0:
        raise BadArtifact("no tensors anywhere in the checkpoint")
    return tally.describe("tensor")


def _module_attr(module: str, name: str) -> Any:
    loaded = sys.modules.get(module)
    return getattr(loaded, name, None)


def _is_torch_zip(path: Path) -> bool:
    # torch.save writes a zip archive whose members live under "<name>/data.pkl"; rgt.ckpt data
    # files may carry any suffix, so they are recognised by this layout.
    try:
        with zipfile.ZipFile(path) as archive:
            return any(name.endswith("/data.pkl") for name in archive.namelist())
    except (zipfile.BadZipFile, OSError, ValueError):
        return False


def human_count(n: int) -> str:
    for unit, scale in (("G", 10**9), ("M", 10**6), ("k", 10**3)):
        if n >= scale:
            return f"{n / scale:.1f}{unit}"
    return str(n)


class _Tally:
    """Counts tensors/arrays, values and non-finite values across a nested structure."""

    def __init__(self) -> None:
        self.tensors = 0
        self.values = 0
        self.nonfinite: list[str] = []

    def add(self, name: str, numel: int, finite: bool) -> None:
        self.tensors += 1
        self.values += numel
        if not finite:
            self.nonfinite.append(name)

    def describe(self, noun: str) -> str:
        if self.nonfinite:
            where = ", ".join(self.nonfinite[:3]) + (" …" if len(self.nonfinite) > 3 else "")
            raise BadArtifact(
                f"non-finite values (NaN or inf) in {len(self.nonfinite)} {noun}(s): {where}"
            )
        return (
            f"{self.tensors} {noun}{'s' if self.tensors != 1 else ''}, "
            f"{human_count(self.values)} values, all finite"
        )


def _walk(obj: Any, name: str = "") -> Iterator[tuple[str, Any]]:
    """Yield (dotted name, leaf) for every leaf of nested dicts, lists and tuples."""
    if isinstance(obj, dict):
        for key, value in obj.items():
            yield from _walk(value, f"{name}.{key}" if name else str(key))
    elif isinstance(obj, (list, tuple)):
        for index, value in enumerate(obj):
            yield from _walk(value, f"{name}[{index}]")
    else:
        yield name, obj


def _torch_finite(tensor: Any) -> bool:
    import torch

    if tensor.layout != torch.strided or not (tensor.is_floating_point() or tensor.is_complex()):
        return True
    return bool(torch.isfinite(tensor).all())


def load_torch(path: Path) -> str:
    import torch

    try:
        obj = torch.load(path, map_location="cpu", weights_only=True, mmap=_is_torch_zip(path))
    except Exception as exc:  # torch raises many unrelated types for a bad file
        raise BadArtifact(f"torch.load(weights_only=True) failed: {short(exc)}") from exc
    tally, numbers, others = _Tally(), 0, 0
    for name, leaf in _walk(obj):
        if isinstance(leaf, torch.Tensor):
            tally.add(name or "<root>", leaf.numel(), _torch_finite(leaf))
        elif isinstance(leaf, (int, float)) and not isinstance(leaf, bool):
            numbers += 1
            if isinstance(leaf, float) and not math.isfinite(leaf):
                tally.nonfinite.append(name)
        else:
            others += 1
    if tally.tensors == 0:
        # A small dict of counters ({"step": 100, "best": 0.91}) is a legitimate sidecar; anything
        # else without a single tensor is not a model or a training state.
        if numbers and not others and isinstance(obj, dict) and not tally.nonfinite:
            return f"no tensors; a dict of {numbers} numbers, all finite"
        raise BadArtifact("no tensors anywhere in the saved object")
    return tally.describe("tensor")


def load_safetensors(path: Path) -> str:
    from safetensors import safe_open

    tally = _Tally()
    try:
        with safe_open(str(path), framework=_safetensors_framework()) as handle:
            for key in handle.keys():  # noqa: SIM118 - safe_open is not a mapping
                tensor = handle.get_tensor(key)
                tally.add(key, _numel(tensor), _finite(tensor))
    except BadArtifact:
        raise
    except Exception as exc:
        raise BadArtifact(f"safetensors failed to load: {short(exc)}") from exc
    if tally.tensors == 0:
        raise BadArtifact("safetensors file holds no tensors")
    return tally.describe("tensor")


def _safetensors_framework() -> str:
    # numpy cannot represent bfloat16, the usual dtype of LLM weights; prefer torch when present.
    try:
        import torch  # noqa: F401
    except ImportError:
        return "numpy"
    return "pt"


def _numel(array: Any) -> int:
    return int(array.numel()) if hasattr(array, "numel") else int(array.size)


def _finite(array: Any) -> bool:
    if hasattr(array, "is_floating_point"):
        return _torch_finite(array)
    import numpy as np

    if array.dtype.kind not in "fc":
        return True
    return bool(np.isfinite(array).all())


def load_npy(path: Path) -> str:
    import numpy as np

    try:
        array = np.load(path, allow_pickle=False, mmap_mode="r")
    except Exception as exc:
        raise BadArtifact(f"numpy.load(allow_pickle=False) failed: {short(exc)}") from exc
    return _describe_arrays({"<array>": array})


def load_npz(path: Path) -> str:
    import numpy as np

    try:
        with np.load(path, allow_pickle=False) as archive:
            arrays = {name: archive[name] for name in archive.files}
    except Exception as exc:
        raise BadArtifact(f"numpy.load(allow_pickle=False) failed: {short(exc)}") from exc
    if not arrays:
        raise BadArtifact("npz archive holds no arrays")
    return _describe_arrays(arrays)


def _describe_arrays(arrays: dict[str, Any]) -> str:
    tally = _Tally()
    for name, array in arrays.items():
        tally.add(name, _numel(array), _finite(array))
    if tally.values == 0:
        raise BadArtifact("arrays hold no values (every array is empty)")
    return tally.describe("array")


LOADERS: dict[str, Callable[[Path], str]] = {
    "torch": load_torch,
    "rgt.ckpt": load_rgt_ckpt,
    "safetensors": load_safetensors,
    "npz": load_npz,
    "npy": load_npy,
    "json": load_json,
    "jsonl": load_jsonl,
    "csv": load_csv,
    "image": load_image,
    "parquet": load_parquet,
}
