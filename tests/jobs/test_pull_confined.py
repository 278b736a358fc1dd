"""`pull` keeps every manifest name under ``--to``: each hostile name of tests/fetch/names.py
(``..``, absolute, inner ``..``, NUL, backslash, drive, empty part, a link planted in the
destination) is refused with rgt's error or a failed report, and nothing outside changes."""

from __future__ import annotations

from pathlib import Path

import pytest

from rgt.backends.local import LocalBackend
from rgt.errors import VerifyError
from rgt.jobs.pull import pull
from rgt.lifecycle.machines import register_local
from rgt.state.store import Store
from tests.fetch.names import IDS, NAMES, Hostile, make_area, outside, snapshot
from tests.hostile_machine import entry, machine_job

DATA = b"from the machine\n"


@pytest.mark.parametrize("hostile", NAMES, ids=IDS)
def test_a_hostile_manifest_name_lands_nowhere_outside_to(hostile: Hostile, tmp_path: Path) -> None:
    area = make_area(tmp_path, hostile)
    name = hostile.make(area.root)
    store = Store.open()
    machine = register_local(store, "box", tmp_path / "machine").machine
    files = {"ok.txt": DATA}
    if hostile.plant or hostile.id in ("backslash", "drive"):  # a plain file name on Linux
        files[name] = DATA  # so the machine holds it and only the name check can refuse
    listed = [entry("ok.txt", DATA), entry(name, DATA)]
    machine_job(LocalBackend(machine), "j1", files, store=store, listed=listed)
    before = snapshot(area)
    try:
        result = pull(store, "j1", area.dest)
    except VerifyError as refused:  # UnsafeNameError, a VerifyError
        assert refused.fix and "unsafe path" in refused.message
    else:
        assert not result.ok, "the pull took a name rgt must refuse"
    assert outside(before, area) == []
