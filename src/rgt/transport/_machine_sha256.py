"""sha256 of pushed files, on the machine, while rsync is still sending later ones.

Runs with the machine's python3 (stdlib only, Python >= 3.8), sent as
``python3 -c SOURCE BASE [THREADS]``. stdin: a line with the byte length of the list, the list
(NUL-ended fields, three per file: path relative to BASE, expected size, expected mtime in
whole seconds; size -1 when unknown), then one ``\\0`` byte once the transfer has finished.
stdout: one line per file, in order: its sha256, or ``-`` when it cannot be read as a file.
EOF before the ``\\0`` byte means the push failed: exit 3, nothing hashed further.

A file is hashed early once its final name has the expected size and mtime: rsync writes into a
temporary name and renames it when complete, and its quick check (size + mtime) then leaves
it alone. After the transfer every early hash is checked against a fresh stat (inode, size,
mtime, ctime); a file replaced or rewritten since is hashed again, so the output is always
the bytes as they are after the transfer, whatever rsync or anyone else did meanwhile.
"""

from __future__ import annotations

import hashlib
import os
import sys
import threading
from typing import BinaryIO

BLOCK = 1 << 20
BATCH = 64  # small files taken at once: per-file locking would cost more than their hashing
POLL_S = 0.05
# Not-yet-landed files looked at per poll: rsync sends in nearly the listed order, so the
# files landing next are near the front and a 10,000-file list costs a few dozen stats a poll.
WINDOW = 64
ABORTED = 3


class File:
    def __init__(self, path: bytes, size: int, mtime: int) -> None:
        self.path = path
        self.size = size
        self.mtime = mtime
        self.weight = max(size, 0)  # bytes to read: big files first, and shared out
        self.digest = "-"
        self.identity: tuple[int, ...] | None = None  # the stat the digest belongs to

    def landed(self) -> bool:
        try:
            found = os.stat(self.path)
        except OSError:
            return False
        return found.st_size == self.size and int(found.st_mtime) == self.mtime

    def size_now(self) -> int:
        try:
            return os.stat(self.path).st_size
        except OSError:
            return 0

    def current(self) -> tuple[int, ...] | None:
        try:
            return identity(os.stat(self.path))
        except OSError:
            return None


def identity(found: os.stat_result) -> tuple[int, ...]:
    return (found.st_dev, found.st_ino, found.st_size, found.st_mtime_ns, found.st_ctime_ns)


def sha256(file: File, view: memoryview) -> None:
    digest = hashlib.sha256()
    try:
        with open(file.path, "rb", buffering=0) as handle:
            before = identity(os.fstat(handle.fileno()))
            for count in iter(lambda: handle.readinto(view), 0):
                digest.update(view[:count])
            after = identity(os.fstat(handle.fileno()))
    except OSError:
        file.digest, file.identity = "-", None
        return
    file.digest = digest.hexdigest()
    file.identity = before if before == after else None


class Hashers:
    """A few threads on one work list. Big files are shared out (hashlib and reads release the
    GIL on large blocks); small ones all go to the first thread, as several threads switching
    the GIL at every small read are slower than one."""

    def __init__(self, count: int) -> None:
        self.big: list[File] = []
        self.small: list[File] = []
        self.busy = 0
        self.closed = False
        self.lock = threading.Condition()
        self.threads = [
            threading.Thread(target=self.work, args=(index == 0,)) for index in range(max(1, count))
        ]
        for thread in self.threads:
            thread.start()

    def put(self, files: list[File]) -> None:
        with self.lock:  # lists are taken from the end: first given, first hashed
            self.big[:0] = [file for file in files if file.weight >= BLOCK]
            self.small[:0] = [file for file in files if file.weight < BLOCK]
            self.lock.notify_all()

    def work(self, takes_small: bool) -> None:
        view = memoryview(bytearray(BLOCK))
        while True:
            with self.lock:
                while not self.big and not (takes_small and self.small) and not self.closed:
                    self.lock.wait()
                batch = self.take(takes_small)
                if not batch:
                    return
                self.busy += 1
            for file in batch:
                sha256(file, view)
            with self.lock:
                self.busy -= 1
                self.lock.notify_all()

    def take(self, takes_small: bool) -> list[File]:
        if self.big:
            return [self.big.pop()]
        batch = self.small[-BATCH:] if takes_small else []
        del self.small[len(self.small) - len(batch) :]
        return batch[::-1]

    def drain(self) -> None:
        with self.lock:
            while self.big or self.small or self.busy:
                self.lock.wait()

    def close(self) -> None:
        with self.lock:
            self.closed = True
            self.lock.notify_all()
        for thread in self.threads:
            thread.join()


def read_list(stream: BinaryIO, base: bytes) -> list[File]:
    length = int(stream.readline())
    fields = stream.read(length).split(b"\0")[:-1]
    return [
        File(os.path.join(base, fields[i]), int(fields[i + 1]), int(fields[i + 2]))
        for i in range(0, len(fields), 3)
    ]


def scout(files: list[File], hashers: Hashers, finished: threading.Event) -> None:
    """Until the transfer ends, hand files to the hashers as they land."""
    pending = [file for file in files if file.size >= 0]
    while pending and not finished.wait(POLL_S):
        landed: list[File] = []
        waiting: list[File] = []
        index = 0
        while index < len(pending) and len(waiting) < WINDOW:
            file = pending[index]
            (landed if file.landed() else waiting).append(file)
            index += 1
        hashers.put(landed)
        pending = waiting + pending[index:]


def settle(files: list[File], hashers: Hashers) -> None:
    """After the transfer: hash what was not hashed yet (biggest first, so no thread is left
    alone with a late giant), then hash again any file that changed since its early hash."""
    hashers.drain()
    late = [file for file in files if file.identity is None]
    for file in late:
        file.weight = file.size_now()
    hashers.put(sorted(late, key=lambda file: file.weight, reverse=True))
    hashers.drain()
    hashers.put([file for file in files if file.identity and file.current() != file.identity])
    hashers.drain()


def default_threads() -> int:
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return min(4, cpus or 1)


def wait_for_the_transfer(stream: BinaryIO, finished: threading.Event) -> None:
    if stream.read(1) != b"\0":
        os._exit(ABORTED)  # the push failed or was cut: the pending hashes have no use
    finished.set()


def main() -> None:
    stdin = sys.stdin.buffer
    files = read_list(stdin, os.fsencode(sys.argv[1]))
    count = int(sys.argv[2]) if len(sys.argv) > 2 else default_threads()
    finished = threading.Event()
    threading.Thread(target=wait_for_the_transfer, args=(stdin, finished), daemon=True).start()
    hashers = Hashers(count)
    scout(files, hashers, finished)
    finished.wait()
    settle(files, hashers)
    hashers.close()
    sys.stdout.write("".join(file.digest + "\n" for file in files))


if __name__ == "__main__":
    main()
