"""A finished job on a local machine, built once through the real CLI and restored per trial.

``World.build`` runs `rgt up local` and `rgt run` for a job that writes a few seeded artifacts
and two rgt.ckpt checkpoints, waits for it to succeed, and keeps a pristine copy of its
RGT_HOME and machine root. ``restore`` puts that copy back at the same absolute paths (the state
DB records the machine's root), so a trial can corrupt, fill or kill freely and the next trial
starts from the same truth. The expected artifacts are read from the job's own manifest.
"""

from __future__ import annotations

import json
import shutil
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

from tests.faults.harness import PY, SRC, Outcome, rgt, rng, sha256

# Writes ``FAULTS_FILES`` artifacts of seeded sizes, checkpoints with rgt.ckpt, prints "done".
JOB = """
import json, os, pathlib, random, sys, time
import numpy
sys.path.insert(0, os.environ["FAULTS_SRC"])
from rgt.ckpt import Checkpointer
out = pathlib.Path(os.environ["RGT_OUTPUT_DIR"])
gen = random.Random(int(os.environ["FAULTS_SEED"]))
ckpt = Checkpointer.from_env(keep_last=2)
state = ckpt.load_latest()
first = state["step"] + 1 if state else 1
print("resumed from", first - 1, flush=True)
steps = int(os.environ.get("FAULTS_STEPS", "2"))
for step in range(first, steps + 1):
    time.sleep(float(os.environ.get("FAULTS_STEP_S", "0")))
    weights = numpy.array([gen.random() for _ in range(500)], dtype=numpy.float32)
    ckpt.save({"step": step, "weights": weights}, step)
for i in range(int(os.environ["FAULTS_FILES"])):
    size = gen.randrange(1, int(os.environ.get("FAULTS_MAX_BYTES", "40000")))
    rows = [{"i": i, "v": gen.random()} for _ in range(max(1, size // 40))]
    (out / ("a%02d.json" % i)).write_text(json.dumps(rows))
print("done", flush=True)
"""


@dataclass
class World:
    base: Path
    job_id: str = ""
    files: dict[str, str] = field(default_factory=dict)  # manifest path -> sha256

    @property
    def home(self) -> Path:
        return self.base / "live" / "home"

    @property
    def root(self) -> Path:
        return self.base / "live" / "root"

    @property
    def project(self) -> Path:
        return self.base / "project"

    @property
    def job_dir(self) -> Path:
        return self.root / ".rgt" / "jobs" / self.job_id

    def cli(self, *args: str, **kwargs: object) -> Outcome:
        return rgt(self.home, *args, **kwargs)  # type: ignore[arg-type]

    def build(self, files: int = 5, max_bytes: int = 40000, steps: int = 2) -> World:
        self.project.mkdir(parents=True)
        (self.project / "job.py").write_text(textwrap.dedent(JOB))
        up = self.cli("up", "local", "--name", "box", "--root", str(self.root), "--json")
        assert up.code == 0, str(up)
        env = job_env(files=files, max_bytes=max_bytes, steps=steps)
        run = self.cli(
            "run", "box", "--probe-seconds", "30", "--json", *env, "--", PY, "job.py",
            cwd=self.project, bound=60,
        )  # fmt: skip
        assert run.code == 0 and run.doc()["state"] == "succeeded", str(run)
        self.job_id = run.doc()["job_id"]
        manifest = json.loads((self.job_dir / "manifest.json").read_text())
        self.files = {e["path"]: e["sha256"] for e in manifest["files"]}
        for rel, digest in self.files.items():
            assert sha256(self.job_dir / rel) == digest
        shutil.copytree(self.base / "live", self.base / "pristine", symlinks=True)
        return self

    def restore(self) -> None:
        shutil.rmtree(self.base / "live", ignore_errors=True)
        shutil.copytree(self.base / "pristine", self.base / "live", symlinks=True)

    def trial_dir(self, name: str) -> Path:
        """A fresh directory beside nothing of rgt's: the destination's surroundings."""
        path = self.base / "trials" / name
        shutil.rmtree(path, ignore_errors=True)
        path.mkdir(parents=True)
        (path / "neighbour.txt").write_text("a file next to the destination\n")
        (path / "victim").mkdir()
        (path / "victim" / "precious.txt").write_text("must never change\n")
        return path


def job_env(files: int = 5, max_bytes: int = 40000, steps: int = 2, step_s: float = 0) -> list[str]:
    """The `--env` flags of the world's job: sizes and checkpoint steps, seeded."""
    seed = rng("world-job").randrange(1 << 30)
    pairs = {
        "FAULTS_SRC": str(SRC),
        "FAULTS_SEED": str(seed),
        "FAULTS_FILES": str(files),
        "FAULTS_MAX_BYTES": str(max_bytes),
        "FAULTS_STEPS": str(steps),
        "FAULTS_STEP_S": str(step_s),
    }
    return [word for k, v in pairs.items() for word in ("--env", f"{k}={v}")]
