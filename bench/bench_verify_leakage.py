"""Leakage hashing throughput: hashes compared per minute (the issue's floor is 1M a minute).

Run:  .venv/bin/python bench/bench_verify_leakage.py [--train 2000000] [--test 500000]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from rgt.verify.probes import leakage, read_hash_list


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--train", type=int, default=2_000_000)
    parser.add_argument("--test", type=int, default=500_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        train, test = Path(tmp) / "train.txt", Path(tmp) / "test.txt"
        train.write_text("\n".join(f"{i:064x}" for i in range(args.train)))
        start = args.train - args.test // 10  # 10 % of test leaks
        test.write_text("\n".join(f"{i:064x}" for i in range(start, start + args.test)))
        began = time.perf_counter()
        findings = leakage(read_hash_list(train), read_hash_list(test))
        wall = time.perf_counter() - began
    total = args.train + args.test
    print(
        f"{total} hashes (train {args.train}, test {args.test}) in {wall:.2f} s: "
        f"{total / wall * 60 / 1e6:.1f}M hashes/minute; overlap "
        f"{findings[0].evidence['overlap'] if findings else 0}"
    )


if __name__ == "__main__":
    main()
