"""Formats that describe their own arrays in a header: safetensors, npy, npz, rgt.ckpt's arena.

Each header is parsed with the standard library (JSON, or a Python literal for npy), checked
against the file's size (a header that promises more bytes than the file holds means a cut
copy), and turned into ``Span``s for the one streaming pass. None of these formats runs code,
except an npy of Python objects, whose payload is a pickle and is read as one.
"""

from __future__ import annotations

import ast
import json
import os
import struct
import zipfile
from typing import Any, BinaryIO, Dict, List, Optional, Tuple

from rgt.agent.verdicts import _finite, _pickle, _places
from rgt.agent.verdicts._plan import Plan
from rgt.agent.verdicts._records import Bad
from rgt.agent.verdicts._stream import CHUNK, Span

SAFETENSORS_DTYPES = {
    "F64": ("float64", 8),
    "F32": ("float32", 4),
    "F16": ("float16", 2),
    "BF16": ("bfloat16", 2),
    "F8_E4M3": ("float8_e4m3fn", 1),
    "F8_E5M2": ("float8_e5m2", 1),
    "C64": ("complex64", 8),
    "I64": ("int64", 8),
    "I32": ("int32", 4),
    "I16": ("int16", 2),
    "I8": ("int8", 1),
    "U64": ("uint64", 8),
    "U32": ("uint32", 4),
    "U16": ("uint16", 2),
    "U8": ("uint8", 1),
    "BOOL": ("bool", 1),
}
NUMPY_FLOATS = {"f2": "float16", "f4": "float32", "f8": "float64", "c8": "complex64"}
NUMPY_FLOATS["c16"] = "complex128"
NPY_MAGIC = b"\x93NUMPY"
ARENA_PREFIX = b"rgt.state_digest/1"
_PICKLED_ARRAY_LIMIT = 1 << 30  # an object array's pickle beyond this is not read
_ARENA_TRAILER = struct.Struct("<Q8s")


