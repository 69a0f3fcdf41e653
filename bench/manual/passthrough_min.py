"""By hand: where memory files (passthrough) start to pay, for passthrough_min.

Usage (root, after `cargo build --release`):
    python3 bench/manual/passthrough_min.py [--reps 3] [--total-mib 256]

For each file size (16 KiB to 4 MiB), the same run: kernel tmpfs, memfs
with every file a memory file (`passthrough_min=0`) and memfs with none
(`passthrough_min=1t`). Each writes TOTAL of files of that size (create,
one write, close), then reads them all back warm (page cache kept), then
cold (after drop_caches), then opens and closes each (no I/O), and reports
µs per file for each phase, median of the repetitions, and the memory the
files cost: growth of daemon RSS plus the kernel's Cached (its page cache,
and the memory files, which are shmem) after the cold read, against the
bytes stored. Used for the
passthrough_min rows of docs/PASSTHROUGH.md.
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "tests"))
from mounts import MEMFS_BIN as MEMFS, daemon_pid  # noqa: E402  (tests/mounts.py)
SIZES = [16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20]
SUBJECTS = [("tmpfs", None), ("memfs pt_min=0", "passthrough_min=0"), ("memfs pt_min=1t", "passthrough_min=1t")]


def meminfo_kib(key):
    with open("/proc/meminfo") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(key + ":"))


def rss_kib(pid):
    if pid is None:
        return 0
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS"))


def drop_caches():
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def timed(fn, n):
    t = time.perf_counter()
    fn()
    return (time.perf_counter() - t) / n * 1e6


def run(kind, mnt, size, count, data):
    names = [os.path.join(mnt, f"f{i}") for i in range(count)]
    pid = daemon_pid(mnt) if kind == "memfs" else None
    drop_caches()
    rss0, cached0 = rss_kib(pid), meminfo_kib("Cached")

    def write():
        for p in names:
            fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.write(fd, data)
            os.close(fd)

    def read():
        for p in names:
            fd = os.open(p, os.O_RDONLY)
            while os.read(fd, 1 << 20):
                pass
            os.close(fd)

    def open_close():
        for p in names:
            os.close(os.open(p, os.O_RDONLY))

    out = {"write": timed(write, count)}
    out["read warm"] = timed(read, count)
    drop_caches()
    out["read cold"] = timed(read, count)
    out["open+close"] = timed(open_close, count)
    # Memory after a settle: what holding the files costs, against their bytes.
    time.sleep(0.5)
    grown = (rss_kib(pid) - rss0) + (meminfo_kib("Cached") - cached0)
    out["memory/bytes"] = grown * 1024 / (size * count)
    for p in names:
        os.unlink(p)
    return out


def mount(kind, opts, path):
    if kind == "tmpfs":
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4G", "tmpfs", path], check=True)
    else:
        subprocess.run([MEMFS, "-o", f"size=4G,{opts}", path], check=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--total-mib", type=int, default=256)
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("needs root (mounts, drop_caches)")
    base = tempfile.mkdtemp(prefix="ptmin-")
    phases = ["write", "read warm", "read cold", "open+close", "memory/bytes"]
    try:
        for size in SIZES:
            count = max(16, (a.total_mib << 20) // size)
            data = os.urandom(size)
            results = {name: {p: [] for p in phases} for name, _ in SUBJECTS}
            for rep in range(a.reps):
                order = SUBJECTS[rep % len(SUBJECTS):] + SUBJECTS[:rep % len(SUBJECTS)]
                for name, opts in order:
                    mnt = os.path.join(base, "m")
                    os.makedirs(mnt, exist_ok=True)
                    mount("tmpfs" if opts is None else "memfs", opts, mnt)
                    try:
                        kind = "tmpfs" if opts is None else "memfs"
                        for p, v in run(kind, mnt, size, count, data).items():
                            results[name][p].append(v)
                    finally:
                        subprocess.run(["umount", mnt], check=True)
            print(f"\n{size >> 10} KiB files, {count} of them, median of {a.reps}: "
                  "µs per file (ratio to tmpfs); memory held per byte stored")
            print("| phase | " + " | ".join(n for n, _ in SUBJECTS) + " |")
            print("|---" * (len(SUBJECTS) + 1) + "|")
            for p in phases:
                cells = []
                ref = statistics.median(results["tmpfs"][p])
                for name, _ in SUBJECTS:
                    v = statistics.median(results[name][p])
                    if p == "memory/bytes" or name == "tmpfs":
                        cells.append(f"{v:.2f}")
                    else:
                        cells.append(f"{v:.1f} ({ref / v:.2f}×)")
                print(f"| {p} | " + " | ".join(cells) + " |")
            sys.stdout.flush()
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
