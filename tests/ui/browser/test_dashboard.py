"""`rgt ui` in a real headless Chromium against a real local machine running real jobs.

One scene per module: a local machine `box` with a job that runs until the test lets it finish
(writing a metrics file with NaN/inf/garbage lines among its points), a job that fails with an
import error, and a job to cancel; an ssh machine on a closed port (unreachable) with 120 job
records, for pagination. The page is opened once; every change after that arrives by SSE.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from rgt.models import JobSpec, JobState
from rgt.state.store import Store
from tests.clirun import rgt
from tests.sshd import add_unreachable
from tests.ui.browser.chrome import Browser, missing, shots_dir
from tests.ui.browser.conftest import UiServer, clean_env, start_ui, stop_ui, wait_http

POINTS = 40  # valid metric lines the steady job writes
STEADY = f"""
import json, os, sys, time
out = os.environ["RGT_OUTPUT_DIR"]
with open(os.path.join(out, "metrics.jsonl"), "a") as m:
    for step in range(1, {POINTS} + 1):
        m.write(json.dumps({{"step": step, "loss": 3.0 / step}}) + "\\n")
    m.write('{{"step": 41, "loss": NaN}}\\n{{"step": 42, "loss": Infinity}}\\nnot json at all\\n')
print("training: step 40 loss 0.075", flush=True)
while not os.path.exists(os.path.join(out, "go")):
    time.sleep(0.05)
print("finished cleanly", flush=True)
"""
BROKEN = "import rgt_ui_no_such_module  # fails at once: triage labels it import_error\n"
VICTIM = """
import os, time
out = os.environ["RGT_OUTPUT_DIR"]
print("waiting to be cancelled", flush=True)
while not os.path.exists(os.path.join(out, "go")):
    time.sleep(0.05)
