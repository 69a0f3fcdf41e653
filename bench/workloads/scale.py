"""Metadata at scale (issue 14): create, stat, list and unlink of N empty files
in 1,000 directories on a fresh mount, and the memory each step leaves.

Owns: the sizes and the memory readings between the phases; the loops are
bench/native/scale.c. Memory is read from outside: the memfs daemon's RSS
(/proc/PID/status) and the kernel's slab (inodes and dentries, both file
systems) from /proc/meminfo.
"""
import json
import time

import native
from filesystems import daemon_rss, wait_exit
from proc import BenchError
from proc import run as run_cmd
from runner import Case, Metric
from sysinfo import meminfo

NAME = "scale"
TITLE = "Metadata at scale: millions of empty files"
DESCRIPTION = """
Each run mounts a fresh file system, makes 1,000 directories, then creates N
empty files (open O_CREAT|O_EXCL + close, file k in directory k mod 1,000),
stats each, lists each directory, unlinks each file, with one thread. Rates
are operations per second (higher is better). Memory: the memfs daemon's RSS
growth per file after the creates; the kernel slab growth per file (inodes
and dentries: fuse_inode for memfs, shmem_inode_cache for tmpfs); the
daemon's RSS right after the unlinks and after its idle trim (memfs gives
freed memory back once the mount has been idle for a second), against the
fresh daemon's. 10 million files run once per suite (one run takes tens of
minutes), in full mode only.
"""

MANAGES_MOUNTS = True
DIRS = 1000
FULL = [1_000_000, 10_000_000]
QUICK = [100_000]
PHASES = ["create", "stat", "list", "unlink"]


def cases(cfg):
    sizes = QUICK if cfg.quick else FULL
    return [Case(id=f"n{n // 1000}k", label=f"{n:,} files",
                 params={"files": n, **({"max_reps": 1} if n >= 10_000_000 else {})})
            for n in sizes]


def metrics(case):
    k, label = case.id, case.label
    rates = [Metric(key=f"{k}:{p}_ops", table="Operations per second, one thread",
                    label=f"{p}, {label}", unit="ops/s", better="higher") for p in PHASES]
    memory = [
        Metric(key=f"{k}:rss_per_file", table="Memory per empty file (bytes)",
               label=f"memfs daemon RSS per file, {label}", unit="B", better="lower",
               ratio=False, chart=False),
        Metric(key=f"{k}:slab_per_file", table="Memory per empty file (bytes)",
               label=f"kernel slab (inode + dentry) per file, {label}", unit="B",
               better="lower", chart=False),
        Metric(key=f"{k}:rss_fresh_mib", table="memfs daemon RSS (MiB)",
               label=f"fresh mount, {label} run", unit="MiB", better="lower", ratio=False,
               chart=False),
        Metric(key=f"{k}:rss_full_mib", table="memfs daemon RSS (MiB)",
               label=f"holding {label}", unit="MiB", better="lower", ratio=False, chart=False),
        Metric(key=f"{k}:rss_deleted_mib", table="memfs daemon RSS (MiB)",
               label=f"right after unlinking {label}", unit="MiB", better="lower",
               ratio=False, chart=False),
        Metric(key=f"{k}:rss_trimmed_mib", table="memfs daemon RSS (MiB)",
               label=f"after the idle trim, {label}", unit="MiB", better="lower", ratio=False,
               chart=False),
    ]
    return rates + memory


def _slab_kib():
    return meminfo()["Slab"]


def _settled_rss(pid, seconds, quiet=3.0):
    """The daemon's RSS once its idle trim has run: the lowest reading, once
    no lower one has come for `quiet` seconds (the trim waits for an idle
    second, then works), waiting at most `seconds`."""
    low, since = daemon_rss(pid), time.monotonic()
    deadline = since + seconds
    while time.monotonic() < deadline and time.monotonic() - since < quiet:
        time.sleep(0.25)
        now = daemon_rss(pid)
        if now is not None and (low is None or now < low):
            low, since = now, time.monotonic()
    return low


def run(ctx):
    fs, k, n = ctx.fs, ctx.case.id, ctx.case.params["files"]
    if not fs.managed:
        return {}
    path = fs.mount()
    daemon = fs.daemon
    prog = native.program("scale")
    values = {}

    def phase(name, timeout):
        out = json.loads(run_cmd([prog, path, name, str(n), str(DIRS), "1"], timeout).stdout)
        return out["ops"] / out["seconds"] if out["seconds"] > 0 else None

    per_op = ctx.timeout(6 * 3600, 900)
    try:
        fresh = daemon_rss(daemon) if daemon else None
        phase("mkdirs", 600)
        slab0, rss0 = _slab_kib(), daemon_rss(daemon) if daemon else None
        values[f"{k}:create_ops"] = phase("create", per_op)
        slab1, rss1 = _slab_kib(), daemon_rss(daemon) if daemon else None
        values[f"{k}:slab_per_file"] = (slab1 - slab0) * 1024 / n
        values[f"{k}:stat_ops"] = phase("stat", per_op)
        values[f"{k}:list_ops"] = phase("list", per_op)
        values[f"{k}:unlink_ops"] = phase("unlink", per_op)
        if daemon:
            values[f"{k}:rss_per_file"] = (rss1 - rss0) * 1024 / n
            values[f"{k}:rss_fresh_mib"] = fresh / 1024
            values[f"{k}:rss_full_mib"] = rss1 / 1024
            values[f"{k}:rss_deleted_mib"] = daemon_rss(daemon) / 1024
            values[f"{k}:rss_trimmed_mib"] = _settled_rss(daemon, 20) / 1024
        phase("rmdirs", 600)
        run_cmd(["umount", path], ctx.timeout(1800, 120))
        if daemon and not wait_exit(daemon, ctx.timeout(600, 60)):
            raise BenchError("memfs daemon still running after umount")
    finally:
        fs.unmount()  # no-op when already gone; recovers a failed run
    return values
