"""VERIFY's name for the one integrity record, ``rgt.findings.Finding``.

The record lives below both phases (``rgt/findings.py``): VERIFY's probes create it, DELIVER's
disclosure gate reads it from ``findings/``, and neither package imports the other for it.
"""

from __future__ import annotations

from rgt.findings import (
    SEVERITIES,
    SEVERITY_ALIASES,
    Finding,
    Severity,
    has_bug,
    run_matches,
    stamped,
)

__all__ = [
    "SEVERITIES",
    "SEVERITY_ALIASES",
    "Finding",
    "Severity",
    "has_bug",
    "run_matches",
    "stamped",
]
