"""`rgt audit`'s GPU findings on readings built from recorded real nvidia-smi reports
(tests/golden/nvidia-smi, sources in the .source files)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rgt.agent.probes import gpu, gpu_detail
from rgt.watch.audit import _gpu, finding_json

GOLDEN = Path(__file__).parents[1] / "golden" / "nvidia-smi"


def reading(card: dict[str, Any]) -> dict[str, Any]:
    return {"gpu": {"available": True, "gpus": [card], "processes": []}}


def detail(name: str) -> dict[str, Any]:
    (card,) = gpu_detail.parse_detail((GOLDEN / name).read_text())
    return card


def gpu_findings(card: dict[str, Any]) -> list[dict[str, str]]:
    """The GPU findings as `rgt audit --json` prints them."""
    return [finding_json(f) for f in _gpu(reading(card), "box")]


def checks(card: dict[str, Any]) -> list[tuple[str, str]]:
    return [(f["severity"], f["check"]) for f in gpu_findings(card)]


def test_a_pending_row_remap_is_an_error_that_says_reset() -> None:
    (card,) = gpu.parse_gpus((GOLDEN / "h100-load.csv").read_text())["gpus"]
    assert ("bug", "ecc") not in checks(card)  # the healthy H100 under load
    gpu_detail.merge(card, detail("a100-row-remap-pending.q.txt"))
    (finding,) = [f for f in gpu_findings(card) if f["check"] == "ecc"]
    assert "remapping pending" in finding["finding"]
    assert "reset" in finding["fix"]


def test_a_power_cap_slowdown_matters_only_under_load() -> None:
    report = detail("rtx2080-sw-power-cap.q.txt")  # recorded at P8, the card idle
    card = {"index": 0, "slowdowns": report["slowdowns"], "util_pct": 0}
    assert report["slowdowns"] == ["sw_power_cap"] and checks(card) == []
    assert checks({**card, "util_pct": 97}) == [("warning", "throttle")]


def test_uncorrected_sram_errors_say_rent_another_machine() -> None:
    report = detail("sram-uncorrectable.q.txt")
    card = {"index": 0, "ecc_uncorrected": report["ecc_uncorrected"], "slowdowns": []}
    (finding,) = gpu_findings(card)
    assert finding["check"] == "ecc" and "1 uncorrected" in finding["finding"]
    assert "rent another machine" in finding["fix"]