def plan_safetensors(handle: BinaryIO, size: int) -> Plan:
    head = handle.read(8)
    if len(head) < 8:
        raise Bad("safetensors file shorter than its 8-byte header length")
    (length,) = struct.unpack("<Q", head)
    if length > size - 8:
        raise Bad("safetensors header claims %d bytes, the file has %d" % (length, size - 8))
    try:
        header = json.loads(handle.read(length).decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise Bad("safetensors header is not JSON: %s" % exc) from exc
    if not isinstance(header, dict):
        raise Bad("safetensors header is not a JSON object")
    plan = Plan("safetensors")
    header.pop("__metadata__", None)
    base, end = 8 + length, 0
    for key, entry in sorted(header.items(), key=lambda kv: _offsets(kv[0], kv[1])):
        start, stop = _offsets(key, entry)
        if start != end:
            raise Bad(
                "safetensors tensor %s starts at %d, the previous ends at %d" % (key, start, end)
            )
        plan.spans.append(_tensor_span(plan, key, entry, base + start, stop - start))
        end = stop
    if base + end != size:
        raise Bad(
            "safetensors tensors end at byte %d, the file at %d (truncated?)" % (base + end, size)
        )
    return plan


def _offsets(key: str, entry: Any) -> Tuple[int, int]:
    offsets = entry.get("data_offsets") if isinstance(entry, dict) else None
    if not (isinstance(offsets, list) and len(offsets) == 2 and 0 <= offsets[0] <= offsets[1]):
        raise Bad("safetensors tensor %s has no valid data_offsets" % key)
    return int(offsets[0]), int(offsets[1])


def _tensor_span(plan: Plan, key: str, entry: Dict[str, Any], start: int, nbytes: int) -> Span:
    dtype, size = SAFETENSORS_DTYPES.get(str(entry.get("dtype")), (None, 1))
    numel = _product(entry.get("shape"))
    if dtype is not None and numel * size != nbytes:
        raise Bad(
            "safetensors tensor %s: shape needs %d bytes, offsets give %d"
            % (key, numel * size, nbytes)
        )
    plan.add_tensor([key], numel)
    span = Span(start, nbytes, dtype if dtype and _finite.scan_dtype(dtype) else None, key)
    span.refs.append(([key], numel))
    return span


def _product(shape: Any) -> int:
    if not isinstance(shape, (list, tuple)) or not all(isinstance(n, int) for n in shape):
        raise Bad("an array shape that is not a list of integers: %r" % (shape,))
    out = 1
    for n in shape:
        out *= n
    return out


def npy_header(handle: BinaryIO) -> Tuple[str, int, bool]:
    """(numpy type string, element count, fortran order) of an npy stream at its start."""
    magic = handle.read(8)
    if magic[:6] != NPY_MAGIC:
        raise Bad("not an npy file (no \\x93NUMPY magic)")
    width = 2 if magic[6] == 1 else 4
    (length,) = struct.unpack("<H" if width == 2 else "<I", handle.read(width))
    try:
        header = ast.literal_eval(handle.read(length).decode("latin1"))
        descr, shape = header["descr"], header["shape"]
    except (ValueError, SyntaxError, KeyError, TypeError) as exc:
        raise Bad("npy header is unreadable: %s" % exc) from exc
    return (descr if isinstance(descr, str) else "V"), _product(shape), False


def _item(descr: str) -> Tuple[Any, int]:
    kind = descr.lstrip("<>=|")
    try:
        return NUMPY_FLOATS.get(kind), int(kind[1:]) if kind[1:].isdigit() else 0
    except ValueError:
        return None, 0


def plan_npy(handle: BinaryIO, size: int) -> Plan:
    descr, numel, _ = npy_header(handle)
    plan, start = Plan("npy"), handle.tell()
    if descr.lstrip("<>=|").startswith("O"):
        plan.census(_pickle.skeleton(handle.read()), None)  # an object array: a pickle
        return plan
    dtype, item = _item(descr)
    if item and start + numel * item != size:
        raise Bad(
            "npy data is %d bytes, its shape needs %d (truncated?)" % (size - start, numel * item)
        )
    if numel == 0:
        raise Bad("the array holds no values (its shape has a 0)")
    plan.add_tensor(["<array>"], numel)
    span = Span(start, size - start, dtype, "<array>")
    span.refs.append((["<array>"], numel))
    plan.spans.append(span)
    return plan


def plan_npz(handle: BinaryIO) -> Plan:
    """Every member read through zipfile (CRC checked, compressed or not) and scanned now."""
    plan = Plan("npz")
    try:
        with zipfile.ZipFile(handle) as archive:
            for info in archive.infolist():
                with archive.open(info) as member:
                    _npz_member(plan, info.filename, member)
    except (zipfile.BadZipFile, EOFError, OSError) as exc:
        raise Bad("damaged npz archive: %s" % exc) from exc
    if not plan.values:
        raise Bad("npz archive holds no values (no arrays, or every one is empty)")
    return plan


def _npz_member(plan: Plan, name: str, member: Any) -> None:
    """One member, decompressed a chunk at a time (a zip bomb never sits in memory whole)."""
    descr, numel, _ = npy_header(member)
    dtype, item = _item(descr)
    if descr.lstrip("<>=|").startswith("O"):
        plan.census(_pickle.skeleton(member.read(_PICKLED_ARRAY_LIMIT)), None)
        return
    seen, bad = 0, 0
    for chunk in iter(lambda: member.read(CHUNK), b""):  # CHUNK: a multiple of every item size
        seen += len(chunk)
        if dtype:
            bad += _finite.count_nonfinite(
                chunk[: len(chunk) - len(chunk) % item], dtype, not descr.startswith(">")
            )
    if item and seen != numel * item:
        raise Bad("npz member %s: %d bytes, its shape needs %d" % (name, seen, numel * item))
    plan.add_tensor([name], numel)
    if bad:
        plan.finding([name[:-4] if name.endswith(".npy") else name], numel)


def plan_arena(handle: BinaryIO, size: int) -> Plan:
    """An rgt.ckpt data file: the JSON skeleton in its trailer names every array's bytes."""
    if size < len(ARENA_PREFIX) + _ARENA_TRAILER.size:
        raise Bad("rgt.ckpt data file too short (truncated)")
    handle.seek(size - _ARENA_TRAILER.size)
    length, magic = _ARENA_TRAILER.unpack(handle.read(_ARENA_TRAILER.size))
    start = size - _ARENA_TRAILER.size - length
    if magic != b"RGTARENA" or start < len(ARENA_PREFIX):
        raise Bad("rgt.ckpt data file: the skeleton trailer is missing (truncated)")
    handle.seek(start)
    try:
        meta = json.loads(handle.read(length).decode("utf-8"))
        arrays, state = meta["arrays"], meta["state"]
    except (ValueError, KeyError, TypeError, UnicodeDecodeError) as exc:
        raise Bad("rgt.ckpt data file: unreadable skeleton (%s)" % exc) from exc
    if int(meta.get("stream_bytes", -1)) != start:
        raise Bad("rgt.ckpt data file: wrong stream length in its skeleton")
    plan = Plan("rgt.ckpt")
    spans = _shared([_arena_span(entry, start) for entry in arrays])
    plan.spans = list({id(span): span for span in spans}.values())
    _arena_walk(plan, state, [], spans)
    return plan


def _arena_span(entry: Any, stream: int) -> Span:
    try:
        offset, nbytes, dtype = int(entry[0]), int(entry[1]), str(entry[2])
    except (TypeError, ValueError, IndexError) as exc:
        raise Bad("rgt.ckpt data file: a damaged array entry") from exc
    if not 0 <= offset <= offset + nbytes <= stream:
        raise Bad("rgt.ckpt array at %d+%d lies outside the stream" % (offset, nbytes))
    name = (
        dtype[len("torch.") :]
        if dtype.startswith("torch.")
        else NUMPY_FLOATS.get(dtype.lstrip("<>=|"), "")
    )
    kind = _finite.scan_dtype(name) if name else None
    return Span(offset, nbytes, kind, "array@%d" % offset)


def _shared(spans: List[Span]) -> List[Span]:
    """One span per offset: a tensor saved twice in a state shares its bytes."""
    by_offset: Dict[int, Span] = {}
    return [by_offset.setdefault(span.offset, span) for span in spans]


def _arena_walk(plan: Plan, node: Any, path: List[str], spans: List[Span]) -> None:
    if not isinstance(node, dict) or len(node) != 1:
        return
    ((tag, value),) = node.items()
    if tag in ("d", "o"):
        for key, child in value:
            _arena_walk(plan, child, [*path, _arena_key(key)], spans)
    elif tag in ("l", "t"):
        for index, child in enumerate(value):
            _arena_walk(plan, child, [*path, str(index)], spans)
    elif tag == "a" and isinstance(value, int) and 0 <= value < len(spans):
        span = spans[value]
        numel = span.length // (_finite.item_size(span.dtype) if span.dtype else 1)
        plan.add_tensor(path, numel)
        span.refs.append((path, numel))
    elif tag == "f":
        plan.numbers += 1
        if _places.nonfinite_float(float.fromhex(value)):
            plan.finding(path, 1)


def _arena_key(key: Any) -> str:
    if isinstance(key, dict) and len(key) == 1:
        return str(next(iter(key.values())))
    return str(key)


def commit_record_problem(full: str, size: int, sha256: str) -> Optional[str]:
    """An rgt.ckpt data file next to its commit record (``ckpt-*.json`` naming it): the size
    and hash the record vouches for must match. SHA-256 records are checked with the hash the
    stream computed; XXH3 records when ``xxhash`` is importable (else by size alone)."""
    folder, name = os.path.split(full)
    for record in sorted(os.listdir(folder or ".")):
        if not (record.startswith("ckpt-") and record.endswith(".json")):
            continue
        try:
            with open(os.path.join(folder, record), "rb") as handle:
                data = json.loads(handle.read().decode("utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and data.get("file") == name:
            return _record_mismatch(full, size, sha256, data, record)
    return None


def _record_mismatch(
    full: str, size: int, sha256: str, data: Dict[str, Any], record: str
) -> Optional[str]:
    said = str(data.get("hash", data.get("sha256", "")))
    algorithm, _, digest = said.rpartition(":")
    if data.get("bytes") != size:
        return "does not match its commit record %s (size)" % record
    if algorithm in ("", "sha256") and digest != sha256:
        return "does not match its commit record %s (hash)" % record
    if algorithm == "xxh3_128" and digest != _xxh3(full):
        return "does not match its commit record %s (hash)" % record
    return None


def _xxh3(full: str) -> str:
    try:
        import xxhash  # type: ignore[import-not-found, unused-ignore]
    except ImportError:
        return ""
    hasher = xxhash.xxh3_128()
    with open(full, "rb") as handle:
        for chunk in iter(lambda: handle.read(8 << 20), b""):
            hasher.update(chunk)
    return str(hasher.hexdigest())
