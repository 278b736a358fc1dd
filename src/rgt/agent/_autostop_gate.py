"""Is it safe to stop this machine's meter now? The autostop watcher's gate.

Safe means: no job runs, and every job's results are committed on storage that survives the
stop, and verified now. A job that ended has a manifest (written after a re-read): each listed
file is hashed again here and must match, no verdict may be ``bad``, and the file's real path
must lie on a tier whose ``survives_stop`` is true in the policy's survival matrix (the profile's,
plus the durable root a ``--self-stop`` declares kept). A symlinked artifact (the manifest lists
it under ``skipped``) is judged by where it points: a link into scratch that the stop wipes is
a result the stop would lose. A job that was asked to checkpoint and stop (spend cap, deadline)
has ended its attempt without a terminal state; it is safe when an rgt.ckpt commit record newer
than the request names a data file of the recorded size.

Python 3.8, stdlib only (bundled in the agent).
"""

from __future__ import annotations

import glob
import json
import os
from typing import Any, Dict, List, Optional, Tuple

from rgt import _fs
from rgt.agent import jobfiles
from rgt.agent._liveness import status_doc

TERMINAL = jobfiles.TERMINAL


def job_dirs(root: str) -> List[str]:
    jobs = os.path.join(root, "jobs")
    try:
        names = sorted(os.listdir(jobs))
    except OSError:
        return []
    return [os.path.join(jobs, n) for n in names if os.path.isdir(os.path.join(jobs, n))]


def job_states(root: str) -> List[Dict[str, Any]]:
    """Each job's state and whether its agent is alive (the liveness reader of ``status``)."""
    found = []
    for job_dir in job_dirs(root):
        doc = status_doc(job_dir)
        found.append(
            {
                "job_id": os.path.basename(job_dir),
                "dir": job_dir,
                "state": doc.get("state"),
                "agent_alive": bool(doc.get("agent_alive")),
                "agent_pid": doc.get("agent_pid"),
            }
        )
    return found


def running(jobs: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    return [j for j in jobs if j["state"] not in TERMINAL and j["agent_alive"]]


def tier_of(path: str, survival: List[Dict[str, Any]]) -> Optional[Dict[str, Any]]:
    """The tier whose path is the longest prefix of ``path`` (both real paths)."""
    best = None  # type: Optional[Tuple[int, Dict[str, Any]]]
    for tier in survival:
        base = os.path.realpath(os.path.expanduser(str(tier["path"])))
        inside = path == base or path.startswith(base.rstrip("/") + "/")
        if inside and (best is None or len(base) > best[0]):
            best = (len(base), tier)
    return best[1] if best else None


def survives(path: str, survival: List[Dict[str, Any]]) -> Optional[str]:
    """None when ``path`` is on a tier kept by the stop; else why not."""
    real = os.path.realpath(path)
    tier = tier_of(real, survival)
    if tier is None:
        return "%s is on no storage tier the profile knows survives the stop" % real
    if tier.get("survives_stop") is not True:
        word = "is lost" if tier.get("survives_stop") is False else "may be lost (unknown)"
        return "%s is on %s (%s), which %s at the stop" % (
            real,
            tier.get("name") or "a tier",
            tier["path"],
            word,
        )
    return None


def check_manifest(job_dir: str, survival: List[Dict[str, Any]]) -> Optional[str]:
    """None when every artifact of an ended job is present, re-hashes to its entry, was not
    judged bad, and lies on surviving storage; else the first reason it is not."""
    name = os.path.basename(job_dir)
    read = jobfiles.parse_manifest(*_manifest_bytes(job_dir), job_id=name)
    if read.doc is None:
        return "job %s has no readable manifest.json: its artifacts were never verified" % name
    problem = survives(job_dir, survival)
    if problem:
        return "job %s: %s" % (name, problem)
    for entry in read.doc.get("files") or []:
        why = _entry_problem(job_dir, entry, survival)
        if why:
            return "job %s: %s" % (name, why)
    for entry in read.doc.get("skipped") or []:
        why = _link_problem(job_dir, entry, survival)
        if why:
            return "job %s: %s" % (name, why)
    return None


def _manifest_bytes(job_dir: str) -> Tuple[Optional[bytes], str]:
    path = os.path.join(job_dir, "manifest.json")
    raw, _problem = jobfiles.read_bytes(path)
    return raw, path


def _entry_problem(job_dir: str, entry: Dict[str, Any], survival: List[Dict[str, Any]]) -> str:
    rel = str(entry.get("path"))
    path = os.path.join(job_dir, rel)
    if entry.get("verdict") == "bad":
        return "artifact %s was judged bad (%s)" % (rel, entry.get("detail") or "unverified")
    try:
        size, digest = os.path.getsize(path), _fs.sha256_file(path)
    except OSError as exc:
        return "artifact %s is missing (%s)" % (rel, exc.strerror)
    if size != entry.get("bytes") or digest != entry.get("sha256"):
        return "artifact %s no longer matches its manifest (sha256 %s... -> %s...)" % (
            rel,
            str(entry.get("sha256"))[:12],
            digest[:12],
        )
    return survives(path, survival) or ""


def _link_problem(job_dir: str, entry: Dict[str, Any], survival: List[Dict[str, Any]]) -> str:
    rel = str(entry.get("path") or "")
    path = os.path.join(job_dir, rel)
    if not rel or not os.path.islink(path):
        return ""
    problem = survives(path, survival)
    return "artifact %s is a link: %s" % (rel, problem) if problem else ""


def checkpoint_committed(job_dir: str, since: float, survival: List[Dict[str, Any]]) -> str:
    """ "" when an rgt.ckpt commit record written at or after ``since`` names a data file of
    the recorded size on surviving storage; else why not."""
    base = os.path.join(job_dir, "ckpt")
    newest = None  # type: Optional[Tuple[float, str, Dict[str, Any]]]
    for record in glob.glob(os.path.join(glob.escape(base), "ckpt-*.json")):
        data = _json(record)
        try:
            stamp = float(data["time"])
        except (KeyError, TypeError, ValueError):
            continue
        if stamp >= since and (newest is None or stamp > newest[0]):
            newest = (stamp, record, data)
    name = os.path.basename(job_dir)
    if newest is None:
        return "job %s committed no checkpoint since it was asked to save one" % name
    target = os.path.join(base, os.path.basename(str(newest[2].get("file"))))
    try:
        if os.path.getsize(target) != int(newest[2].get("bytes", -1)):
            return "job %s: checkpoint %s does not have its recorded size" % (name, target)
    except (OSError, ValueError):
        return "job %s: checkpoint %s named by its commit record is missing" % (name, target)
    problem = survives(target, survival)
    return "job %s: %s" % (name, problem) if problem else ""


def _json(path: str) -> Dict[str, Any]:
    try:
        with open(path, "rb") as handle:
            data = json.loads(handle.read().decode("utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def safe_to_stop(
    jobs: List[Dict[str, Any]], survival: List[Dict[str, Any]], asked_at: Optional[float]
) -> Optional[str]:
    """None when the stop loses nothing; else the first reason it would."""
    for job in jobs:
        if job["state"] in TERMINAL:
            why = check_manifest(job["dir"], survival)
        elif job["agent_alive"]:
            why = "job %s is still %s" % (job["job_id"], job["state"])
        elif asked_at is not None:
            why = checkpoint_committed(job["dir"], asked_at, survival)
        else:
            why = "job %s is %s with no agent (resume or cancel it)" % (job["job_id"], job["state"])
        if why:
            return why
    return None
