"""The hostile machine on the local backend: the job directory holds links out of it (a job
is someone's code, and on a shared box anyone with write access can plant them) and the
manifest names paths through them. The pull must stay inside ``--to`` and must not succeed.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from tests.faults.harness import assert_confined, assert_refused_pull, assert_untouched, snapshot
from tests.faults.world import World

EVIL = b"written by the machine\n"
# (the link's name under outputs/, whether it points at the victim dir or its file, relative?)
LINKS = [
    ("to-dir", "dir", False),
    ("to-dir-rel", "dir", True),
    ("to-file", "file", False),
    ("to-file-rel", "file", True),
    ("through-dir", "through", False),
    ("through-dir-rel", "through", True),
]


@pytest.mark.parametrize(("name", "what", "relative"), LINKS)
def test_links_out_of_the_job_dir(fresh: World, name: str, what: str, relative: bool) -> None:
    area = fresh.trial_dir(f"local-link-{name}")
    victim = area / "victim"
    outputs = fresh.job_dir / "outputs"
    target = victim if what in ("dir", "through") else victim / "precious.txt"
    link_text = os.path.relpath(target, outputs) if relative else str(target)
    (outputs / "link").symlink_to(link_text)
    manifest = json.loads((fresh.job_dir / "manifest.json").read_text())
    path = "outputs/link/precious.txt" if what == "through" else "outputs/link"
    digest = hashlib.sha256(EVIL).hexdigest()
    manifest["files"].append({"path": path, "bytes": len(EVIL), "sha256": digest})
    (fresh.job_dir / "manifest.json").write_text(json.dumps(manifest))
    dest = area / "dest"
    before = snapshot(area)
    out = fresh.cli("pull", fresh.job_id, "--to", str(dest), "--json")
    assert_untouched(before, snapshot(area, skip=[dest]), area)
    assert (victim / "precious.txt").read_bytes() != EVIL
    if dest.exists():
        assert_confined(dest)
    assert_refused_pull(out)


def test_dest_already_holds_a_link_out(fresh: World) -> None:
    """A destination left with a link out of it (an earlier pull, a user): a pull into it
    must not write through the link."""
    area = fresh.trial_dir("local-dest-link")
    dest = area / "dest"
    dest.mkdir()
    first = Path(next(iter(fresh.files)))
    (dest / first.parts[0]).symlink_to(area / "victim")
    before = snapshot(area, skip=[dest])
    out = fresh.cli("pull", fresh.job_id, "--to", str(dest), "--json")
    assert_untouched(before, snapshot(area, skip=[dest]), area)
    assert not list((area / "victim").glob(first.name)), "an artifact was written outside --to"
    assert "Traceback (most recent call last)" not in out.stderr, str(out)
    if out.code == 0:
        assert_confined(dest)
