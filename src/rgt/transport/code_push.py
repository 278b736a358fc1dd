"""Send a code snapshot to the machine and prove what arrived.

rsync copies exactly the snapshot's files (read-only on the machine); the machine then hashes
them (``remote_hash``) and the tree must hash to the snapshot's digest, or the push failed.
"""

from __future__ import annotations

import hashlib
import tempfile
from typing import Any

from rgt.errors import VerifyError
from rgt.transport.base import ProgressFn
from rgt.transport.remote_hash import remote_sha256
from rgt.transport.rsync import Rsync
from rgt.transport.snapshot import Snapshot


def push_snapshot_files(
    transport: Any, snapshot: Snapshot, remote: str, progress: ProgressFn | None = None
) -> None:
    """rsync exactly the snapshot's files into ``remote`` (read-only there), then prove the
    remote tree hashes to the snapshot's digest."""
    with tempfile.NamedTemporaryFile("wb", prefix="rgt-files-") as listing:
        listing.write(b"\0".join(f.rel.encode("utf-8", "surrogateescape") for f in snapshot.files))
        listing.flush()
        extra = ["--from0", f"--files-from={listing.name}", "--chmod=Fa-w"]
        Rsync(transport, extra=extra).transfer(
            [f"{snapshot.root}/"], transport.remote_spec(remote + "/"), progress=progress
        )
    python = transport.target.python
    remote_hashes = remote_sha256(transport, python, remote, [f.rel for f in snapshot.files])
    if snapshot_digest(snapshot, remote_hashes) != snapshot.digest:
        raise VerifyError(
            f"the code that arrived in {remote} does not hash to snapshot {snapshot.digest}",
            path=remote,
            fix="a file changed while it was pushed; push again",
        )


def snapshot_digest(snapshot: Snapshot, hashes: dict[str, str | None]) -> str:
    """The snapshot digest (``rgt.transport.snapshot``) recomputed from the given file hashes."""
    outer = hashlib.sha256()
    for item in snapshot.files:
        outer.update(
            f"{item.rel}\0{int(item.executable)}\0{hashes.get(item.rel)}\n".encode(
                "utf-8", "surrogateescape"
            )
        )
    return outer.hexdigest()[:20]
