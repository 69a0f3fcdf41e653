"""Mount and unmount time, empty and holding many files (1,000,000 in full
mode; the HP-UX MemFS paper discusses both costs for large instances).

Owns: timing the mount command (memfs returns once the mount is live) and
the unmount, both measured until the file system is really gone: for memfs
until its daemon has exited (its memory is then free), for tmpfs until umount
returns. Filling the file system (bench/native/fileop.c -k) is not timed.
"""
import time

import native
from filesystems import wait_exit
from proc import BenchError
from proc import run as run_cmd
from runner import Case, Metric

NAME = "mounttime"
TITLE = "Mount and unmount time"
DESCRIPTION = """
Seconds, lower is better. "mount" times the mount command of a fresh, empty
file system (memfs returns once the mount is live). "unmount" times `umount`
plus, for memfs, the wait until the daemon process has exited. Filled
instances hold X^3 empty files in X + X^2 directories (created untimed).
Only file systems this suite mounts itself are measured.
"""

MANAGES_MOUNTS = True
FULL = [0, 100]   # X: 0 = empty, 100 = 1,000,000 files
QUICK = [0, 22]   # 22^3 = 10,648 files


def cases(cfg):
    return [Case(id=f"x{x}", label="empty" if x == 0 else f"holding {x ** 3:,} files",
                 params={"x": x}) for x in (QUICK if cfg.quick else FULL)]


def metrics(case):
    rows = [("unmount", "unmount")]
    if case.params["x"] == 0:
        rows.insert(0, ("mount", "mount"))
    return [Metric(key=f"{case.id}:{key}", table="Seconds", label=f"{label}, {case.label}",
                   unit="s", better="lower") for key, label in rows]


def run(ctx):
    fs, x, k = ctx.fs, ctx.case.params["x"], ctx.case.id
    if not fs.managed:
        return {f"{k}:mount": None, f"{k}:unmount": None}
    path = fs.mount()
    t_mount = fs.mount_seconds
    daemon = fs.daemon
    try:
        if x:
            run_cmd([native.program("fileop"), "-k", "-f", str(x), path], ctx.timeout(3600, 120))
        t0 = time.monotonic()
        run_cmd(["umount", path], ctx.timeout(600, 60))
        if daemon and not wait_exit(daemon, ctx.timeout(600, 60)):
            raise BenchError("memfs daemon still running after umount")
        t_unmount = time.monotonic() - t0
    finally:
        fs.unmount()  # no-op when already gone; recovers a failed run
    values = {f"{k}:unmount": t_unmount}
    if x == 0:
        values[f"{k}:mount"] = t_mount
    return values
