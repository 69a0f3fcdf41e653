#!/usr/bin/env python3
"""A/B of memfs mount options on metadata, for the defaults in docs/TUNABLES.md.

Each round mounts memfs once per option set (and kernel tmpfs as the
reference), in turn, on a fresh mount each time, and runs the same
workload: every client process creates N files (writing --bytes bytes to
each), stats them, and unlinks them. With 1 client and with 2 at once.
Optionally (--busy) with two CPU-bound processes running throughout, to see
what an option costs when the machine has no idle CPU. Prints every
round's ops/s, then medians and the ratio to tmpfs. Needs root.

    python3 scripts/options-ab.py poll_us=0 poll_us=200 poll_us=1000
    python3 scripts/options-ab.py --busy poll_us=0 poll_us=1000
    python3 scripts/options-ab.py --bytes 0 threads=1 threads=2
"""
import argparse
import multiprocessing as mp
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
from mounts import mount_memfs, mount_tmpfs, umount  # noqa: E402


def work(root, tag, n, nbytes):
    d = os.path.join(root, tag)
    os.mkdir(d)
    data = b"x" * nbytes
    for i in range(n):
        fd = os.open(f"{d}/f{i}", os.O_CREAT | os.O_WRONLY, 0o644)
        if data:
            os.write(fd, data)
        os.close(fd)
    for i in range(n):
        os.stat(f"{d}/f{i}")
    for i in range(n):
        os.unlink(f"{d}/f{i}")


def run(root, clients, n, nbytes):
    start = time.perf_counter()
    procs = [mp.Process(target=work, args=(root, f"c{clients}-{k}", n, nbytes)) for k in range(clients)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
        if p.exitcode != 0:
            raise SystemExit(f"a client failed on {root}")
    return clients * n * 3 / (time.perf_counter() - start)


def spin():
    while True:
        pass


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("options", nargs="+", help="memfs -o option sets to compare, e.g. poll_us=0")
    ap.add_argument("--files", type=int, default=10000, help="files per client (default 10000)")
    ap.add_argument("--bytes", type=int, default=1, help="bytes written to each file (default 1)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--busy", action="store_true", help="keep every CPU busy with other processes")
    args = ap.parse_args()
    configs = [("tmpfs", None)] + [(o, o) for o in args.options]
    results = {(name, c): [] for name, _ in configs for c in (1, 2)}
    hogs = [mp.Process(target=spin, daemon=True) for _ in range(os.cpu_count() if args.busy else 0)]
    for h in hogs:
        h.start()
    try:
        for r in range(args.rounds):
            for name, opts in configs:
                mnt = tempfile.mkdtemp(prefix="options-ab-")
                try:
                    if opts is None:
                        mount_tmpfs(mnt, "size=2G")
                    else:
                        mount_memfs(mnt, f"size=2G,{opts}")
                    line = []
                    for c in (1, 2):
                        rate = run(mnt, c, args.files, args.bytes)
                        results[(name, c)].append(rate)
                        line.append(f"clients={c} {rate:,.0f} ops/s")
                    print(f"round {r + 1} {name}: " + "  ".join(line), flush=True)
                finally:
                    umount(mnt)
                    os.rmdir(mnt)
    finally:
        for h in hogs:
            h.kill()
    print(f"\nmedians of {args.rounds} rounds ({args.files} files per client, {args.bytes} bytes each"
          f"{', every CPU busy' if args.busy else ''}):")
    print("| memfs options | 1 client ops/s | ratio to tmpfs | 2 clients ops/s | ratio to tmpfs |")
    print("|---|---|---|---|---|")
    for name, _ in configs:
        cells = []
        for c in (1, 2):
            med = statistics.median(results[(name, c)])
            ref = statistics.median(results[("tmpfs", c)])
            cells += [f"{med:,.0f}", f"{med / ref:.2f}x"]
        print(f"| {name} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
