"""The body of one fetched file: how many bytes it may have, and whether what arrived is the
file (shipped next to the downloader in the fetch job's snapshot; stdlib only, Python 3.8).

A hub, a mirror or a URL's server decides how long its answer is. A file stops at its
published size; ``--max-bytes N`` refuses a file that declares more and cuts any body at N; a
body that declares no length at all is cut at :data:`UNSIZED_CAP`. A body past its cap is an
:class:`Overflow`: the downloader removes the partial file (bytes past a cap are not resumable).
"""

from __future__ import annotations

import hashlib
import time
from typing import Any

if __package__:
    from rgt._confine import Within
    from rgt.fetch.fetch_aids import CHUNK, Fatal, Hashed, say
else:  # in the fetch job's snapshot, its parts lie next to it
    from _confine import Within  # type: ignore
    from fetch_aids import CHUNK, Fatal, Hashed, say  # type: ignore

# A body that declares no length (no Content-Length, no size from the hub) is cut here unless
# ``--max-bytes`` says otherwise: an endless answer must not fill the machine's disk.
UNSIZED_CAP = 16 << 30
PROGRESS_S = 10.0  # a progress line in the job's log (`rgt logs`, `rgt watch`)


class Overflow(Fatal):
    """The body ran past its cap; the partial file is removed (it cannot be resumed)."""


def copy_capped(response: Any, out: Any, offset: int, f: dict[str, Any], hashed: Hashed) -> int:
    """The body into ``out`` (at ``offset``), cut at the file's cap (:func:`cap`)."""
    limit, why = cap(f)
    got, shown = 0, time.monotonic()
    with out:
        hashed.start(out)  # written (and hashed) by a thread from here
        try:
            for chunk in iter(lambda: response.read(CHUNK), b""):
                if offset + got + len(chunk) > limit:
                    raise Overflow(
                        f"{f['name']}: the server sent more than {limit} bytes ({why}); the "
                        "partial file was removed"
                    )
                hashed.update(chunk)
                got += len(chunk)
                if time.monotonic() - shown >= PROGRESS_S:
                    shown = time.monotonic()
                    say(f"progress {f['name']} {hashed.count}/{f.get('size')} bytes")
        finally:
            hashed.stop()
    return got


def cap(f: dict[str, Any]) -> Any:
    """The most bytes a file may have, and why: its published size, ``--max-bytes``, or the
    cap of a body that declares no length (:data:`UNSIZED_CAP`)."""
    if f.get("size") is not None:
        size = int(f["size"])
        if "blob_id" in f:
            return size, f"the hub publishes {size}: the mirror served another file"
        return size, "its declared length"
    if f.get("max_bytes"):
        return int(f["max_bytes"]), "--max-bytes"
    return UNSIZED_CAP, "it declared no length; `rgt fetch … --max-bytes N` sets another cap"


def check_cap(f: dict[str, Any], size: int | None) -> None:
    if size is not None and f.get("max_bytes") and int(size) > int(f["max_bytes"]):
        raise Fatal(
            f"{f['name']} is {size} bytes, over --max-bytes {f['max_bytes']}: not downloaded"
        )


def published_size(response: Any, start: int) -> int | None:
    linked = response.headers.get("X-Linked-Size")
    if linked:
        return int(linked)
    whole = response.headers.get("Content-Range", "").rpartition("/")[2]
    if whole.isdigit():
        return int(whole)
    length = response.headers.get("Content-Length")
    return int(length) + (start if response.status == 206 else 0) if length else None


def verify(f: dict[str, Any], place: Within, part: str, hashed: Hashed) -> None:
    size, want = place.size(part), f.get("size")
    if want is not None and size != int(want):
        raise Fatal(
            f"{f['name']} is {size} bytes, the hub publishes {want}: the mirror served another "
            f"file; {part} kept for inspection"
        )
    if f.get("sha256") and _sha256(place, part, hashed, size) != f["sha256"].lower():
        place.remove(part)  # wrong bytes cannot be resumed
        whose = "hub's" if "blob_id" in f else "one given by --sha256"
        raise Fatal(f"{f['name']}: sha256 differs from the {whose}; removed, run the fetch again")
    with place.open(part, "rb") as head:
        first = head.read(64).lstrip().lower()
    if first.startswith((b"<!doctype html", b"<html")) and not f["name"].endswith(".html"):
        raise Fatal(
            f"{f['name']} is an HTML page, not the file: the mirror answered with an error page"
        )


def _sha256(place: Within, part: str, hashed: Hashed, size: int) -> str:
    return hashed.h.hexdigest() if hashed.count == size else _digest(place, part)


def complete(place: Within, leaf: str, f: dict[str, Any]) -> bool:
    """Already there whole: its published size, and its sha256 when one is known."""
    if not place.is_file(leaf):
        return False
    if f.get("size") is not None and place.size(leaf) != int(f["size"]):
        return False
    if f.get("sha256"):
        return _digest(place, leaf) == str(f["sha256"]).lower()
    return f.get("size") is not None


def _digest(place: Within, leaf: str) -> str:
    h = hashlib.sha256()
    with place.open(leaf, "rb") as src:
        for block in iter(lambda: src.read(CHUNK), b""):
            h.update(block)
    return h.hexdigest()
