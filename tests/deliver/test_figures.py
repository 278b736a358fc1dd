"""The figure chain on real demo runs: source data, provenance, and checks of the saved pixels."""

from __future__ import annotations

import csv
import json

import pytest

from rgt.deliver.figures import build_figure
from rgt.deliver.pixels import check_image
from rgt.deliver.runs import stored_run_ids
from rgt.deliver.workspace import Workspace
from rgt.errors import VerifyError
from tests.deliver.deliver_helpers import add_loss_figure

pytestmark = pytest.mark.slow  # each test renders real figures (matplotlib)


def test_loss_figure_with_provenance_and_stable_rebuild(demo_ws: Workspace) -> None:
    folder = add_loss_figure(demo_ws)
    first = build_figure(demo_ws, "loss")
    rows = list(csv.DictReader((folder / "source_data.csv").open()))
    assert len(rows) == 60 and {r["run_id"] for r in rows} == set(stored_run_ids(demo_ws))
    assert first.pixels.series_seen == 3 and (first.pixels.width, first.pixels.height) == (640, 480)
    prov = json.loads(first.provenance.read_text())
    assert [i["run_id"] for i in prov["inputs"]] == stored_run_ids(demo_ws)
    assert prov["command"] == ["python", "plot.py", "source_data.csv", "loss.png"]
    assert {"matplotlib", "python", "numpy"} <= set(prov["versions"])
    source_before = (folder / "source_data.csv").read_bytes()
    second = build_figure(demo_ws, "loss")
    assert second.digest == first.digest
    assert (folder / "source_data.csv").read_bytes() == source_before


def test_figure_missing_a_series_fails(demo_ws: Workspace) -> None:
    add_loss_figure(demo_ws, limit=2)  # the script forgets one of the three runs
    with pytest.raises(VerifyError, match="2 coloured series visible, the data has 3"):
        build_figure(demo_ws, "loss")


def test_wrong_size_fails(demo_ws: Workspace) -> None:
    add_loss_figure(demo_ws, size="[800, 600]")
    with pytest.raises(VerifyError, match="expected 800x600"):
        build_figure(demo_ws, "loss")


def test_blank_figure_fails(demo_ws: Workspace) -> None:
    folder = add_loss_figure(demo_ws)
    (folder / "plot.py").write_text(
        "import sys\nimport matplotlib.pyplot as plt\n"
        "fig = plt.figure(figsize=(6.4, 4.8), dpi=100)\nfig.savefig(sys.argv[2])\n"
    )
    with pytest.raises(VerifyError, match="blank"):
        build_figure(demo_ws, "loss")
    assert not (folder / "loss.provenance.json").exists()


def test_script_error_and_unreadable_image(demo_ws: Workspace) -> None:
    folder = add_loss_figure(demo_ws)
    (folder / "plot.py").write_text("raise SystemExit('no data for you')\n")
    with pytest.raises(VerifyError, match="no data for you"):
        build_figure(demo_ws, "loss")
    (folder / "bad.png").write_bytes(b"\x89PNG\r\n\x1a\n not really")
    assert "unreadable" in check_image(folder / "bad.png").problems[0]
