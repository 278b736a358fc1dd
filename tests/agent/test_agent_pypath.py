"""A job imports ``rgt.ckpt`` from the agent archive when its Python has no rgt, and the rgt
installed in its Python when it has one (the archive comes last on ``sys.path``); the
image's own sitecustomize still runs."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import rgt

BARE = shutil.which("python3", path="/usr/bin:/bin")

# Run by this venv's Python (rgt installed), which then starts a Python without rgt.
SCRIPT = """
    import os, subprocess, sys
    import rgt, rgt.ckpt
    print("installed", rgt.__file__, flush=True)
    code = ("import rgt.ckpt, sys; from rgt.ckpt import Checkpointer; "
            "print('bare', rgt.ckpt.__file__, sys.path.index(os.path.dirname(os.path.dirname("
            "rgt.__file__))) == len(sys.path) - 1)")
    subprocess.run([sys.argv[1], "-c", "import os; " + code], check=True)
    print("pythonpath", os.environ["PYTHONPATH"], flush=True)
"""


@pytest.mark.skipif(BARE is None, reason="no system python3")
def test_a_job_without_rgt_imports_rgt_ckpt_from_the_archive(make_job, agent_pyz: Path) -> None:
    assert BARE is not None
    probe = __import__("subprocess").run([BARE, "-c", "import rgt"], capture_output=True)
    if probe.returncode == 0:
        pytest.skip(f"{BARE} has rgt installed")
    job = make_job().write(SCRIPT.replace("sys.argv[1]", repr(BARE)))
    job.start(PYTHONPATH="/opt/user-entry")
    assert job.finish() == 0, job.agent_log() + Path(job.paths.log(1)).read_text()
    log = Path(job.paths.log(1)).read_text()
    assert f"installed {rgt.__file__}" in log  # the job's own rgt wins
    bare = [line for line in log.splitlines() if line.startswith("bare ")]
    assert bare and "agent-" in bare[0] and ".pyz/rgt/ckpt/__init__.py True" in bare[0], log
    pythonpath = next(line for line in log.splitlines() if line.startswith("pythonpath "))
    # only a sitecustomize.py first; the user's entries keep their order after it
    assert pythonpath == f"pythonpath {job.dir}/pythonpath:/opt/user-entry", pythonpath


def test_every_other_sitecustomize_still_runs(make_job, tmp_path: Path) -> None:
    """The user's PYTHONPATH entry holds a sitecustomize (as an image's stdlib may): it runs,
    after the agent's, and rgt.ckpt still imports."""
    own = tmp_path / "image-site"
    own.mkdir()
    (own / "sitecustomize.py").write_text("import os\nos.environ['IMAGE_SITE'] = 'ran'\n")
    script = "import os, rgt.ckpt\nprint('image site', os.environ.get('IMAGE_SITE'))\n"
    job = make_job().write(script, env={"PYTHONPATH": str(own)})
    job.start()
    assert job.finish() == 0, job.agent_log() + Path(job.paths.log(1)).read_text()
    assert "image site ran" in Path(job.paths.log(1)).read_text()