"""
FAKE_JOBS = 120
# One scene and one browser for the module: keep every test of it on one xdist worker.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("ui-browser")]


@dataclass(frozen=True)
class Scene:
    home: Path
    box: Path
    ui: UiServer
    steady: str
    broken: str
    victim: str
    shots: Path

    def outputs(self, job_id: str) -> Path:
        return self.box / ".rgt" / "jobs" / job_id / "outputs"


def launch(home: Path, proj: Path, jobs: dict[str, str]) -> list[str]:
    """`rgt run box` each script, all at once; the job ids in the order given."""
    procs = []
    for name, code in jobs.items():
        (proj / name).write_text(code)
        argv = ["run", "box", "--probe-seconds", "0", "--json", "--", sys.executable, name]
        procs.append(
            subprocess.Popen(
                [sys.executable, "-m", "rgt.cli", *argv],
                cwd=proj,
                env=clean_env(home),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    ids = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode in (0, 1), out + err  # 1: the job failed within the probe
        ids.append(str(json.loads(out)["job_id"]))
    return ids


def unreachable_machine(home: Path) -> None:
    """An ssh machine nobody answers on (port 9) holding FAKE_JOBS queued job records."""
    store = Store.open(home / "state.db")
    add_unreachable(store, "gone", home / "known_hosts", price=1.25)
    for n in range(FAKE_JOBS):
        store.add_job(JobSpec(job_id=f"old-{n:03d}", machine="gone", command=("python3", "t.py")))
    store.update_job("old-000", state=JobState.RUNNING, attempts=1)


@pytest.fixture(scope="module")
def scene(ui_home: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scene]:
    why = missing()
    if why:  # before the jobs start: they are only worth it with a browser to look at them
        pytest.skip(why)
    work = tmp_path_factory.mktemp("ui-scene")
    box = work / "box root"
    up = rgt("up", "local", "--name", "box", "--root", str(box), env={"RGT_HOME": str(ui_home)})
    assert up.returncode == 0, up.stderr
    unreachable_machine(ui_home)
    proj = work / "proj"
    proj.mkdir()
    ids = launch(ui_home, proj, {"steady.py": STEADY, "broken.py": BROKEN, "victim.py": VICTIM})
    ui = start_ui(ui_home, work / "ui.log", "--interval", "0.5")
    wait_http(ui.base)
    scene = Scene(ui_home, box, ui, *ids, shots=shots_dir(work / "shots"))
    try:
        yield scene
    finally:
        for job_id in ids:
            if scene.outputs(job_id).is_dir():
                (scene.outputs(job_id) / "go").write_text("")
        stop_ui(ui.proc)
        subprocess.run(
            [sys.executable, "-m", "rgt.cli", "cancel", scene.victim, "--json"],
            env=clean_env(ui_home),
            capture_output=True,
            timeout=60,
            check=False,
        )


@pytest.fixture(scope="module")
def page(scene: Scene, browser: Browser) -> Browser:
    """The browser, signed in: the token URL once sets the cookie the later pages need."""
    browser.get(scene.ui.url)
    browser.wait(lambda: "token=" not in browser.driver.current_url, message="token kept")
    return browser


def api(scene: Scene, path: str) -> str:
    """A JSON answer of the server as text, for failure messages."""
    token = scene.ui.url.split("token=", 1)[-1]
    return httpx.get(scene.ui.base + path, headers={"X-RGT-Token": token}, timeout=10).text


def row(job_id: str) -> str:
    return f'[data-testid="job-row"][data-job-id="{job_id}"]'


def no_reload_marker(browser: Browser) -> None:
    browser.js("window.__rgtSamePage = 'yes';")


def same_page(browser: Browser) -> bool:
    return bool(browser.js("return window.__rgtSamePage === 'yes';"))


def test_a_job_goes_from_running_to_succeeded_without_a_reload(scene: Scene, page: Browser) -> None:
    page.get(scene.ui.url)
    page.wait(
        lambda: page.attr(row(scene.steady), "data-state") == "running",
        message="the steady job shown as running",
    )
    page.wait(
        lambda: page.attr('[data-testid="live-status"]', "data-live") == "live",
        message="the event stream connected",
    )
    assert "token=" not in page.driver.current_url  # taken out of the address bar
    no_reload_marker(page)
    page.screenshot(scene.shots, "overview-running")
    (scene.outputs(scene.steady) / "go").write_text("")
    page.wait(
        lambda: page.attr(row(scene.steady), "data-state") == "succeeded",
        timeout=30,
        message="the job row turned succeeded by SSE",
    )
    assert same_page(page), "the page was reloaded; the update must come by SSE"
    cell = page.text(row(scene.steady) + ' [data-testid="job-state"]') or ""
    assert cell.strip().startswith("succeeded")
    page.screenshot(scene.shots, "overview-succeeded")


def test_a_failed_job_shows_its_triage_label(scene: Scene, page: Browser) -> None:
    label = row(scene.broken) + ' [data-testid="job-label"]'
    page.get(scene.ui.base + "/")
    page.wait(
        lambda: page.attr(row(scene.broken), "data-state") == "failed",
        timeout=30,
        message="the broken job shown as failed",
    )
    page.wait(
        lambda: (page.text(label) or "").strip() == "import_error",
        timeout=30,
        message="its label import_error",
    )
    remedy = page.text(row(scene.broken) + ' [data-testid="job-remedy"]') or ""
    assert remedy.strip(), "a failed job names a remedy"


def test_the_gate_shows_what_is_missing_and_the_fix(scene: Scene, page: Browser) -> None:
    page.get(scene.ui.base + "/")
    card = '[data-testid="machine-card"][data-machine="box"]'
    checks = card + ' [data-testid="gate-check"]'
    page.wait(lambda: page.count(checks) == 4, message="four gate checks on box")
    rows = page.js(
        "return Array.from(document.querySelectorAll(arguments[0]))"
        ".map(c => [c.dataset.check, c.dataset.ok,"
        " c.querySelector('[data-testid=gate-missing]').textContent,"
        " c.querySelector('[data-testid=gate-fix]').textContent]);",
        checks,
    )
    by_name = {name: (ok, missing, fix) for name, ok, missing, fix in rows}
    assert set(by_name) == {"jobs_ended", "artifacts_pulled", "artifacts_verified", "approved"}
    ok, missing, fix = by_name["approved"]
    assert ok == "false" and "rgt approve box" in fix
    ok, missing, fix = by_name["artifacts_pulled"]
    assert ok == "false" and scene.steady in missing and "rgt pull" in fix
    assert page.js(f"return !!document.querySelector('{card} [data-testid=machine-cost]')")


def test_an_unreachable_machine_is_shown_with_its_last_good_reading(
    scene: Scene, page: Browser
) -> None:
    page.get(scene.ui.base + "/")
    card = '[data-testid="machine-card"][data-machine="gone"]'
    page.wait(
        lambda: page.attr(card, "data-reachable") == "false",
        timeout=20,
        message="gone shown unreachable",
    )
    badge = page.text(card + ' [data-testid="unreachable"]') or ""
    assert "last good reading" in badge and "dead" not in badge.replace("not dead", "")
    page.screenshot(scene.shots, "overview")


def test_a_curve_draws_every_finite_point_and_notes_the_rest(scene: Scene, page: Browser) -> None:
    (scene.outputs(scene.steady) / "go").write_text("")  # the first test's step, if run alone
    page.get(f"{scene.ui.base}/jobs/{scene.steady}")
    curve = f'[data-testid="curve"][data-job-id="{scene.steady}"][data-metric="loss"]'
    page.wait(
        lambda: page.attr(curve, "data-points") == str(POINTS),
        timeout=30,
        message=f"the loss curve drawn with {POINTS} points",
    )
    assert float(page.attr(curve, "data-rendered-ms") or "nan") >= 0
    assert page.js(f"return !!document.querySelector('{curve} canvas')")
    note = page.text('[data-testid="curve-note"]') or ""
    assert "3 lines skipped" in note
    page.wait(
        lambda: "finished cleanly" in (page.text('[data-testid="log-tail"]') or ""),
        timeout=30,
        message="the log tail shows the job's last line: "
        + api(scene, f"/api/jobs/{scene.steady}/log"),
    )
    page.js("document.getElementById(arguments[0]).click();", "curve-log-1")
    page.wait(lambda: page.attr(curve, "data-points") == str(POINTS), message="log scale")
    page.screenshot(scene.shots, "job")


def test_cancel_asks_first(scene: Scene, page: Browser) -> None:
    page.get(f"{scene.ui.base}/jobs/{scene.victim}")
    button = '[data-testid="cancel-button"]'
    page.wait(lambda: page.attr(button, "type"), message="a cancel button")
    page.js("document.querySelector(arguments[0]).click();", button)
    alert = page.wait(lambda: page.driver.switch_to.alert, message="a confirm dialog")
    assert scene.victim in alert.text
    alert.dismiss()
    time.sleep(0.5)
    assert (page.text('#job [data-testid="job-state"]') or "").startswith("running")
    page.js("document.querySelector(arguments[0]).click();", button)
    page.wait(lambda: page.driver.switch_to.alert, message="the confirm again").accept()
    page.wait(
        lambda: (page.text('#job [data-testid="job-state"]') or "").startswith("cancelled"),
        timeout=40,
        message="the job cancelled",
    )


def test_pagination_and_the_404_page(scene: Scene, page: Browser) -> None:
    page.get(scene.ui.base + "/")
    total = FAKE_JOBS + 3
    assert (page.text('[data-testid="jobs-total"]') or "").strip() == str(total)
    assert "page 1 of 3" in (page.text('[data-testid="pager"]') or "")
    page.js("document.querySelector('[data-testid=pager] a[rel=next]').click();")
    page.wait(lambda: "page 2 of 3" in (page.text('[data-testid="pager"]') or ""), message="page 2")
    assert page.js("return document.querySelectorAll('[data-testid=job-row]').length") == 50
    page.get(scene.ui.base + "/jobs/no-such-job")
    assert page.attr('[data-testid="not-found"]', "data-testid") == "not-found"
    status = httpx.get(scene.ui.url.replace("/?", "/jobs/no-such-job?"), timeout=10)
    assert status.status_code == 404
    page.screenshot(scene.shots, "not-found")


def test_the_stream_reconnects_when_the_server_comes_back(
    scene: Scene, page: Browser, tmp_path: Path
) -> None:
    live = '[data-testid="live-status"]'
    first = start_ui(scene.home, tmp_path / "ui.log", "--no-token", "--interval", "0.5")
    port = int(first.base.rsplit(":", 1)[1])
    try:
        wait_http(first.base)
        page.get(first.base + "/")
        page.wait(lambda: page.attr(live, "data-live") == "live", message="connected")
        no_reload_marker(page)
    finally:
        stop_ui(first.proc)
    page.wait(lambda: page.attr(live, "data-live") == "down", message="the drop is shown")
    assert "retrying" in (page.text(live) or "")
    again = start_ui(scene.home, tmp_path / "ui.log", "--no-token", "--interval", "0.5", port=port)
    try:
        page.wait(lambda: page.attr(live, "data-live") == "live", timeout=40, message="back")
        assert same_page(page)
    finally:
        stop_ui(again.proc)


PAGES = ["/", "/jobs/{steady}", "/jobs/{broken}", "/results", "/jobs/nope"]


@pytest.mark.parametrize("path", PAGES)
def test_accessibility_basics(scene: Scene, page: Browser, path: str) -> None:
    page.get(scene.ui.base + path.format(steady=scene.steady, broken=scene.broken))
    page.wait(lambda: page.js("return document.readyState") == "complete", message="load")
    page.wait(
        lambda: page.js(
            "return Array.from(document.querySelectorAll('[data-testid=curve]'))"
            ".every(c => c.hasAttribute('data-points') || c.hasAttribute('data-error'));"
        ),
        message="curves drawn",
    )
    violations = page.axe_violations()
    assert violations == [], json.dumps(violations, indent=1)


def test_a_browser_cancels_with_no_token(scene: Scene, page: Browser, tmp_path: Path) -> None:
    """`rgt ui --no-token` checks Host and Origin; a plain browser on this machine passes.
    Last in this module: it adds a job to the scene (the pagination test counts them)."""
    proj = tmp_path / "proj"
    proj.mkdir()
    (victim,) = launch(scene.home, proj, {"victim2.py": VICTIM})
    ui = start_ui(scene.home, tmp_path / "ui.log", "--no-token", "--interval", "0.5")
    try:
        wait_http(ui.base)
        page.get(f"{ui.base}/jobs/{victim}")
        state = '#job [data-testid="job-state"]'
        page.wait(lambda: (page.text(state) or "").startswith("running"), message="running")
        page.js("document.querySelector('[data-testid=\"cancel-button\"]').click();")
        page.wait(lambda: page.driver.switch_to.alert, message="a confirm dialog").accept()
        page.wait(
            lambda: (page.text(state) or "").startswith("cancelled"),
            timeout=40,
            message="the job cancelled",
        )
    finally:
        stop_ui(ui.proc)
        (scene.outputs(victim) / "go").write_text("")
