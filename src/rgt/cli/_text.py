"""Text from a job (its log) shown on the user's terminal: never as escape sequences.

A log is whatever the job printed; on a rented machine that is someone else's computer. OSC
sequences can set the window title, write the clipboard (OSC 52) or make hyperlinks, and CSI
sequences can clear the screen or hide lines, so human output shows a log's text without them.
(``--json`` keeps the data as is: JSON escapes control characters.)
"""

from __future__ import annotations

import re

# CSI (colours, cursor moves), OSC (window titles, hyperlinks, clipboard writes) and other
# two-byte escapes; then any control character left is shown as an escape, never sent raw.
_ESCAPES = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"  # CSI
    r"|\x9b[0-?]*[ -/]*[@-~]"  # 8-bit CSI
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\|$)"  # OSC, ended by BEL or ST
    r"|\x1b[ -/]*[0-~]"  # other escapes (RIS, charset selection, keypad modes)
)
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """``text`` without terminal escape sequences; other control characters made visible."""
    return _CONTROL.sub(lambda m: repr(m.group())[1:-1], _ESCAPES.sub("", text))
