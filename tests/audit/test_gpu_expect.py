"""`--expect-gpu` against recorded real `nvidia-smi` outputs (tests/golden/nvidia-smi, sources
in the .source files): fewer or other GPUs than expected is an error naming both."""

from __future__ import annotations

import json
import stat
import sys
from pathlib import Path
from typing import Any

import pytest

from rgt.agent.probes import gpu, gpu_detail
from rgt.watch.audit import finding_json
from rgt.watch.gpu_expect import GpuExpectation, findings, matches
from tests.clirun import rgt

GOLDEN = Path(__file__).parents[1] / "golden" / "nvidia-smi"


def table(name: str) -> dict[str, Any]:
    cards = gpu_detail.parse_table((GOLDEN / name).read_text())
    return {"gpu": {"available": True, "gpus": cards, "processes": []}}


def check(name: str, expected: str) -> list[dict[str, str]]:
    return found(table(name), GpuExpectation.parse(expected, "offer"))


def found(reading: dict[str, Any], expected: GpuExpectation) -> list[dict[str, str]]:
    """The findings as `rgt audit --json` prints them."""
    return [finding_json(f) for f in findings(reading, expected)]


def test_the_recorded_tables_parse_to_every_card() -> None:
    a100 = table("a100x4-sxm4.smi.txt")["gpu"]["gpus"]
    assert [c["index"] for c in a100] == [0, 1, 2, 3]
    assert {c["name"] for c in a100} == {"NVIDIA A100-SXM4-80GB"}
    assert (a100[3]["bus_id"], a100[3]["mem_total_mib"], a100[3]["util_pct"]) == (
        "00000000:D4:00.0", 81920, 0,
    )  # fmt: skip
    assert len(table("rtx4090x8.smi.txt")["gpu"]["gpus"]) == 8
    h100 = table("h100x8-sxm.smi.txt")["gpu"]["gpus"]
    assert h100[0]["name"] == "NVIDIA H100 80GB HBM3" and h100[7]["mem_total_mib"] == 81559


def test_eight_a100_rented_four_delivered_is_an_error_with_both() -> None:
    (finding,) = check("a100x4-sxm4.smi.txt", "A100:8")
    assert finding["severity"] == "bug" and finding["check"] == "gpu expectation"
    assert "expected 8 × A100" in finding["finding"]
    assert "4 × NVIDIA A100-SXM4-80GB" in finding["finding"] and "fewer" in finding["finding"]
    assert "4 of 8 match" in finding["fix"] and "rent another" in finding["fix"]
    assert check("a100x4-sxm4.smi.txt", "A100:4") == []
    assert check("a100x4-sxm4.smi.txt", "a100-80gb:4") != []  # 80GB is not a family name


def test_a_whole_eight_a100_server_meets_its_expectation() -> None:
    """A real `nvidia-smi -a` of an 8 × A100-SXM4-40GB server, read by the detail parser."""
    cards = gpu_detail.parse_detail((GOLDEN / "a100x8-sxm4-40gb.q.txt").read_text())
    reading = {"gpu": {"available": True, "gpus": cards, "processes": []}}
    assert len(cards) == 8 and {c["name"] for c in cards} == {"NVIDIA A100-SXM4-40GB"}
    assert found(reading, GpuExpectation.parse("A100:8")) == []
    (other,) = found(reading, GpuExpectation.parse("H100:8", "the runpod offer"))
    assert other["severity"] == "bug" and "8 × NVIDIA A100-SXM4-40GB" in other["finding"]
    assert "expected 8 × H100 (from the runpod offer)" in other["finding"]


def test_other_gpus_than_expected() -> None:
    (finding,) = check("h100x8-sxm.smi.txt", "A100:8")
    assert finding["severity"] == "bug" and "other GPUs" in finding["finding"]
    assert "8 × NVIDIA H100 80GB HBM3" in finding["finding"] and "0 of 8" in finding["fix"]
    (finding,) = check("a100x4-sxm4.smi.txt", "A10:4")  # an A10 is not an A100
    assert "other GPUs" in finding["finding"]


