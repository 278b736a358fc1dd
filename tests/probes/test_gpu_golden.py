"""nvidia-smi parsing against recorded real outputs (tests/golden/nvidia-smi, sources cited in
the .source files), directly and through a real subprocess that replays them."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import pytest

from rgt.probes import gpu

GOLDEN = Path(__file__).parents[1] / "golden" / "nvidia-smi"


def test_h100_under_load() -> None:
    result = gpu.parse_gpus((GOLDEN / "h100-load.csv").read_text())
    assert result["available"] and result["error"] is None
    (card,) = result["gpus"]
    assert card["name"] == "NVIDIA H100 80GB HBM3" and card["index"] == 0
    assert (card["util_pct"], card["mem_used_mib"], card["mem_total_mib"]) == (100, 19818, 81559)
    assert (card["temp_c"], card["power_w"], card["sm_clock_mhz"]) == (59, 631.95, 1980)
    assert card["ecc_uncorrected"] == 0 and card["throttle_reasons"] == [] == card["slowdowns"]


def test_h100_idle_is_idle_not_throttled() -> None:
    (card,) = gpu.parse_gpus((GOLDEN / "h100-idle.csv").read_text())["gpus"]
    assert card["util_pct"] == 0 and card["mem_used_mib"] == 0 and card["sm_clock_mhz"] == 345
    # bit 0x1 is "GPU idle": the clocks dropped because nothing runs, not a slowdown
    assert card["throttle_reasons"] == ["gpu_idle"] and card["slowdowns"] == []


def test_compute_apps() -> None:
    apps = gpu.parse_apps((GOLDEN / "h100-load-apps.csv").read_text())
    assert [(a["pid"], a["name"], a["used_mib"]) for a in apps] == [
        (11327, "/root/tools/memhog", 2566),
        (11328, "/root/tools/memhog", 1542),
        (11345, "./gpu_burn", 15690),
    ]
    assert gpu.parse_apps((GOLDEN / "h100-idle-apps.csv").read_text()) == []


def test_header_keyed_parse_of_another_field_set() -> None:
    busy, idle = gpu.parse_gpus((GOLDEN / "two-gpus-one-idle.csv").read_text())["gpus"]
    assert (busy["name"], busy["util_pct"], busy["mem_used_mib"]) == (
        "GeForce GTX 1080 Ti",
        36,
        2856,
    )
    assert (idle["name"], idle["util_pct"], idle["power_w"]) == ("GeForce GTX 1060 6GB", 0, 5.68)
    assert busy["index"] is None and busy["ecc_uncorrected"] is None  # not asked: None, no shift


@pytest.mark.parametrize(
    ("name", "code", "needle"),
    [
        ("no-devices.txt", 6, "No devices were found"),
        ("no-driver.txt", 9, "cannot talk to the driver"),
    ],
)
def test_no_gpu_is_a_reading_not_a_crash(name: str, code: int, needle: str) -> None:
    result = gpu.parse_gpus((GOLDEN / name).read_text(), code)
    assert result["available"] is False and needle in result["error"] and result["gpus"] == []


def test_xid_lines_from_dmesg() -> None:
    events = gpu.xid_events((GOLDEN / "xid-fallen-off-bus.dmesg").read_text())
    assert [e["xid"] for e in events] == [79, 79]
    assert all(e["fatal"] for e in events) and events[1]["pci"] == "0000:44:00"
    assert gpu.xid_events("[ 12.0] NVRM: loading NVIDIA UNIX Open Kernel Module 570.158.01") == []


def _replay(tmp_path: Path, gpus: str, apps: str, code: int = 0) -> str:
    """An executable standing in for nvidia-smi that prints recorded real outputs."""
    script = tmp_path / "nvidia-smi"
    script.write_text(
        f"#!{sys.executable}\nimport sys\n"
        f"which = {str(GOLDEN / apps)!r} if any('compute-apps' in a for a in sys.argv) "
        f"else {str(GOLDEN / gpus)!r}\n"
        f"sys.stdout.write(open(which).read())\nsys.exit({code})\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return str(script)


def test_read_runs_the_binary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RGT_NVIDIA_SMI", _replay(tmp_path, "h100-load.csv", "h100-load-apps.csv"))
    result = gpu.read()
    assert result["gpus"][0]["util_pct"] == 100 and len(result["processes"]) == 3


def test_read_without_nvidia_smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RGT_NVIDIA_SMI", str(tmp_path / "absent"))
    result = gpu.read()
    assert result["available"] is False and "not runnable" in result["error"]
    monkeypatch.setenv("RGT_NVIDIA_SMI", _replay(tmp_path, "no-devices.txt", "no-devices.txt", 6))
    assert gpu.read()["error"] == "No devices were found"
    assert os.environ["RGT_NVIDIA_SMI"].endswith("nvidia-smi")


def test_throttle_bitmask_decodes_by_nvml_constants() -> None:
    # The bit values are NVML's nvmlClocksThrottleReason* constants (nvml.h); the mask is
    # what `--query-gpu=clocks_throttle_reasons.active` prints. No recorded real output with an
    # active slowdown was found, so this checks the decoding against the documented bits.
    from rgt.probes.gpu import decode_reasons

    assert decode_reasons("0x0000000000000048") == ["hw_slowdown", "hw_thermal_slowdown"]
    assert decode_reasons("0x0000000000000005") == ["gpu_idle", "sw_power_cap"]
    assert decode_reasons("[N/A]") == [] and decode_reasons(None) == []
