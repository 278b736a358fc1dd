"""Failure triage: one label from a fixed vocabulary for a failed job, with cause and remedy.

    from rgt.triage import classify, read_tail
    verdict = classify(read_tail("logs/attempt-1.log"), exit_code=137,
                       context={"oom_kill_delta": 1})
    verdict.label, verdict.retryable, verdict.remedy

The rules are data (``rules/*.json``, one file per family); ``rgt triage`` and the agent on the
rented machine share them, so the agent's retry-or-stop decision and the user's view agree.
This package is bundled into the agent zipapp: stdlib only, Python >= 3.8.
"""

from __future__ import annotations

from rgt.triage.engine import Verdict, classify, default_rules, normalize_status, read_tail
from rgt.triage.labels import LABEL_RETRYABLE, LABELS
from rgt.triage.rules import Rule, RuleFileError, load_rules
from rgt.triage.scan import scan_file

__all__ = [
    "LABELS",
    "LABEL_RETRYABLE",
    "Rule",
    "RuleFileError",
    "Verdict",
    "classify",
    "default_rules",
    "load_rules",
    "normalize_status",
    "read_tail",
    "scan_file",
]
