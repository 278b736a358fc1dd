"""`/api/curves` (several jobs' series of one metric, smoothed like TensorBoard) and
`/api/results` (verdicts and delivery claims with their reconcile status), through a real
uvicorn: real local jobs for the curves, a delivery workspace built with rgt.deliver's own
calls for the results."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from rgt.deliver.workspace import Workspace
from tests.deliver.conftest import paper_ws  # noqa: F401  (the fixture)
from tests.ui.conftest import UiServer

CURVE = """
import json, os, pathlib
out = pathlib.Path(os.environ["RGT_OUTPUT_DIR"])
with open(out / "metrics.jsonl", "a") as f:
    for step in range(1, 5):
        f.write(json.dumps({{"step": step, "loss": {scale} / step, "acc": step / 10}}) + "\\n")
"""


def _metrics(ui: UiServer, job_id: str) -> Any:
    doc = ui.json(f"/api/jobs/{job_id}/metrics")
    return doc if doc["series"].get("loss", {}).get("x") else None


@pytest.mark.slow  # two real jobs, ~2 s on two cores
def test_curves_of_two_jobs_raw_and_smoothed(
    ui_server: Callable[..., UiServer], start_job: Callable[..., str]
) -> None:
    ui = ui_server()
    one, two = start_job(CURVE.format(scale=1.0), "one"), start_job(CURVE.format(scale=2.0), "two")
    for job_id in (one, two):
        ui.wait(lambda j=job_id: _metrics(ui, j), what=f"the metrics of {job_id}")

    raw = ui.json(f"/api/curves?jobs={one},{two}&metric=loss")
    assert raw["metric"] == "loss" and raw["smooth"] == 0
    assert [r["job"] for r in raw["runs"]] == [one, two]
    assert raw["runs"][0]["x"] == [1, 2, 3, 4]
    assert raw["runs"][1]["y"] == pytest.approx([2.0, 1.0, 2 / 3, 0.5])

    smoothed = ui.json(f"/api/curves?jobs={one}&metric=loss&smooth=0.5")["runs"][0]["y"]
    ema, expected = 0.0, []  # TensorBoard's EMA, debiased: the first point is the value
    for count, value in enumerate([1.0, 0.5, 1 / 3, 0.25], start=1):
        ema = ema * 0.5 + 0.5 * value
        expected.append(ema / (1 - 0.5**count))
    assert smoothed == pytest.approx(expected) and smoothed[0] == pytest.approx(1.0)

    other = ui.json(f"/api/curves?jobs={one}&metric=acc")["runs"][0]
    assert other["y"] == pytest.approx([0.1, 0.2, 0.3, 0.4])
    absent = ui.json(f"/api/curves?jobs={one},nosuch-job&metric=perplexity")["runs"]
    assert [(r["job"], r["x"], r["y"]) for r in absent] == [
        (one, [], []),
        ("nosuch-job", [], []),
    ]
    assert ui.json("/api/curves")["runs"] == []

    bad = ui.get(f"/api/curves?jobs={one}&smooth=lots")
    assert bad.status_code == 400
    assert "smooth must be a number" in bad.json()["error"] and bad.json()["fix"]


REPORT = """# Results

We reach 87.34 % test accuracy.
The final test loss is 0.418 after 40 epochs.
"""


def test_results_list_verdicts_claims_and_drifts(
    ui_server: Callable[..., UiServer],
    paper_ws: Workspace,  # noqa: F811
) -> None:
    root = paper_ws.root
    (root / "REPORT.md").write_text(REPORT)
    (root / "findings").mkdir(exist_ok=True)
    verdict = {"verdict": "no evidence of a difference", "metric": "test_accuracy", "p": 0.41}
    (root / "findings" / "ours_vs_base.json").write_text(json.dumps(verdict))
    (root / "findings" / "notes.json").write_text('{"not": "a verdict"}')
    (root / "findings" / "broken.json").write_text("{ cut")

    ui = ui_server(results=(root,))
    doc = ui.json("/api/results")
    (comparison,) = doc["comparisons"]
    assert comparison["name"] == f"{root.parent.name}/ours_vs_base"
    assert comparison["verdict"] == "no evidence of a difference" and comparison["p"] == 0.41
    (delivery,) = [d for d in doc["deliveries"] if d["path"] == str(root.resolve())]
    claims = {c["id"]: c for c in delivery["claims"]}
    assert claims["acc"]["status"] == "ok" and claims["acc"]["printed"] == "87.34%"
    assert claims["acc"]["value"] == pytest.approx(0.8734)
    assert claims["acc"]["evidence"]["runs"] and claims["acc"]["metric"] == "test_accuracy"
    assert claims["loss"]["status"] == "drift"
    assert [d["found"] for d in delivery["drifts"]] == ["0.418"]
    assert delivery["report"]["name"] == "REPORT.md" and "87.34 %" in delivery["report"]["text"]
    page = ui.get("/results")  # a saved verdict with only some fields still renders
    assert page.status_code == 200, page.text[-2000:]
    assert "ours_vs_base" in page.text and "0.418" in page.text and "(CI" not in page.text
