"""The one object that knows the on-disk layout of rgt on a machine.

Python 3.8 syntax and stdlib only: the agent bundles this module, so the CLI and the agent can
never disagree about where a file lives.

    <durable>/.rgt/
      agent/agent-<version>.pyz
      code/<snapshot-hash>/            immutable code snapshots
      jobs/<job-id>/
        spec.json  status.json  events.jsonl  manifest.json  DONE
        code -> ../../code/<snapshot-hash>
        work/                          the job's cwd (RGT_WORK_DIR): its own copy of the snapshot
        work.links.json                the snapshot files work/ shares by hard link (agent's own)
        logs/attempt-<n>.log
        ckpt/                          RGT_CKPT_DIR
        outputs/                       RGT_OUTPUT_DIR
"""

import posixpath

RGT_DIRNAME = ".rgt"


def damaged_marker(snapshot_dir):
    # type: (str) -> str
    return snapshot_dir.rstrip("/") + ".damaged"


class RootPaths(object):
    """Paths under ``<durable>/.rgt``. Uses posix joins: the machine is always POSIX."""

    def __init__(self, durable_root):
        # type: (str) -> None
        self.durable_root = durable_root
        self.root = posixpath.join(durable_root, RGT_DIRNAME)

    @property
    def agent_dir(self):
        # type: () -> str
        return posixpath.join(self.root, "agent")

    def agent_file(self, version):
        # type: (str) -> str
        return posixpath.join(self.agent_dir, "agent-%s.pyz" % version)

    @property
    def code_dir(self):
        # type: () -> str
        return posixpath.join(self.root, "code")

    def snapshot(self, snapshot_hash):
        # type: (str) -> str
        return posixpath.join(self.code_dir, snapshot_hash)

    def snapshot_damaged(self, snapshot_hash):
        # type: (str) -> str
        """Written by an agent that saw a job change a file of this snapshot; the next push
        moves the snapshot aside and uploads it again."""
        return damaged_marker(self.snapshot(snapshot_hash))

    @property
    def jobs_dir(self):
        # type: () -> str
        return posixpath.join(self.root, "jobs")

    def job(self, job_id):
        # type: (str) -> JobPaths
        return JobPaths(posixpath.join(self.jobs_dir, job_id), job_id)


class JobPaths(object):
    """Every file of one job. ``root`` is ``<durable>/.rgt/jobs/<job-id>``."""

    def __init__(self, root, job_id):
        # type: (str, str) -> None
        self.root = root
        self.job_id = job_id

    def _p(self, *parts):
        # type: (*str) -> str
        return posixpath.join(self.root, *parts)

    @property
    def spec(self):
        # type: () -> str
        return self._p("spec.json")

    @property
    def status(self):
        # type: () -> str
        return self._p("status.json")

    @property
    def events(self):
        # type: () -> str
        return self._p("events.jsonl")

    @property
    def manifest(self):
        # type: () -> str
        return self._p("manifest.json")

    @property
    def done(self):
        # type: () -> str
        return self._p("DONE")

    @property
    def code(self):
        # type: () -> str
        return self._p("code")

    @property
    def work(self):
        # type: () -> str
        """The job's own writable working directory (its cwd), populated from the snapshot."""
        return self._p("work")

    @property
    def work_links(self):
        # type: () -> str
        return self._p("work.links.json")

    @property
    def logs_dir(self):
        # type: () -> str
        return self._p("logs")

    def log(self, attempt):
        # type: (int) -> str
        return self._p("logs", "attempt-%d.log" % attempt)

    @property
    def ckpt_dir(self):
        # type: () -> str
        return self._p("ckpt")

    @property
    def output_dir(self):
        # type: () -> str
        return self._p("outputs")

    @property
    def agent_pid(self):
        # type: () -> str
        return self._p("agent.pid")

    @property
    def cancel_request(self):
        # type: () -> str
        """The CLI creates this file to ask the agent to stop the job (state `cancelled`)."""
        return self._p("CANCEL")
