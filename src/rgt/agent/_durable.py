"""A notebook VM's results, copied to its durable folder once the manifest is written.

On a machine registered with ``rgt up colab`` (or ``kaggle-notebook``) the job runs on the VM's
disk, which is gone with the VM; its checkpoints reach Drive through ``rgt.ckpt.mirror`` while it
runs. When it ends and its manifest is verified, this copies every artifact of the manifest
(checkpoints excluded: already mirrored) and then the manifest itself to
``<RGT_SESSION_DURABLE>/<job-id>/``, each through a temp name, fsync, a read-back whose SHA-256
must equal the manifest's (retried with backoff while the mount lags), and a rename. The
manifest goes last, so a manifest on Drive vouches only for files that read back intact. Events:
``artifacts_mirrored`` or ``artifacts_mirror_lagging`` (warning, with the files that did not).
"""

from __future__ import annotations

import json
import os
import shutil
import time
from typing import Any, Dict, List

from rgt import _fs
from rgt.agent._record import JobRecorder, log
from rgt.agent.paths import JobPaths

WAIT_S = 300.0


def _setting(spec: Dict[str, Any], name: str) -> str:
    return str(os.environ.get(name) or (spec.get("env") or {}).get(name) or "")


def mirror_outputs(paths: JobPaths, spec: Dict[str, Any], rec: JobRecorder) -> None:
    """Copy the manifest's artifacts and then the manifest; never raises (the job is done)."""
    durable = _setting(spec, "RGT_SESSION_DURABLE")
    if not durable:
        return
    started = time.monotonic()
    target = os.path.join(durable, paths.job_id)
    try:
        with open(paths.manifest, encoding="utf-8") as handle:
            entries = json.load(handle)["files"]
        late = _copy_all(paths.root, target, [e for e in entries if not _is_ckpt(e["path"])])
        if not late:
            late = _copy_all(paths.root, target, [_manifest_entry(paths.manifest)])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        late = ["%s: %s" % (type(exc).__name__, exc)]
    detail = {"target": target, "seconds": round(time.monotonic() - started, 3)}
    if late:
        detail["late"] = late[:20]
        nxt = "keep the session alive and run `rgt pull %s` to a durable folder" % paths.job_id
        rec.event("artifacts_mirror_lagging", detail, nxt, severity="warning")
    else:
        rec.event("artifacts_mirrored", dict(detail, files=len(entries)))


def _is_ckpt(rel: str) -> bool:
    return rel.split("/", 1)[0] == "ckpt"


def _manifest_entry(path: str) -> Dict[str, Any]:
    return {"path": os.path.basename(path), "sha256": _fs.sha256_file(path)}


def _copy_all(root: str, target: str, entries: List[Dict[str, Any]]) -> List[str]:
    """The paths that did not read back intact in time (empty: all did)."""
    deadline = time.monotonic() + _system_wait()
    return [e["path"] for e in entries if not _copy_one(root, target, e, deadline)]


def _copy_one(root: str, target: str, entry: Dict[str, Any], deadline: float) -> bool:
    rel = str(entry["path"])
    final = os.path.join(target, rel)
    os.makedirs(os.path.dirname(final), exist_ok=True)
    temp = os.path.join(os.path.dirname(final), ".tmp-%s.part" % os.path.basename(final))
    with open(os.path.join(root, rel), "rb") as src, open(temp, "wb") as dst:
        shutil.copyfileobj(src, dst, 1 << 20)
        dst.flush()
        os.fsync(dst.fileno())
    delay = 0.05
    while _fs.sha256_file(temp) != entry["sha256"]:
        if time.monotonic() + delay > deadline:
            os.unlink(temp)
            log("durable copy of %s did not read back intact in time" % rel)
            return False
        time.sleep(delay)
        delay = min(delay * 2, 5.0)
    os.replace(temp, final)
    _fs.fsync_dir(os.path.dirname(final))
    return True


def _system_wait() -> float:
    try:
        return max(0.0, float(os.environ.get("RGT_CKPT_MIRROR_WAIT_S") or WAIT_S))
    except ValueError:
        return WAIT_S
