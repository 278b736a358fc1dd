"""`code_error`: an uncaught exception in the user's own code, from real Python processes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from rgt.agent._classify import AttemptFacts, decide
from rgt.triage import LABEL_RETRYABLE, classify

USER_CODE = """\
import json


def load(path):
    return json.loads(open(path).read())["lr"]


def main():
    print("step 0 loss 4.2", flush=True)
    lr = load(__file__ + ".json")
    print(lr)


main()
"""


def _crash(tmp_path: Path, source: str) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "train.py"
    script.write_text(source)
    (tmp_path / "train.py.json").write_text('{"learning_rate": 3e-4}')
    return subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=60, cwd=tmp_path
    )


def test_an_uncaught_exception_in_user_code_is_code_error_with_its_line(tmp_path: Path) -> None:
    proc = _crash(tmp_path, USER_CODE)
    verdict = classify(proc.stdout + proc.stderr, exit_code=proc.returncode)
    assert (verdict.label, verdict.retryable, verdict.secondary) == ("code_error", False, [])
    assert "fix the code" in verdict.remedy
    assert verdict.evidence[0] == f"{tmp_path / 'train.py'}:5 in load: KeyError: 'lr'"
    assert verdict.evidence[1] == 'return json.loads(open(path).read())["lr"]'
    assert not LABEL_RETRYABLE["code_error"]


def test_the_user_frame_is_named_not_the_library_frame(tmp_path: Path) -> None:
    source = "import json\n\njson.loads('{bad')\n"
    proc = _crash(tmp_path, source)
    verdict = classify(proc.stderr, exit_code=proc.returncode)
    assert verdict.label == "code_error"
    assert verdict.evidence[0].startswith(f"{tmp_path / 'train.py'}:3 in <module>: ")
    assert "JSONDecodeError" in verdict.evidence[0]


def test_a_more_specific_cause_keeps_its_label(tmp_path: Path) -> None:
    source = "import a_module_that_is_not_installed_anywhere\n"
    proc = _crash(tmp_path, source)
    verdict = classify(proc.stderr, exit_code=proc.returncode)
    assert (verdict.label, verdict.secondary) == ("import_error", [])


def test_ctrl_c_and_a_success_are_not_code_errors(tmp_path: Path) -> None:
    interrupted = 'Traceback (most recent call last):\n  File "a.py", line 1\nKeyboardInterrupt\n'
    assert classify(interrupted, exit_code=130).label != "code_error"
    assert classify(_crash(tmp_path, USER_CODE).stderr, exit_code=0).label == "unknown"


def test_the_agent_does_not_retry_a_code_error(tmp_path: Path) -> None:
    proc = _crash(tmp_path, USER_CODE)
    decision = decide(AttemptFacts(proc.returncode, None, log_tail=proc.stderr))
    assert (decision.label, decision.retryable) == ("code_error", False)
    assert "KeyError: 'lr'" in decision.evidence[0]


def test_rgt_own_disk_budget_error_is_disk_full(tmp_path: Path) -> None:
    # A real refusal by rgt.ckpt's budget check: more bytes than any disk has.
    source = (
        f"from rgt.ckpt._budget import check_budget\ncheck_budget({str(tmp_path)!r}, 1 << 62)\n"
    )
    script = tmp_path / "save.py"
    script.write_text(source)
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)
    assert "DiskBudgetError" in proc.stderr, proc.stderr
    verdict = classify(proc.stderr, exit_code=proc.returncode)
    assert (verdict.label, verdict.retryable) == ("disk_full", False)
    assert any("DiskBudgetError" in line for line in verdict.evidence)
