#!/usr/bin/env python3
"""Same-run comparison of memfs's two FUSE transports beside kernel tmpfs
(docs/TRANSPORT.md; `make bench` runs the same program in its transport
workload): creates, stat of cached names, stat after a write,
open+read+close of a small file, a lone request's round trip (fgetxattr of
a missing name), unlinks. Each figure is the median over --reps runs, the
subjects taking turns in a rotating order; µs per operation and the ratio
to tmpfs (tmpfs µs / subject µs: higher is better, 1.0 = tmpfs's speed).

Needs root (mounts, enable_uring) and a release build; puts enable_uring
back as it found it and unmounts what it mounted.

  scripts/bench-transport.py [--files 20000] [--reps 5] [--memfs-options OPTS]
"""
import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MEMFS = os.environ.get("MEMFS_BIN", os.path.join(REPO, "target", "release", "memfs"))
PARAM = "/sys/module/fuse/parameters/enable_uring"

# The C program of the benchmark suite's transport workload
# (bench/native/transport.c), so that the loop's own cost (Python's is 1-2 us
# a call) does not hide tmpfs's few microseconds.
SOURCE = os.path.join(REPO, "bench", "native", "transport.c")

OPS = ["create", "stat", "stat_after_write", "open_read_close", "round_trip", "unlink"]


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw)


@contextlib.contextmanager
def mounted(subjects, base, memfs_options):
    made = []
    try:
        for name, kind, opts in subjects:
            path = os.path.join(base, name)
            os.makedirs(path)
            if kind == "tmpfs":
                run(["mount", "-t", "tmpfs", "-o", "size=4G", "tmpfs", path])
            else:
                run([MEMFS, "-o", ",".join(o for o in ("size=4G", opts, memfs_options) if o), path])
            made.append(path)
        yield
    finally:
        for path in made:
            subprocess.run(["umount", path], capture_output=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--files", type=int, default=20000)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--memfs-options", default="")
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("needs root (mounts, enable_uring)")
    base = tempfile.mkdtemp(prefix="memfs-transport-bench-")
    exe = os.path.join(base, "loop")
    run(["cc", "-O2", "-o", exe, SOURCE])
    before = open(PARAM).read().strip() if os.path.exists(PARAM) else None
    subjects = [("tmpfs", "tmpfs", ""), ("uring_on", "memfs", "uring=on"), ("uring_off", "memfs", "uring=off")]
    if before is None:
        subjects.pop(1)
    else:
        with open(PARAM, "w") as f:
            f.write("Y\n")
    results = {s[0]: {op: [] for op in OPS} for s in subjects}
    try:
        with mounted(subjects, base, a.memfs_options):
            for rep in range(a.reps):
                order = subjects[rep % len(subjects):] + subjects[:rep % len(subjects)]
                for name, _, _ in order:
                    out = json.loads(run([exe, os.path.join(base, name), str(a.files)]).stdout)
                    for op in OPS:
                        results[name][op].append(float(out[op]))
    finally:
        if before is not None:
            with open(PARAM, "w") as f:
                f.write(before + "\n")
        shutil.rmtree(base, ignore_errors=True)
    med = {s: {op: statistics.median(v) for op, v in r.items()} for s, r in results.items()}
    names = [s[0] for s in subjects]
    print(f"{a.files} files in 20 directories, median of {a.reps} runs; µs per operation (ratio to tmpfs)\n")
    print("| operation | " + " | ".join(names) + " |")
    print("|---|" + "---|" * len(names))
    for op in OPS:
        cells = []
        for s in names:
            us = med[s][op]
            cells.append(f"{us:.2f}" if s == "tmpfs" else f"{us:.2f} ({med['tmpfs'][op] / us:.2f}×)")
        print(f"| {op} | " + " | ".join(cells) + " |")
    for s in names:
        print(f"\n{s}: creates/s {1e6 / med[s]['create']:.0f}, unlinks/s {1e6 / med[s]['unlink']:.0f}")


if __name__ == "__main__":
    main()
