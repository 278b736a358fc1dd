"""One file's verdict: recognise its format (by content first, then by suffix), read its
structure, stream its bytes once (sha256 + finiteness), and compare with what was declared."""

from __future__ import annotations

import os
import stat
from typing import Any, BinaryIO, Callable, Dict, Optional, Tuple

from rgt.agent.verdicts import _arrays, _dcp, _text, _torch
from rgt.agent.verdicts._plan import Plan
from rgt.agent.verdicts._records import BAD, HASH_ONLY, OK, Bad, FileVerdict, HashOnly
from rgt.agent.verdicts._stream import stream

SUFFIX_KINDS = {
    ".pt": "torch",
    ".pth": "torch",
    ".ckpt": "torch",
    ".bin": "torch",
    ".pkl": "pickle",
    ".pickle": "pickle",
    ".metadata": "pickle",
    ".safetensors": "safetensors",
    ".npz": "npz",
    ".npy": "npy",
    ".json": "json",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".csv": "csv",
    ".parquet": "parquet",
    ".distcp": "dcp",
}
for _image in (".png", ".jpg", ".jpeg", ".gif", ".bmp", ".tif", ".tiff", ".webp"):
    SUFFIX_KINDS[_image] = "image"
_PICKLE_HEADS = (b"\x80\x02", b"\x80\x03", b"\x80\x04", b"\x80\x05")


def _suffix(name: str) -> str:
    return name.lower() if name.startswith(".") else os.path.splitext(name)[1].lower()


def kind_of(name: str, head: bytes) -> str:
    """The format: rgt.ckpt, torch zip/legacy and npy by their magic, the rest by suffix."""
    suffix = _suffix(name)
    by_suffix = SUFFIX_KINDS.get(suffix, "other")
    if head.startswith(_arrays.ARENA_PREFIX):
        return "rgt.ckpt"
    if head.startswith(_arrays.NPY_MAGIC):
        return "npy"
    if _torch.is_zip(head) and by_suffix in ("torch", "pickle", "other"):
        return "torch"
    if head[:3] == b"\x80\x02\x8a" and by_suffix in ("torch", "pickle"):
        return "torch-legacy"
    if head[:2] in _PICKLE_HEADS and by_suffix in ("torch", "pickle"):
        return "pickle"
    if (by_suffix == "torch" and suffix == ".bin") or suffix == ".metadata":
        return "other"  # a .bin or .metadata that is no pickle: some other tool's data
    return by_suffix


def _plan(kind: str, handle: BinaryIO, size: int, full: str) -> Plan:
    name = os.path.basename(full)
    if kind == "dcp":
        return _dcp.plan_shard(handle, size, name, os.path.dirname(full))
    if kind == "torch":
        return _torch.plan_zip(handle, name, size)
    if kind == "torch-legacy":
        return _torch.plan_legacy(handle, size, name)
    if kind == "pickle":
        return _torch.plan_pickle(handle, size, name)
    planners: Dict[str, Callable[[], Plan]] = {
        "safetensors": lambda: _arrays.plan_safetensors(handle, size),
        "npy": lambda: _arrays.plan_npy(handle, size),
        "npz": lambda: _arrays.plan_npz(handle),
        "rgt.ckpt": lambda: _arrays.plan_arena(handle, size),
    }
    if kind in planners:
        return planners[kind]()
    return _plain(kind, handle, size, name)


def _plain(kind: str, handle: BinaryIO, size: int, name: str) -> Plan:
    """Formats without tensors: the check's description becomes the plan's."""
    plan = Plan(kind)
    if kind in _text.TEXT_CHECKS:
        plan.what = _text.TEXT_CHECKS[kind](handle.read(), name)
    elif kind in _text.BINARY_CHECKS:
        plan.what = _text.BINARY_CHECKS[kind](handle, size)
    elif kind == "torch":
        raise Bad("not a torch file (neither a zip archive nor a pickle)")
    else:
        plan.what = "no structure to check"
    plan.plain = True
    return plan


