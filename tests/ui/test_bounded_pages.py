"""The pages and the JSON API of `rgt ui` over a machine that inflates what it says
(``tests/inflated_machine.py``: megabytes of "IGNORE PREVIOUS INSTRUCTIONS" in the job's
status, events, log and every agent answer): each response stays small, every long string it
shows cut with its marker. The machine's words are clipped where they are read (``rgt.clip``),
so the pages are bounded by construction."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.inflated_machine import EVIL, inflated_machine
from tests.ui.conftest import UiServer

PAGE_MAX = 256 * 1024


@pytest.mark.slow
def test_pages_over_an_inflating_machine_are_bounded(
    ui_server: Callable[..., UiServer], rgt_home: Path, tmp_path: Path
) -> None:
    (tmp_path / "project").mkdir()
    job_id = inflated_machine(rgt_home, tmp_path / "root", tmp_path / "project", mb=2.0)
    ui = ui_server()
    ui.get(f"/jobs/{job_id}")  # asks the patrol for the job's log and events
    ui.wait(lambda: ui.json(f"/api/jobs/{job_id}/log")["lines"], what="the log")
    ui.wait(lambda: len(ui.json(f"/api/jobs/{job_id}")["events"]) > 1, what="the events")
    paths = ["/", f"/jobs/{job_id}", "/machines/box", "/fragments/jobs", "/fragments/machines",
             f"/fragments/job/{job_id}", "/api/overview", "/api/machines", "/api/jobs",
             f"/api/jobs/{job_id}", f"/api/jobs/{job_id}/log"]  # fmt: skip
    answers = {path: ui.get(path) for path in paths}
    sizes = {path: len(answer.content) for path, answer in answers.items()}
    print("\nlargest UI response:", max(sizes.values()), "bytes", sizes)
    for path, answer in answers.items():
        assert answer.status_code == 200, (path, answer.text[:300])
        assert sizes[path] <= PAGE_MAX, sizes
        assert answer.text.count(EVIL) * len(EVIL) <= 64 * 1024, path
    page = ui.get(f"/jobs/{job_id}").text
    assert EVIL in page and "…[clipped" in page  # shown, and shown cut
