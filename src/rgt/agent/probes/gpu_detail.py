"""The ``nvidia-smi -q`` text report, per GPU: active clock event (throttle) reasons, ECC error
counts, retired pages and remapped rows.

Why a second parser: the CSV query (``gpu.py``) prints ``[N/A]`` where a card or driver lacks
a field (every GeForce for ECC), and it has no field at all for a pending row remap, the way
A100/H100 memory retires a bad row: the spare row only takes effect after a GPU reset, so until
then the card keeps failing on the same address. The text report carries the same facts as
indented ``key : value`` lines under section names that drivers renamed ("Clocks Throttle
Reasons" before 535, "Clocks Event Reasons" since; "Single Bit"/"Double Bit" ECC totals before
Ampere, "SRAM"/"DRAM" Correctable/Uncorrectable since).

When it runs: ``gpu.read()`` calls :func:`enrich` after the CSV query. ``enrich`` runs
``nvidia-smi -q -d PERFORMANCE,ECC,PAGE_RETIREMENT,ROW_REMAPPER`` only when some GPU's CSV row
left its throttle mask unreadable or its uncorrected ECC count unknown, or reported a slowdown
or uncorrected ECC errors: a healthy datacenter card costs one nvidia-smi call per reading, a
GeForce (no ECC) or a suspicious card two. The two outputs list GPUs in the same PCI bus order,
so GPUs are matched by position; a count mismatch is reported, not guessed around.

Stdlib only, Python 3.8 syntax: this module ships in the agent zipapp.
"""

from __future__ import annotations

import re
from typing import Any

from rgt.agent.probes import gpu

DETAIL_ARGS = ["-q", "-d", "PERFORMANCE,ECC,PAGE_RETIREMENT,ROW_REMAPPER"]
REASON_SECTIONS = ("Clocks Event Reasons", "Clocks Throttle Reasons")
# The report's labels for the nvml.h reason bits named in gpu.THROTTLE_BITS.
REASON_LABELS = {
    "Idle": "gpu_idle",
    "Applications Clocks Setting": "applications_clocks_setting",
    "SW Power Cap": "sw_power_cap",
    "HW Slowdown": "hw_slowdown",
    "Sync Boost": "sync_boost",
    "SW Thermal Slowdown": "sw_thermal_slowdown",
    "HW Thermal Slowdown": "hw_thermal_slowdown",
    "HW Power Brake Slowdown": "hw_power_brake_slowdown",
    "Display Clock Setting": "display_clock_setting",
}
KNOWN_SECTIONS = (*REASON_SECTIONS, "ECC Errors", "Retired Pages", "Remapped Rows")
# "Key   : value"; a key holds no colon, so "GPU 00000000:10:1C.0" stays a section header.
KEY_VALUE = re.compile(r"^(?P<key>[^:]*?)\s*:(?:\s+(?P<value>.*))?$")
HEX = "[0-9A-Fa-f]"
GPU_HEADER = re.compile(rf"^GPU (?P<bus>{HEX}{{4,8}}:{HEX}{{2}}:{HEX}{{2}}\.{HEX})$")


def read_detail() -> dict[str, Any]:
    """Run the detail query; ``available`` False with ``error`` when nvidia-smi cannot answer."""
    code, text = gpu._run(DETAIL_ARGS)
    problem = gpu._problem(text, code)
    cards = [] if problem else parse_detail(text)
    if not problem and not cards:
        problem = "nvidia-smi -q printed no GPU section"
    return {"available": not problem, "error": problem, "gpus": cards}


def parse_detail(text: str) -> list[dict[str, Any]]:
    """One entry per ``GPU <bus id>`` section; text with the sections but no GPU line (an
    excerpt of one GPU) is one entry with ``bus_id`` None; text with neither is []."""
    root = _tree(text)
    found = [(GPU_HEADER.match(key), node) for key, node in root.items() if isinstance(node, dict)]
    cards = [_card(match.group("bus"), node) for match, node in found if match]
    if not cards and any(name in root for name in KNOWN_SECTIONS):
        cards = [_card(None, root)]
    return cards


