"""`rgt ui`: a 100,000-point curve drawn in headless Chromium, timed in the browser.

    .venv/bin/python bench/bench_ui_render.py [--points 100000] [--repeats 5]

A real local machine runs a job that writes ``--points`` metric lines; a real `rgt ui` serves
it; Debian's chromium (via Selenium, driver /usr/bin/chromedriver) opens the job page. The page's
own script times each draw with performance.now() from ``new uPlot(...)`` to uPlot's draw hook
and writes it to the curve's ``data-rendered-ms``; the first is the page's own draw, the rest are
redraws forced from the page. Beside it: the time to fetch and parse the same JSON in the
browser (``fetch`` + ``json()``), and from Python (httpx). Goal: render <= 1 s.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))
# The `rgt` child processes import this checkout too.
os.environ["PYTHONPATH"] = os.pathsep.join(
    p for p in (str(ROOT / "src"), os.environ.get("PYTHONPATH", "")) if p
)

from tests.ui.browser.chrome import Browser, missing  # noqa: E402
from tests.ui.browser.conftest import clean_env, start_ui, stop_ui, wait_http  # noqa: E402

JOB = """
import json, math, os
out = os.environ["RGT_OUTPUT_DIR"]
with open(os.path.join(out, "metrics.jsonl"), "w") as m:
    for step in range(1, {points} + 1):
        m.write(json.dumps({{"step": step, "loss": 2.0 / math.sqrt(step) + 0.01}}) + "\\n")
"""

FETCH_JS = """
const done = arguments[arguments.length - 1];
const t0 = performance.now();
fetch(arguments[0]).then(r => r.json()).then(d => {
  const ms = performance.now() - t0;
  done([ms, Object.values(d.series)[0].x.length]);
}, e => done([-1, String(e)]));
"""
REDRAW_JS = """
const c = document.querySelector('[data-testid=curve]');
c.removeAttribute('data-rendered-ms');
document.getElementById('curve-log-1').click();
"""


def run(cmd: list[str], home: Path, cwd: Path | None = None) -> dict[str, object]:
    cut = cmd.index("--") if "--" in cmd else len(cmd)  # --json goes before the job's command
    argv = [sys.executable, "-m", "rgt.cli", *cmd[:cut], "--json", *cmd[cut:]]
    proc = subprocess.run(argv, cwd=cwd, env=clean_env(home), capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"rgt {' '.join(cmd)} failed: {proc.stderr[-2000:]}")
    doc: dict[str, object] = json.loads(proc.stdout)
    return doc


def launch(home: Path, work: Path, points: int) -> str:
    run(["up", "local", "--name", "box", "--root", str(work / "box")], home)
    (work / "job.py").write_text(JOB.format(points=points))
    job = run(["run", "box", "--probe-seconds", "0", "--", sys.executable, "job.py"], home, work)
    job_id = str(job["job_id"])
    run(["watch", job_id, "--interval", "0.5"], home)
    return job_id


def wait_attr(browser: Browser, selector: str, name: str, timeout: float = 120) -> str:
    value = browser.wait(lambda: browser.attr(selector, name), timeout=timeout, message=name)
    return str(value)


def measure(args: argparse.Namespace, work: Path) -> None:
    home = work / "home"
    home.mkdir()
    job_id = launch(home, work, args.points)
    ui = start_ui(home, work / "ui.log", "--interval", "0.5")
    browser = Browser()
    try:
        wait_http(ui.base)
        browser.get(ui.url)
        browser.get(f"{ui.base}/jobs/{job_id}")
        curve = '[data-testid="curve"]'
        browser.wait(lambda: browser.attr(curve, "data-points") == str(args.points), timeout=180,
                     message=f"{args.points} points drawn")  # fmt: skip
        renders = [float(wait_attr(browser, curve, "data-rendered-ms"))]
        for _ in range(args.repeats - 1):
            browser.js(REDRAW_JS)
            renders.append(float(wait_attr(browser, curve, "data-rendered-ms")))
        path = f"/api/jobs/{job_id}/metrics"
        fetches = [browser.driver.execute_async_script(FETCH_JS, path)[0] for _ in range(3)]
        token = ui.url.split("token=", 1)[1]
        py = []
        for _ in range(3):
            t0 = time.perf_counter()
            httpx.get(ui.base + path, headers={"X-RGT-Token": token}, timeout=60).json()
            py.append((time.perf_counter() - t0) * 1000)
        report(args, renders, fetches, py)
    finally:
        browser.quit()
        stop_ui(ui.proc)


def report(
    args: argparse.Namespace, renders: list[float], fetches: list[float], py: list[float]
) -> None:
    render, fetch = statistics.median(renders), statistics.median(fetches)
    print(f"curve of {args.points:,} points, headless Chromium, uPlot 1.6.32")
    print(f"  render (first draw, in page)   {renders[0]:8.1f} ms")
    print(f"  render (median of {len(renders)})        {render:8.1f} ms   goal <= 1000 ms")
    print(f"  fetch + parse JSON in browser  {fetch:8.1f} ms   (median of {len(fetches)})")
    print(f"  fetch + parse JSON, httpx      {statistics.median(py):8.1f} ms")
    print(f"  render / browser fetch         {render / fetch:8.2f}x")
    print("  verdict: " + ("meets" if render <= 1000 else "MISSES") + " the 1 s goal")
    print(f"  machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--points", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    why = missing()
    if why:
        raise SystemExit(f"bench_ui_render: {why}")
    with tempfile.TemporaryDirectory(prefix="rgt-bench-ui-") as tmp:
        measure(args, Path(tmp))


if __name__ == "__main__":
    main()