def check_file(
    path: "str | os.PathLike[str]", *, sha256: Optional[str] = None, size: Optional[int] = None
) -> FileVerdict:
    """The verdict on one file; never raises for a bad file."""
    name = os.fspath(path)
    return check_path(name, name.replace(os.sep, "/"), sha256, size)


def check_path(
    full: str, rel: str, sha256: Optional[str], size: Optional[int], unit: Optional[str] = None
) -> FileVerdict:
    try:
        st = os.stat(full)
    except OSError as exc:
        return FileVerdict(rel, "other", BAD, 0, "", "cannot read: %s" % exc.strerror, unit)
    if not stat.S_ISREG(st.st_mode):
        return FileVerdict(rel, "other", BAD, 0, "", "not a regular file", unit)
    try:
        with open(full, "rb") as handle:
            kind, verdict, digest, detail = _judge(handle, st.st_size, full)
    except (OSError, EOFError) as exc:  # EOFError: it shrank while being read
        return FileVerdict(rel, "other", BAD, st.st_size, "", "cannot read: %s" % exc, unit)
    verdict, detail = _declared(st.st_size, digest, size, sha256, verdict, detail)
    return FileVerdict(rel, kind, verdict, st.st_size, digest, detail, unit)


def _judge(handle: BinaryIO, size: int, full: str) -> Tuple[str, str, str, str]:
    """(kind, verdict, sha256, detail) from one read of the file."""
    kind = kind_of(os.path.basename(full), handle.read(64))
    handle.seek(0)
    if size == 0:
        # an empty log or marker file is what it is; an empty checkpoint or table is broken
        empty = stream(handle, 0, [])
        if _suffix(os.path.basename(full)) in SUFFIX_KINDS:
            return kind, BAD, empty, "empty file (0 bytes)"
        return kind, OK, empty, "empty file (0 bytes): no structure to check"
    plan: Any = None
    try:
        plan = _plan(kind, handle, size, full)
        digest = stream(handle, size, plan.spans, plan.little)
    except Bad as exc:
        return kind, BAD, stream(handle, size, []), str(exc)
    except HashOnly as exc:
        return kind, HASH_ONLY, stream(handle, size, []), str(exc)
    except (EOFError, ValueError) as exc:
        return kind, BAD, stream(handle, size, []), "damaged: %s" % exc
    except (MemoryError, KeyboardInterrupt):
        raise
    except Exception as exc:  # a crafted file must not crash pull: whatever breaks is a finding
        why = "unreadable structure (%s: %s)" % (type(exc).__name__, str(exc)[:200])
        return kind, BAD, stream(handle, size, []), why
    verdict, detail = plan.judge()
    if kind == "rgt.ckpt":
        problem = _arrays.commit_record_problem(full, size, digest)
        verdict, detail = (BAD, problem) if problem else (verdict, detail)
    return kind, verdict, digest, detail


def _declared(
    size: int,
    digest: str,
    want_size: Optional[int],
    want_sha: Optional[str],
    verdict: str,
    detail: str,
) -> Tuple[str, str]:
    """A wrong size or hash is bad whatever the content; a hash_only without a declared hash
    says that nothing vouches for the bytes."""
    if want_size is not None and size != want_size:
        return BAD, "size mismatch: %d bytes on disk, %d declared (truncated copy?)" % (
            size,
            want_size,
        )
    if want_sha is not None and digest != want_sha.lower():
        return BAD, "sha256 mismatch: %s… on disk, %s… declared" % (digest[:12], want_sha[:12])
    if verdict == HASH_ONLY or detail.endswith("no structure to check"):
        vouch = "sha256 matches the manifest" if want_sha else "no manifest sha256 to compare"
        return verdict, "%s; %s" % (detail, vouch)
    return verdict, detail