def test_the_4090_names_and_more_cards_than_expected() -> None:
    assert check("rtx4090x8.smi.txt", "4090:8") == [] == check("rtx4090x8.smi.txt", "RTX4090:8")
    (finding,) = check("rtx4090x8.smi.txt", "4090:2")
    assert finding["severity"] == "warning" and "8 × NVIDIA GeForce RTX 4090" in finding["finding"]
    assert "CUDA_VISIBLE_DEVICES" in finding["fix"]


def test_names_match_by_family() -> None:
    assert matches("A100", "NVIDIA A100-SXM...")  # a pre-535 driver's cut name
    assert matches("A100", "NVIDIA A100 80GB PCIe") and matches("RTXA6000", "NVIDIA RTX A6000")
    assert not matches("A10", "NVIDIA A100-SXM4-80GB") and not matches("H100", "NVIDIA H100X")
    with pytest.raises(Exception, match="bad GPU expectation"):
        GpuExpectation.parse("A100:0")


def _replay(tmp_path: Path, csv: str | None, table_name: str) -> str:
    """A stand-in nvidia-smi printing recorded outputs: the CSV query (or, with ``csv`` None,
    a driver that knows none of the fields asked) and the plain table."""
    script = tmp_path / "nvidia-smi"
    query = (
        f"sys.stdout.write(open({str(GOLDEN / csv)!r}).read())"
        if csv
        else "print('Field \"clocks_event_reasons.active\" is not a valid field to query.'); "
        "sys.exit(2)"
    )
    script.write_text(
        f"#!{sys.executable}\nimport sys\n"
        "if any(a.startswith('--query-gpu') for a in sys.argv):\n"
        f"    {query}\n"
        "elif any(a.startswith('--query-compute-apps') for a in sys.argv):\n"
        "    print('gpu_uuid, pid, process_name, used_gpu_memory [MiB]')\n"
        "else:\n"
        f"    sys.stdout.write(open({str(GOLDEN / table_name)!r}).read())\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return str(script)


def test_a_driver_without_the_csv_fields_is_read_from_its_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RGT_NVIDIA_SMI", _replay(tmp_path, None, "a100x4-sxm4.smi.txt"))
    reading = gpu.read()
    assert reading["available"] and reading["source"] == "table" and len(reading["gpus"]) == 4
    assert "not a valid field" in reading["csv_error"]


@pytest.mark.slow
def test_up_records_the_expectation_and_audit_reports_it(tmp_path: Path) -> None:
    root = tmp_path / "root"
    up = rgt("up", "local", "--name", "box", "--root", str(root), "--expect-gpu", "A100:8",
             "--json")  # fmt: skip
    assert up.returncode == 0, up.stderr
    assert json.loads(up.stdout)["expect_gpu"] == {"gpu": "A100", "count": 8,
                                                   "source": "--expect-gpu"}  # fmt: skip
    smi = _replay(tmp_path, None, "a100x4-sxm4.smi.txt")
    audit = rgt("audit", "box", "--json", env={"RGT_NVIDIA_SMI": smi})
    assert audit.returncode == 1, audit.stderr  # an error finding
    (finding,) = [
        f for f in json.loads(audit.stdout)["findings"] if f["check"] == "gpu expectation"
    ]
    assert "expected 8 × A100 (from --expect-gpu)" in finding["finding"]
    refused = rgt("run", "box", "--probe-seconds", "0", "--", sys.executable, "-c", "print(1)")
    assert refused.returncode == 3 and "gpu expectation" in refused.stderr  # the run gate
    # the recorded single-H100 CSV capture, through the CSV path
    assert rgt("up", "local", "--name", "box", "--root", str(root), "--expect-gpu",
               "H100:1").returncode == 0  # fmt: skip
    smi = _replay(tmp_path, "h100-load.csv", "h100x8-sxm.smi.txt")
    audit = json.loads(rgt("audit", "box", "--json", env={"RGT_NVIDIA_SMI": smi}).stdout)
    assert not [f for f in audit["findings"] if f["check"] == "gpu expectation"]
