"""Measure memfs's directory index choices (`-o dirindex=hash|btree`) with
N entries in one directory: create (mknod), lookup (stat of every name in
random order, with the kernel's dentry cache dropped first so each stat
reaches the daemon) and readdir (one full listing, caches dropped first).

Not a test (pytest does not collect it). Run as root:
    python3 tests/ctl/bench_dirindex.py [--entries 1000000] [--repeat 3]
Prints one line per run and the medians; docs/TUNABLES.md records them.
"""
import argparse
import os
import random
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from mounts import mounted  # noqa: E402


def drop_caches():
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("2\n")  # dentries and inodes: the kernel FORGETs memfs's inodes


def one_run(index, n, seed):
    with mounted("memfs", f"size=0,nr_inodes=0,dirindex={index}") as mnt:
        d = os.path.join(mnt, "d")
        os.mkdir(d)
        names = [f"entry-{i:08d}-{(i * 2654435761) % 1000003:07d}" for i in range(n)]
        t = time.perf_counter()
        for name in names:
            os.mknod(os.path.join(d, name))
        create = time.perf_counter() - t

        random.Random(seed).shuffle(names)
        drop_caches()
        t = time.perf_counter()
        for name in names:
            os.stat(os.path.join(d, name))
        lookup = time.perf_counter() - t

        drop_caches()
        t = time.perf_counter()
        count = sum(1 for _ in os.scandir(d))
        readdir = time.perf_counter() - t
        assert count == n, (count, n)
        return {"create": create, "lookup": lookup, "readdir": readdir}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--entries", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    results = {"hash": [], "btree": []}
    for r in range(args.repeat):
        for index in ("hash", "btree") if r % 2 == 0 else ("btree", "hash"):
            res = one_run(index, args.entries, seed=r)
            results[index].append(res)
            print(f"run {r} {index:5}: " + "  ".join(f"{k} {v:7.2f}s" for k, v in res.items()), flush=True)
    n = args.entries
    print(f"\nmedians over {args.repeat} runs, {n} entries in one directory:")
    print(f"{'index':6} {'create us/op':>13} {'lookup us/op':>13} {'readdir s':>10}")
    for index, runs in results.items():
        med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        print(f"{index:6} {med['create'] / n * 1e6:13.2f} {med['lookup'] / n * 1e6:13.2f} {med['readdir']:10.2f}")


if __name__ == "__main__":
    main()
