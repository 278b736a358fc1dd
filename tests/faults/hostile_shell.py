"""The login shell of a hostile machine: sshd runs this for every session (an authorized_keys
``command=``), it tampers with the job's files, then runs the real command.

It reads its orders from the JSON file named in argv[1]:

- ``manifest``: a list of entries that replaces ``files`` in manifest.json, or the key
  ``files_value`` for a non-list; applied when a command reads manifest.json;
- ``swap_at`` / ``swap``: on the N-th rsync sender session (1-based; each is one copy of a
  pull), replace the path ``swap["path"]`` (relative to the job dir) by a symlink whose text is
  ``swap["link"]``, and put ``swap["plant"]`` (relative path -> text) beside it first.

Stdlib only; it runs under the machine's python.
"""

import json
import os
import shutil
import sys


def _tamper_manifest(orders):
    path = os.path.join(orders["job_dir"], "manifest.json")
    with open(path) as handle:
        doc = json.load(handle)
    doc["files"] = orders["manifest"] if "manifest" in orders else orders["files_value"]
    with open(path, "w") as handle:
        json.dump(doc, handle)


def _count(orders):
    counter = orders["counter"]
    n = 1
    if os.path.exists(counter):
        with open(counter) as handle:
            n = int(handle.read() or 0) + 1
    with open(counter, "w") as handle:
        handle.write(str(n))
    return n


def _swap(orders):
    job_dir, swap = orders["job_dir"], orders["swap"]
    for rel, text in swap.get("plant", {}).items():
        target = os.path.normpath(os.path.join(job_dir, rel))
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "w") as handle:
            handle.write(text)
    victim = os.path.join(job_dir, swap["path"])
    if os.path.isdir(victim) and not os.path.islink(victim):
        shutil.rmtree(victim)
    elif os.path.lexists(victim):
        os.unlink(victim)
    os.symlink(swap["link"], victim)


def main():
    with open(sys.argv[1]) as handle:
        orders = json.load(handle)
    command = os.environ.get("SSH_ORIGINAL_COMMAND", "")
    touches_manifest = "manifest.json" in command
    if touches_manifest and ("manifest" in orders or "files_value" in orders):
        _tamper_manifest(orders)
    sender = "rsync" in command and "--sender" in command
    if sender and "swap_at" in orders and _count(orders) == orders["swap_at"]:
        _swap(orders)
    if not command:
        os.execv("/bin/sh", ["sh"])
    os.execv("/bin/sh", ["sh", "-c", command])


if __name__ == "__main__":
    main()
