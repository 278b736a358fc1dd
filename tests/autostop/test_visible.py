"""An armed autostop is visible everywhere: `rgt watch` (human and --json), `rgt status`, the
UI's machine card and the MCP watch/status tools: the policy, the money so far, the time to the
cap, the last reason it did not fire."""

from __future__ import annotations

from pathlib import Path

import pytest

from rgt.state.store import Store
from rgt.ui import views
from rgt.ui.patrol import UiPatrol
from tests.autostop.helpers import arm, events, project, recorder, run_job, wait_for
from tests.clirun import ok, rgt
from tests.sshd import SshServer
from tests.watch.test_watch_cli import schema


@pytest.mark.slow
def test_policy_money_cap_and_reason_everywhere(tmp_path: Path, sshd_server: SshServer) -> None:
    root, record = tmp_path / "root", tmp_path / "STOP"
    up = rgt(
        "up", "generic-ssh", "--name", "gpu", "--ssh", sshd_server.ssh_line, "--root", str(root),
        "--price", "2", "--self-stop", recorder(record),
    )  # fmt: skip
    assert up.returncode == 0, up.stderr
    job = run_job(
        "gpu", project(tmp_path, "open('out.txt', 'w').write('x')\n"), "python3", "train.py"
    )
    assert wait_for((root / ".rgt" / "jobs" / job / "DONE").exists, 60)
    (root / ".rgt" / "jobs" / job / "work" / "out.txt").unlink()  # the stop must not fire now
    code, seen = arm("gpu", "--after-jobs", "--budget", "100", "--idle", "2h")
    assert code == 0, seen
    assert wait_for(lambda: [e for e in events(root) if e["kind"] == "autostop_blocked"], 30)

    report = ok(rgt("watch", "--once", "--json"))
    schema("watch").validate(report)  # the compact form's schema names the field
    schema("status", "status_report").validate(ok(rgt("status", "--json")))
    watch = report["machines"][0]["autostop"]
    assert watch["when"] == ["every job ended", "idle 120 min", "spend 100 USD"]
    assert watch["currency"] == "USD" and 0 < watch["spent"] < 1
    assert 49 * 3600 < watch["time_to_cap_s"] <= 50 * 3600  # (100 - spent) / 2 per hour
    assert "out.txt is missing" in watch["not_fired_because"]
    human = rgt("watch", "--once").stdout
    assert "autostop gpu: armed" in human and "cap in" in human and "not fired" in human

    status = ok(rgt("status", "--json"))["autostop"]["gpu"]
    assert status["not_fired_because"] == watch["not_fired_because"]

    patrol = UiPatrol(Store.open())
    patrol.tick()
    card = next(m for m in views.machines(patrol) if m["name"] == "gpu")
    assert card["autostop"].startswith("autostop gpu: armed") and "out.txt" in card["autostop"]

    from rgt.mcp import tools_run

    mcp = tools_run.watch()
    assert mcp["machines"][0]["autostop"]["not_fired_because"] == watch["not_fired_because"]
    assert tools_run.status()["autostop"]["gpu"]["armed"] is True
