"""EVIDENCE.json: schema validation naming the field, claim add, globbed runs, aggregates."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import scipy.stats

from rgt.deliver.evidence import Claim, add_claim, claim_value, load_claims
from rgt.deliver.stats import summarize, t_quantile_975
from rgt.deliver.workspace import Workspace
from rgt.errors import SpecError, UsageError


@pytest.mark.parametrize("df", [1, 2, 5, 29, 30, 31, 45, 120, 1000])
def test_t_quantile_matches_scipy(df: int) -> None:
    assert t_quantile_975(df) == pytest.approx(scipy.stats.t.ppf(0.975, df), abs=2e-4)


def test_summary_matches_scipy_interval() -> None:
    values = [0.8712, 0.8734, 0.8756, 0.8801]
    summary = summarize(values)
    low, high = scipy.stats.t.interval(0.95, 3, loc=summary.mean, scale=scipy.stats.sem(values))
    assert (summary.ci_low, summary.ci_high) == pytest.approx((low, high), abs=1e-6)
    assert summarize(values, "max").value == 0.8801 and summarize(values, "median").n == 4
    with pytest.raises(UsageError, match="exactly one run"):
        summarize(values, "value")


def test_claim_over_a_glob_aggregates_recorded_runs(paper_ws: Workspace) -> None:
    acc = claim_value(paper_ws, load_claims(paper_ws)[0])
    assert acc.summary.n == 3 and acc.summary.value == pytest.approx(0.8734)
    assert acc.printed() == "87.34%" and acc.printed(latex=True) == r"87.34\%"


def test_claim_citing_a_missing_metric_is_refused(paper_ws: Workspace) -> None:
    with pytest.raises(UsageError, match="psnr"):
        add_claim(paper_ws, Claim("p", "psnr", "psnr", run_glob="base-*"))
    assert [c.id for c in load_claims(paper_ws)] == ["acc", "loss"]


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda c: c.update(aggregate="average"), "claims.0.aggregate"),
        (lambda c: c.update(format={"digits": -1}), "claims.0.format.digits"),
        (lambda c: c.pop("metric"), "claims.0"),
        (lambda c: c.update(appears_in=["paper.md"]), "claims.0.appears_in.0"),
    ],
)
def test_bad_evidence_names_the_field(paper_ws: Workspace, mutate, field: str) -> None:  # type: ignore[no-untyped-def]
    data = json.loads(paper_ws.evidence.read_text())
    mutate(data["claims"][0])
    paper_ws.evidence.write_text(json.dumps(data))
    with pytest.raises(SpecError) as err:
        load_claims(paper_ws)
    assert err.value.field == field


@pytest.mark.slow
def test_cli_claim_add_and_list(paper_ws: Workspace) -> None:
    base = [sys.executable, "-m", "rgt.cli", "deliver", "claim"]
    add = subprocess.run(
        [*base, "add", "--id", "best", "--text", "best seed", "--metric", "test_accuracy",
         "--glob", "base-*", "--aggregate", "max", "--digits", "3", "--json"],
        cwd=paper_ws.root, capture_output=True, text=True,
    )  # fmt: skip
    assert add.returncode == 0, add.stderr
    assert json.loads(add.stdout)["printed"] == "0.876"
    listed = subprocess.run([*base, "list", "--json"], cwd=paper_ws.root, capture_output=True,
                            text=True)  # fmt: skip
    assert [c["id"] for c in json.loads(listed.stdout)] == ["acc", "loss", "best"]
    dup = subprocess.run(
        [*base, "add", "--id", "best", "--text", "x", "--metric", "test_accuracy", "--glob", "*"],
        cwd=paper_ws.root, capture_output=True, text=True,
    )  # fmt: skip
    assert dup.returncode == 2 and "already exists" in dup.stderr
