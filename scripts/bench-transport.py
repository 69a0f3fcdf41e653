#!/usr/bin/env python3
"""Same-run comparison of memfs's two FUSE transports beside kernel tmpfs
(docs/TRANSPORT.md): creates, stat of cached names, stat after a write,
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
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MEMFS = os.environ.get("MEMFS_BIN", os.path.join(REPO, "target", "release", "memfs"))
PARAM = "/sys/module/fuse/parameters/enable_uring"

# One C program, so that the loop's own cost (Python's is 1-2 µs a call) does
# not hide tmpfs's few microseconds.
SOURCE = r"""
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec / 1e9; }
static void die(const char *w, const char *p) { perror(w); fprintf(stderr, "%s\n", p); exit(1); }
int main(int argc, char **argv) {
    const char *dir = argv[1]; int n = atoi(argv[2]), dirs = 20; char p[4096]; struct stat st; char buf[4096];
    for (int d = 0; d < dirs; d++) { snprintf(p, sizeof p, "%s/d%d", dir, d); if (mkdir(p, 0755)) die("mkdir", p); }
    double t = now();
    for (int i = 0; i < n; i++) { snprintf(p, sizeof p, "%s/d%d/f%d", dir, i % dirs, i);
        int fd = open(p, O_CREAT | O_WRONLY | O_EXCL, 0644); if (fd < 0) die("create", p); close(fd); }
    double create = now() - t; t = now();
    for (int i = 0; i < n; i++) { snprintf(p, sizeof p, "%s/d%d/f%d", dir, i % dirs, i); if (stat(p, &st)) die("stat", p); }
    double stat_cached = now() - t;
    int m = n / 4; double sw = 0;
    for (int i = 0; i < m; i++) { snprintf(p, sizeof p, "%s/d%d/f%d", dir, i % dirs, i);
        int fd = open(p, O_WRONLY); if (fd < 0) die("open", p); if (write(fd, "x", 1) != 1) die("write", p); close(fd);
        double t0 = now(); if (stat(p, &st)) die("stat", p); sw += now() - t0; }
    snprintf(p, sizeof p, "%s/small", dir); int fd = open(p, O_CREAT | O_WRONLY, 0644); memset(buf, 'a', sizeof buf);
    if (write(fd, buf, sizeof buf) != sizeof buf) die("write", p); close(fd);
    t = now();
    for (int i = 0; i < n; i++) { fd = open(p, O_RDONLY); if (fd < 0) die("open", p); if (read(fd, buf, sizeof buf) != sizeof buf) die("read", p); close(fd); }
    double openread = now() - t;
    fd = open(p, O_RDONLY); t = now();
    for (int i = 0; i < n; i++) fgetxattr(fd, "user.missing", buf, sizeof buf);
    double rt = now() - t; close(fd); unlink(p);
    t = now();
    for (int i = 0; i < n; i++) { snprintf(p, sizeof p, "%s/d%d/f%d", dir, i % dirs, i); if (unlink(p)) die("unlink", p); }
    double unl = now() - t;
    for (int d = 0; d < dirs; d++) { snprintf(p, sizeof p, "%s/d%d", dir, d); rmdir(p); }
    printf("create %.3f\nstat %.3f\nstat_after_write %.3f\nopen_read_close %.3f\nround_trip %.3f\nunlink %.3f\n",
           create / n * 1e6, stat_cached / n * 1e6, sw / m * 1e6, openread / n * 1e6, rt / n * 1e6, unl / n * 1e6);
    return 0;
}
"""

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
    with open(exe + ".c", "w") as f:
        f.write(SOURCE)
    run(["cc", "-O2", "-o", exe, exe + ".c"])
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
                    out = run([exe, os.path.join(base, name), str(a.files)]).stdout
                    for line in out.splitlines():
                        op, us = line.split()
                        results[name][op].append(float(us))
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
