"""``rgt verify tracker``: forensics over experiment-tracker data left on disk.

Readers (one per tracker, each imported only when its data is found) turn MLflow ``mlruns/``,
TensorBoard event files, W&B offline run folders and trackio databases into ``TrackedRun``
records; one set of checks (``checks.py``) turns those into ``Finding`` records, the format
DELIVER's disclosure gate prints. Stdlib only at import.
"""

from __future__ import annotations

from rgt.verify.tracker.record import Point, TrackedRun
from rgt.verify.tracker.scan import DEFAULT_STALE_AFTER_S, TrackerReport, discover, scan

__all__ = ["DEFAULT_STALE_AFTER_S", "Point", "TrackedRun", "TrackerReport", "discover", "scan"]
