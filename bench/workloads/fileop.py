"""fileop-style operation rates (IOzone's fileop, as used in the FUSE memfs
study) and memory per file.

Owns: the file counts and sizes, and sampling memory once all files exist.
bench/native/fileop.c does the operations: X top directories, X*X leaf
directories, X^3 files (X = 50, 80, 100 give the study's 125,000, 512,000
and 1,000,000 files), empty as in the study (`fileop -s 0`), plus the 1-byte
variant (at 125,000 files, to keep a full run near an hour) and 47^3 = 103,823
files of 1 KiB for the memory target (100,000 files of 1 KiB).
"""
import json
import select
import subprocess
import time

import native
from filesystems import memory_per_file
from proc import BenchError, kill_group
from runner import Case, Metric

NAME = "fileop"
TITLE = "fileop-style rates and memory per file"
DESCRIPTION = """
Our C re-implementation (bench/native/fileop.c) of IOzone fileop's passes:
mkdir/rmdir of the X + X^2 directories, then for the X^3 files create (open
O_CREAT) / write / close, stat, access, chmod, readdir (one op = opendir, read
all, closedir of a leaf directory), link and unlink of a second name,
open+close and read, and delete (unlink). Every call is timed on its own;
operations per second, higher is better.

Memory is sampled after the create pass, against a sample taken on the fresh
mount just before: for memfs the daemon's RSS growth plus the kernel's slab
growth (FUSE inodes and dentries) is "all-in"; for tmpfs its Shmem growth (data
pages) plus slab growth. File data memfs leaves in the kernel's page cache is
not counted (it is reclaimable, and the system-wide page cache counter is
swamped by other activity). Slab and Shmem are system-wide counters too, so
other activity on the machine shows up in them; the larger cases dilute it.
"""

OPS = ["mkdir", "rmdir", "create", "read", "write", "close", "stat", "access", "chmod",
       "readdir", "link", "unlink", "delete", "open+close"]
MEMORY_ROWS = [("allin", "all-in", True), ("rss", "memfs daemon RSS", False),
               ("slab", "kernel slab", False), ("shmem", "tmpfs Shmem", False)]

FULL = [(50, 0), (80, 0), (100, 0), (50, 1), (47, 1024)]
QUICK = [(10, 0), (16, 0), (10, 1), (22, 1024)]


def _label(x, size):
    what = {0: "empty files", 1: "1-byte files", 1024: "1 KiB files"}[size]
    return f"{x ** 3:,} {what}"


def cases(cfg):
    return [Case(id=f"f{x}s{size}", label=_label(x, size), params={"x": x, "size": size})
            for x, size in (QUICK if cfg.quick else FULL)]


def metrics(case):
    ops = [Metric(key=f"{case.id}:{op}", table=f"{case.label} (operations/s)", label=op,
                  unit="ops/s", better="higher") for op in OPS]
    mem = [Metric(key=f"{case.id}:mem_{key}", table="Memory per file (KiB)",
                  label=f"{case.label}: {label}", unit="KiB/file", better="lower",
                  ratio=ratio, chart=False, short=case.label)
           for key, label, ratio in MEMORY_ROWS]
    return ops + mem


def run(ctx):
    p = ctx.case.params
    files = p["x"] ** 3
    timeout = ctx.timeout(3600, 120)
    deadline = time.monotonic() + timeout
    before = ctx.fs.memory()
    if ctx.fs.is_memfs and before["RSS"] is None:
        raise BenchError("memfs daemon not found in /proc: cannot measure its memory")
    cmd = [native.program("fileop"), "-f", str(p["x"]), "-s", str(p["size"]), "-p", ctx.dir]
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)
    try:
        line = _readline(proc, deadline)
        if line.strip() != b"CREATED":
            raise BenchError(f"fileop: expected CREATED, got {line!r}: "
                             f"{proc.stderr.read().decode(errors='replace')[-400:]}")
        after = ctx.fs.memory()
        out, err = proc.communicate(b"go\n", timeout=max(1, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        kill_group(proc)
        raise BenchError(f"fileop timed out after {timeout}s") from None
    except BenchError:
        kill_group(proc)
        raise
    if proc.returncode != 0:
        raise BenchError(f"fileop failed (exit {proc.returncode}): "
                         f"{err.decode(errors='replace')[-400:]}")
    rates = json.loads(out)
    values = {f"{ctx.case.id}:{op}": rates[op] for op in OPS}
    mem = memory_per_file(ctx.fs, before, after, files)
    values.update({f"{ctx.case.id}:mem_{key}": mem[key] for key, _, _ in MEMORY_ROWS})
    values[f"{ctx.case.id}:rss_total_kib"] = mem["rss_total_kib"]
    return values


def _readline(proc, deadline):
    """One line from proc's stdout, or BenchError at the deadline."""
    ready, _, _ = select.select([proc.stdout], [], [], max(0.0, deadline - time.monotonic()))
    if not ready:
        raise BenchError("fileop: no progress before the time limit")
    return proc.stdout.readline()