def _tree(text: str) -> dict[str, Any]:
    """Indented ``key : value`` lines as nested dicts; a line without a value opens a section
    holding the more-indented lines below it. A repeated key keeps its first value."""
    root: dict[str, Any] = {}
    stack: list[tuple[int, dict[str, Any]]] = [(-1, root)]
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        indent = len(raw) - len(raw.lstrip())
        while stack[-1][0] >= indent:
            stack.pop()
        parent = stack[-1][1]
        match = KEY_VALUE.match(line)
        if match:
            parent.setdefault(match.group("key"), (match.group("value") or "").strip())
            continue
        section = parent.setdefault(line, {})
        stack.append((indent, section if isinstance(section, dict) else {}))
    return root


def _card(bus_id: str | None, node: dict[str, Any]) -> dict[str, Any]:
    reasons = _reasons(node)
    slowdowns = None if reasons is None else [r for r in reasons if r not in gpu.NOT_SLOWDOWNS]
    volatile, aggregate = _ecc(node, "Volatile"), _ecc(node, "Aggregate")
    return {
        "bus_id": bus_id,
        "name": node.get("Product Name"),
        "pstate": node.get("Performance State"),
        "sm_clock_mhz": gpu._num(_field(node, "Clocks", "SM")),
        "sm_clock_max_mhz": gpu._num(_field(node, "Max Clocks", "SM")),
        "throttle_reasons": reasons,
        "slowdowns": slowdowns,
        "ecc_corrected": volatile[0],
        "ecc_uncorrected": volatile[1],
        "ecc_corrected_aggregate": aggregate[0],
        "ecc_uncorrected_aggregate": aggregate[1],
        "retired_pages": _retired_pages(node),
        "remapped_rows": _remapped_rows(node),
    }


def _field(node: dict[str, Any], *path: str) -> Any:
    value: Any = node
    for key in path:
        value = value.get(key) if isinstance(value, dict) else None
    return value


def _reasons(node: dict[str, Any]) -> list[str] | None:
    """Active reasons in nvml bit order, named as ``gpu.decode_reasons`` names them; None when
    the report has no reasons section."""
    section = next((node[s] for s in REASON_SECTIONS if isinstance(node.get(s), dict)), None)
    if section is None:
        return None
    active = {REASON_LABELS[k] for k, v in section.items() if k in REASON_LABELS and v == "Active"}
    return [name for _, name in gpu.THROTTLE_BITS if name in active]


def _ecc(node: dict[str, Any], scope: str) -> tuple[int | None, int | None]:
    """(corrected, uncorrected) in the Volatile (since driver load) or Aggregate (lifetime)
    counters; None where the card reports N/A."""
    block = _field(node, "ECC Errors", scope)
    if not isinstance(block, dict):
        return None, None
    if "Single Bit" in block or "Double Bit" in block:  # before Ampere: one Total per kind
        return gpu._int(_field(block, "Single Bit", "Total")), gpu._int(
            _field(block, "Double Bit", "Total")
        )
    corrected = [v for k, v in block.items() if k.endswith(" Correctable")]
    uncorrected = [v for k, v in block.items() if " Uncorrectable" in k]
    return _sum(corrected), _sum(uncorrected)


def _sum(values: list[Any]) -> int | None:
    counts = [gpu._int(v) for v in values if isinstance(v, str)]
    known = [c for c in counts if c is not None]
    return sum(known) if known else None


def _retired_pages(node: dict[str, Any]) -> dict[str, Any]:
    section = node.get("Retired Pages")
    section = section if isinstance(section, dict) else {}
    return {
        "single_bit": gpu._int(section.get("Single Bit ECC")),
        "double_bit": gpu._int(section.get("Double Bit ECC")),
        "pending": _yes(section.get("Pending Page Blacklist")),
    }


def _remapped_rows(node: dict[str, Any]) -> dict[str, Any]:
    """Row remapping (A100 and later). ``pending`` True: a remap waits for a GPU reset;
    ``failure`` True: no spare row was left, the card is for RMA."""
    section = node.get("Remapped Rows")
    section = section if isinstance(section, dict) else {}
    return {
        "correctable": gpu._int(section.get("Correctable Error")),
        "uncorrectable": gpu._int(section.get("Uncorrectable Error")),
        "pending": _yes(section.get("Pending")),
        "failure": _yes(section.get("Remapping Failure Occurred")),
    }


