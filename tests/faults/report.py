"""Render the tally a fault run wrote (``RGT_FAULTS_REPORT``) as the tables of RELIABILITY.md.

python -m tests.faults.report /tmp/tally.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any


def render(tally: dict[str, dict[str, Any]]) -> str:
    lines = [
        "| fault class (module::test) | trials | passed | failed | seconds |",
        "|---|---:|---:|---:|---:|",
    ]
    totals = [0, 0, 0, 0.0]
    for name, row in sorted(tally.items()):
        trials = row["passed"] + row["failed"] + row.get("skipped", 0)
        lines.append(
            f"| `{name}` | {trials} | {row['passed']} | {row['failed']} | {row['seconds']:.0f} |"
        )
        for i, key in enumerate(("passed", "failed")):
            totals[i + 1] += row[key]
        totals[0] += trials
        totals[3] += row["seconds"]
    lines.append(f"| **all** | {totals[0]} | {totals[1]} | {totals[2]} | {totals[3]:.0f} |")
    lines += ["", "Failed trials and the assertion that failed:", ""]
    for _name, row in sorted(tally.items()):
        for failure in row.get("failures", []):
            trial = failure["trial"]
            lines.append(f"- `{trial}` — {failure['why']}")
    return "\n".join(lines)


if __name__ == "__main__":
    print(render(json.loads(Path(sys.argv[1]).read_text())))
