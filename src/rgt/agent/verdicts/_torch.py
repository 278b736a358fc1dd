"""torch.save files, read without torch and without running their pickle.

The zip format (torch >= 1.6): ``<name>/data.pkl`` holds the structure, each tensor storage is
an uncompressed member ``<name>/data/<key>``, ``<name>/byteorder`` says ``little`` or ``big``.
The legacy format (``_use_new_zipfile_serialization=False``): five pickles in a row (magic
number, protocol version, system info, the structure, the list of storage keys), then each
storage as an 8-byte element count and its raw bytes. A bare pickle (``.pkl``) has every value
inline. In each, the structure is read by ``_pickle``; each storage becomes a ``Span``.
"""

from __future__ import annotations

import io
import pickletools
import struct
import zipfile
from typing import Any, BinaryIO, Dict, List, Optional

from rgt.agent.verdicts import _allowed, _pickle, _places, _stubs
from rgt.agent.verdicts._plan import Plan
from rgt.agent.verdicts._records import Bad
from rgt.agent.verdicts._stream import Span

LEGACY_MAGIC = 0x1950A86A20F9469CFC6C
_LOCAL_HEADER = struct.Struct("<4s5H3L2H")


class _Storages(object):
    """persistent_load for torch's storage references: one ``StorageRef`` per key."""

    def __init__(self) -> None:
        self.by_key: Dict[str, _stubs.StorageRef] = {}

    def __call__(self, pid: Any) -> Any:
        if not isinstance(pid, tuple) or len(pid) < 5 or pid[0] != "storage":
            raise Bad("a persistent reference that is not a storage: %r" % (pid[:1],))
        kind, key, location, numel = pid[1], str(pid[2]), str(pid[3]), pid[4]
        if not isinstance(kind, _stubs.StorageType) or not isinstance(numel, int) or numel < 0:
            raise Bad("a storage reference with no storage type or count (%s)" % key)
        if key not in self.by_key:
            self.by_key[key] = _stubs.StorageRef(key, str(kind), numel, location)
        return self.by_key[key]


def is_zip(head: bytes) -> bool:
    return head[:4] == b"PK\x03\x04"


class Window(io.RawIOBase):
    """``length`` bytes of ``handle`` from ``base``, as a file of its own (a zip archive inside
    a DCP shard)."""

    def __init__(self, handle: BinaryIO, base: int, length: int) -> None:
        super().__init__()
        self.handle, self.base, self.length, self.at = handle, base, length, 0

    def seekable(self) -> bool:
        return True

    def readable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = 0) -> int:
        origin = (0, self.at, self.length)[whence]
        self.at = max(0, origin + offset)
        return self.at

    def tell(self) -> int:
        return self.at

    def read(self, size: int = -1) -> bytes:
        left = max(0, self.length - self.at)
        count = left if size is None or size < 0 else min(size, left)
        self.handle.seek(self.base + self.at)
        data = self.handle.read(count)
        self.at += len(data)
        return data


def plan_zip(
    handle: BinaryIO, name: str, size: int, base: int = 0, path: Optional[List[str]] = None
) -> Plan:
    """Read a torch zip archive's structure; ``Bad`` when the archive is damaged. ``base``:
    where the archive starts in the file (DCP shards hold many); ``path`` prefixes key paths."""
    try:
        archive = zipfile.ZipFile(handle)
        pickles = [n for n in archive.namelist() if n.endswith("/data.pkl")]
        if len(pickles) != 1:
            raise Bad("a zip archive, but not one torch.save wrote (no single */data.pkl)")
        prefix = pickles[0][: -len("data.pkl")]
        if archive.getinfo(pickles[0]).file_size > size:
            raise Bad("data.pkl claims more bytes than the whole archive (a zip bomb?)")
        data = archive.read(pickles[0])
        order = _byteorder(archive, prefix)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, OSError) as exc:
        raise Bad("damaged zip archive (truncated?): %s" % exc) from exc
    storages = _Storages()
    skeleton = _pickle.skeleton(data, storages)
    plan = Plan("torch", _places.metadata_file(name))
    plan.little = order == "little"
    spans = {key: _span(handle, archive, prefix, ref) for key, ref in storages.by_key.items()}
    for span in spans.values():
        span.offset += base
    plan.spans = list(spans.values())
    plan.census(skeleton, spans, path or [])
    _lightning(plan, skeleton)
    return plan


def _byteorder(archive: zipfile.ZipFile, prefix: str) -> str:
    try:
        if archive.getinfo(prefix + "byteorder").file_size > 16:
            raise Bad("the byteorder record is not 'little' or 'big'")
        order = archive.read(prefix + "byteorder").decode("ascii", "replace").strip()
    except KeyError:
        return "little"  # written before torch recorded it: always little-endian
    if order not in ("little", "big"):
        raise Bad("unknown byteorder record %r" % order)
    return order