def _yes(value: Any) -> bool | None:
    return {"Yes": True, "No": False}.get(value) if isinstance(value, str) else None


def enrich(result: dict[str, Any]) -> None:
    """Add the detail to a CSV reading (``gpu.read``) whose GPUs need it, in place: each card
    gets ``detail``; an ECC count or throttle mask the CSV could not give is filled from it."""
    result["detail_error"] = None
    cards = result["gpus"]
    if not any(_wants_detail(card) for card in cards):
        return
    detail = read_detail()
    if detail["error"] is None and len(detail["gpus"]) != len(cards):
        detail["error"] = "nvidia-smi -q listed %d GPU(s), the CSV query %d" % (
            len(detail["gpus"]),
            len(cards),
        )
    result["detail_error"] = detail["error"]
    if detail["error"] is None:
        for card, extra in zip(cards, detail["gpus"]):
            merge(card, extra)


def _wants_detail(card: dict[str, Any]) -> bool:
    # An ECC count of None is a card without ECC (every GeForce): the report says N/A too, so
    # asking would double the cost of every patrol reading on the cards most rentals have.
    mask_unknown = _mask(card.get("throttle_mask")) is None
    ecc = card.get("ecc_uncorrected")
    return mask_unknown or (ecc is not None and ecc > 0) or bool(card.get("slowdowns"))


def _mask(value: Any) -> int | None:
    try:
        return int(str(value).strip(), 16)
    except ValueError:
        return None


def merge(card: dict[str, Any], extra: dict[str, Any]) -> None:
    """Attach one GPU's detail to its CSV card; the CSV value wins where it had one."""
    card["detail"] = extra
    if card.get("ecc_uncorrected") is None:
        card["ecc_uncorrected"] = extra["ecc_uncorrected"]
    if _mask(card.get("throttle_mask")) is None and extra["throttle_reasons"] is not None:
        card["throttle_reasons"] = extra["throttle_reasons"]
        card["slowdowns"] = extra["slowdowns"]


# The default `nvidia-smi` table: the one output every driver prints, and the one users paste.
# Each GPU is a block of rows; the first names the index, the model (cut to "NVIDIA A100-SXM..."
# by drivers before 535) and the PCI bus id, the second its memory and utilisation.
TABLE_GPU = re.compile(
    r"^\|\s+(?P<index>\d+)\s+(?P<name>\S.*?)\s+(?:On|Off)\s*\|\s*"
    rf"(?P<bus>{HEX}{{4,8}}:{HEX}{{2}}:{HEX}{{2}}\.{HEX})"
)
TABLE_USE = re.compile(r"\|\s*(?P<used>\d+)MiB\s*/\s*(?P<total>\d+)MiB\s*\|\s*(?P<util>\d+)%")


def parse_table(text: str) -> list[dict[str, Any]]:
    """The GPUs of the default table: index, name (``name_truncated`` when the driver cut
    it), bus id, memory and utilisation; every other field None."""
    cards: list[dict[str, Any]] = []
    for line in text.splitlines():
        head = TABLE_GPU.match(line.strip())
        if head:
            name = head.group("name")
            cards.append(_table_card(int(head.group("index")), name, head.group("bus")))
            continue
        use = TABLE_USE.search(line)
        if use and cards and cards[-1]["mem_total_mib"] is None:
            cards[-1].update(
                mem_used_mib=float(use.group("used")),
                mem_total_mib=float(use.group("total")),
                util_pct=float(use.group("util")),
            )
    return cards


def _table_card(index: int, name: str, bus: str) -> dict[str, Any]:
    card = gpu._gpu({})  # every CSV field, None
    truncated = name.endswith("...")
    card.update(index=index, name=name.rstrip("."), bus_id=bus, name_truncated=truncated)
    return card


def read_table() -> dict[str, Any]:
    """The plain ``nvidia-smi`` table as a reading (``source`` "table"): for a driver whose CSV
    query fails on every field spelling, so the audit still counts and names the GPUs."""
    code, text = gpu._run([])
    problem = gpu._problem(text, code)
    cards = [] if problem else parse_table(text)
    if not problem and not cards:
        problem = "nvidia-smi printed no GPU row"
    return {"available": not problem, "error": problem, "gpus": cards, "processes": []}
