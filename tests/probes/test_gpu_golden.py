"""nvidia-smi parsing against recorded real outputs (tests/golden/nvidia-smi, sources cited in
the .source files), directly and through a real subprocess that replays them."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import pytest

from rgt.agent.probes import gpu, gpu_detail

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
    # what `--query-gpu=clocks_throttle_reasons.active` prints. No recorded real CSV with an
    # active slowdown was found (the real ones are `nvidia-smi -q` text, tested below), so
    # this checks the decoding against the documented bits.
    from rgt.agent.probes.gpu import decode_reasons

    assert decode_reasons("0x0000000000000048") == ["hw_slowdown", "hw_thermal_slowdown"]
    assert decode_reasons("0x0000000000000005") == ["gpu_idle", "sw_power_cap"]
    assert decode_reasons("[N/A]") == [] and decode_reasons(None) == []


def test_geforce_under_load_has_no_ecc_reading() -> None:
    (card,) = gpu.parse_gpus((GOLDEN / "rtx4080s-load.csv").read_text())["gpus"]
    assert (card["name"], card["util_pct"], card["sm_clock_mhz"]) == (
        "NVIDIA GeForce RTX 4080 SUPER",
        7,
        2805,
    )
    assert card["ecc_uncorrected"] is None and card["throttle_mask"] == "0x0000000000000000"
    assert card["throttle_reasons"] == [] == card["slowdowns"]


def _detail(name: str) -> dict[str, object]:
    (card,) = gpu_detail.parse_detail((GOLDEN / name).read_text())
    return card


def test_detail_sw_power_cap_is_a_slowdown() -> None:
    card = _detail("rtx2080-sw-power-cap.q.txt")
    assert (card["bus_id"], card["name"], card["pstate"]) == (
        "00000000:02:00.0",
        "NVIDIA GeForce RTX 2080",
        "P8",
    )
    assert card["throttle_reasons"] == ["sw_power_cap"] == card["slowdowns"]
    assert (card["sm_clock_mhz"], card["sm_clock_max_mhz"]) == (300, 2130)
    assert card["ecc_uncorrected"] is None and card["remapped_rows"]["pending"] is None


def test_detail_hw_power_brake_on_pre_535_driver() -> None:
    # "Clocks Throttle Reasons" (old spelling), an author's excerpt with no GPU line
    card = _detail("v100-hw-power-brake.q.txt")
    assert card["bus_id"] is None and card["sm_clock_mhz"] == 382
    assert card["slowdowns"] == ["hw_slowdown", "hw_power_brake_slowdown"]
    assert card["throttle_reasons"] == gpu.decode_reasons(hex(0x8 | 0x80))


def test_detail_row_remap_pending_after_correctable_errors() -> None:
    card = _detail("a100-row-remap-pending.q.txt")
    assert (card["bus_id"], card["name"]) == ("00000000:10:1C.0", "NVIDIA A100-SXM4-80GB")
    assert (card["ecc_corrected"], card["ecc_uncorrected"]) == (177, 0)
    assert (card["ecc_corrected_aggregate"], card["ecc_uncorrected_aggregate"]) == (177, 0)
    assert card["remapped_rows"] == {
        "correctable": 1,
        "uncorrectable": 0,
        "pending": True,
        "failure": False,
    }
    assert card["retired_pages"] == {"single_bit": None, "double_bit": None, "pending": None}
    assert card["throttle_reasons"] is None and card["slowdowns"] is None  # not in the excerpt


def test_detail_sram_uncorrectable_volatile_and_lifetime() -> None:
    card = _detail("sram-uncorrectable.q.txt")
    assert (card["ecc_corrected"], card["ecc_uncorrected"]) == (0, 1)
    assert (card["ecc_corrected_aggregate"], card["ecc_uncorrected_aggregate"]) == (0, 5)


def test_detail_of_a_healthy_geforce_agrees_with_its_csv() -> None:
    card = _detail("rtx4080s-load.q.txt")
    (csv,) = gpu.parse_gpus((GOLDEN / "rtx4080s-load.csv").read_text())["gpus"]
    assert card["throttle_reasons"] == csv["throttle_reasons"] == []
    assert card["ecc_uncorrected"] is None is csv["ecc_uncorrected"]
    assert card["sm_clock_mhz"] == csv["sm_clock_mhz"] and card["name"] == csv["name"]
    assert set(card["remapped_rows"].values()) == {None}


def test_detail_of_text_without_gpu_sections() -> None:
    assert gpu_detail.parse_detail((GOLDEN / "no-devices.txt").read_text()) == []
    assert gpu_detail.parse_detail("") == []


def _replay_all(tmp_path: Path, answers: dict[str, str], code: int = 0) -> str:
    """A stand-in nvidia-smi: the first key its arguments start with picks the recorded output
    ("" matches anything); every call's arguments are appended to calls.log."""
    script = tmp_path / "nvidia-smi"
    table = {key: str(GOLDEN / name) for key, name in answers.items()}
    script.write_text(
        f"#!{sys.executable}\nimport sys\n"
        f"open({str(tmp_path / 'calls.log')!r}, 'a').write(' '.join(sys.argv[1:]) + '\\n')\n"
        f"args = ' '.join(sys.argv[1:])\n"
        f"path = next(v for k, v in {table!r}.items() if args.startswith(k))\n"
        f"sys.stdout.write(open(path).read())\nsys.exit({code})\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return str(script)


def _calls(tmp_path: Path) -> list[str]:
    return (tmp_path / "calls.log").read_text().splitlines()


def test_read_skips_detail_for_a_healthy_geforce_without_ecc(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # ECC [N/A] is a card without ECC; the report would say N/A too, so no second call
    answers = {"-q": "rtx4080s-load.q.txt", "--query-compute-apps": "h100-idle-apps.csv"}
    answers[""] = "rtx4080s-load.csv"
    monkeypatch.setenv("RGT_NVIDIA_SMI", _replay_all(tmp_path, answers))
    result = gpu.read()
    assert not any(call.startswith("-q") for call in _calls(tmp_path))
    (card,) = result["gpus"]
    assert result["detail_error"] is None and "detail" not in card
    assert card["ecc_uncorrected"] is None and card["slowdowns"] == []


def test_read_skips_detail_for_a_healthy_datacenter_card(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    answers = {"-q": "a100-row-remap-pending.q.txt", "--query-compute-apps": "h100-load-apps.csv"}
    answers[""] = "h100-load.csv"
    monkeypatch.setenv("RGT_NVIDIA_SMI", _replay_all(tmp_path, answers))
    result = gpu.read()
    assert not any(call.startswith("-q") for call in _calls(tmp_path))
    assert "detail" not in result["gpus"][0] and result["detail_error"] is None


def test_read_reports_a_gpu_count_mismatch_instead_of_guessing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # two recordings from different machines: the CSV lists 2 GPUs (no ECC, no mask), -q one
    answers = {"-q": "rtx2080-sw-power-cap.q.txt", "--query-compute-apps": "h100-idle-apps.csv"}
    answers[""] = "two-gpus-one-idle.csv"
    monkeypatch.setenv("RGT_NVIDIA_SMI", _replay_all(tmp_path, answers))
    result = gpu.read()
    assert result["detail_error"] == "nvidia-smi -q listed 1 GPU(s), the CSV query 2"
    assert all("detail" not in card for card in result["gpus"])


def test_read_detail_through_the_binary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RGT_NVIDIA_SMI", _replay_all(tmp_path, {"": "rtx2080-sw-power-cap.q.txt"}))
    detail = gpu_detail.read_detail()
    assert detail["available"] and detail["gpus"][0]["slowdowns"] == ["sw_power_cap"]
    monkeypatch.setenv("RGT_NVIDIA_SMI", _replay_all(tmp_path, {"": "no-devices.txt"}, 6))
    assert gpu_detail.read_detail() == {
        "available": False,
        "error": "No devices were found",
        "gpus": [],
    }


def test_merge_fills_only_what_the_csv_lacked() -> None:
    # The merge rule on real parses of two machines: the GeForce CSV has no ECC count, the A100
    # report has one; the GeForce's readable mask (0x0) is kept over the report's absence.
    (card,) = gpu.parse_gpus((GOLDEN / "rtx4080s-load.csv").read_text())["gpus"]
    gpu_detail.merge(card, _detail("a100-row-remap-pending.q.txt"))
    assert card["ecc_uncorrected"] == 0 and card["throttle_reasons"] == []
    assert card["detail"]["remapped_rows"]["pending"] is True
    (unknown,) = gpu.parse_gpus((GOLDEN / "two-gpus-one-idle.csv").read_text())["gpus"][1:]
    gpu_detail.merge(unknown, _detail("v100-hw-power-brake.q.txt"))
    assert unknown["slowdowns"] == ["hw_slowdown", "hw_power_brake_slowdown"]