def _span(handle: BinaryIO, archive: zipfile.ZipFile, prefix: str, ref: _stubs.StorageRef) -> Span:
    try:
        info = archive.getinfo(prefix + "data/" + ref.key)
    except KeyError as exc:
        raise Bad("storage record data/%s is missing from the archive" % ref.key) from exc
    if info.file_size != ref.nbytes:
        raise Bad(
            "storage data/%s holds %d bytes, its %d %s values need %d"
            % (ref.key, info.file_size, ref.numel, ref.dtype, ref.nbytes)
        )
    if info.compress_type != zipfile.ZIP_STORED:
        raise Bad("storage data/%s is compressed; torch.save never does that" % ref.key)
    handle.seek(info.header_offset)
    header = handle.read(_LOCAL_HEADER.size)
    if len(header) < _LOCAL_HEADER.size or header[:4] != b"PK\x03\x04":
        raise Bad("storage data/%s: its zip entry header is damaged" % ref.key)
    fields = _LOCAL_HEADER.unpack(header)
    start = info.header_offset + _LOCAL_HEADER.size + fields[9] + fields[10]
    return Span(start, info.file_size, ref.scan_as, "data/" + ref.key, crc=info.CRC)


def _lightning(plan: Plan, skeleton: Any) -> None:
    if isinstance(skeleton, dict) and "pytorch-lightning_version" in skeleton:
        plan.what = "Lightning checkpoint (%s)" % skeleton["pytorch-lightning_version"]


class _Bounded(object):
    """``read(n)`` never asks for more than the file has left: a crafted length field in a
    pickle must not make the reader allocate gigabytes before finding the file too short."""

    def __init__(self, handle: BinaryIO, size: int) -> None:
        self.handle, self.size = handle, size

    def read(self, count: int = -1) -> bytes:
        left = max(0, self.size - self.handle.tell())
        return self.handle.read(left if count is None or count < 0 else min(count, left))

    def readline(self) -> bytes:
        return self.handle.readline(max(0, self.size - self.handle.tell()))

    def tell(self) -> int:
        return self.handle.tell()


def read_pickle(handle: BinaryIO, size: int) -> bytes:
    """The bytes of the one pickle that starts at the handle's position (left after it)."""
    start = handle.tell()
    try:
        for _ in pickletools.genops(_Bounded(handle, size)):  # type: ignore[arg-type]
            pass
    except ValueError as exc:
        raise Bad("truncated or malformed pickle at byte %d: %s" % (start, exc)) from exc
    end = handle.tell()
    handle.seek(start)
    return handle.read(end - start)


def plan_pickle(handle: BinaryIO, size: int, name: str) -> Plan:
    """A bare pickle file: every value inline, nothing after its STOP."""
    handle.seek(0)
    data = read_pickle(handle, size)
    if handle.tell() != size:
        raise Bad("%d bytes follow the pickle's end (not a single pickle)" % (size - len(data)))
    plan = Plan("pickle", _places.metadata_file(name))
    plan.census(_pickle.skeleton(data))
    return plan


def is_legacy(handle: BinaryIO) -> bool:
    handle.seek(0)
    head = handle.read(32)
    handle.seek(0)
    return head[:2] == b"\x80\x02" and head[2:3] == b"\x8a"  # protocol 2, then a LONG1


def plan_legacy(handle: BinaryIO, size: int, name: str) -> Plan:
    handle.seek(0)
    header = [_pickle.skeleton(read_pickle(handle, size)) for _ in range(3)]
    if header[0] != LEGACY_MAGIC or header[1] != 1001:
        raise Bad("not a torch file: the legacy format's magic number is wrong")
    little = not isinstance(header[2], dict) or header[2].get("little_endian", True)
    storages = _Storages()
    skeleton = _pickle.skeleton(read_pickle(handle, size), _legacy(storages))
    keys = _pickle.skeleton(read_pickle(handle, size))
    if not isinstance(keys, list):
        raise Bad("legacy torch file: the storage key list is missing")
    plan = Plan("torch", _places.metadata_file(name))
    plan.little = bool(little)
    spans: Dict[str, Span] = {}
    for key in keys:
        spans[str(key)] = _legacy_span(handle, storages.by_key.get(str(key)), str(key), size)
    if handle.tell() != size:
        raise Bad("%d bytes after the last storage (damaged file)" % (size - handle.tell()))
    plan.spans = list(spans.values())
    plan.census(skeleton, spans)
    return plan


def _legacy(storages: _Storages) -> Any:
    def load(pid: Any) -> Any:
        if isinstance(pid, tuple) and len(pid) == 6 and pid[5] is not None:
            raise Bad("a legacy storage view (torch < 0.4 file)")
        return storages(pid[:5] if isinstance(pid, tuple) else pid)

    return load


def _legacy_span(handle: BinaryIO, ref: Optional[_stubs.StorageRef], key: str, size: int) -> Span:
    if ref is None:
        raise Bad("legacy torch file lists storage %s that no tensor uses" % key)
    count_bytes = handle.read(8)
    if len(count_bytes) < 8:
        raise Bad("legacy torch file ends before storage %s" % key)
    (count,) = struct.unpack("<q", count_bytes)
    nbytes = count * _allowed.ELEMENT_SIZE.get(ref.dtype, 1)
    if count != ref.numel or handle.tell() + nbytes > size:
        raise Bad(
            "legacy storage %s: %d values recorded, %d expected or file ends"
            % (key, count, ref.numel)
        )
    span = Span(handle.tell(), nbytes, ref.scan_as, key)
    handle.seek(nbytes, 1)
    return span
