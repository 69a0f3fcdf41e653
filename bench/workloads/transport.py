"""FUSE transport: memfs over io_uring (`uring=on`) and over /dev/fuse
(`uring=off`), each against kernel tmpfs in the same run, on what the
transport sets: metadata calls that are mostly round trips, a lone request's
round trip, and Postmark.

Owns: the cases, mounting its own instances (memfs twice, once per transport,
and tmpfs, each fresh for every case and always unmounted, MANAGES_MOUNTS),
turning the fuse module's enable_uring on for the io_uring runs and putting
it back after each, checking that each memfs run used the transport its row
names (MOUNT/.memfs/stats/transport), and reading bench/native/transport.c's
JSON. scripts/bench-transport.py runs the same program by hand.
"""
import contextlib
import json
import os
import sys
import time

import native
from filesystems import FileSystem
from proc import BenchError
from proc import run as run_cmd
from runner import Case, Metric, note
from workloads.postmark import FILES as POSTMARK_FILES
from workloads.postmark import timed as postmark_timed

NAME = "transport"
TITLE = "FUSE transport: memfs over io_uring and over /dev/fuse against tmpfs"
DESCRIPTION = """
Each memfs run mounts memfs twice, one after the other, each time fresh:
`uring=on` (FUSE over io_uring: a queue per CPU, a request served on the CPU
that made it; the fuse module's enable_uring is turned on for the run and put
back after it) and `uring=off` (the /dev/fuse path, its workers polling for a
while before they sleep, `poll_us`). Their order alternates between
repetitions; the tmpfs run follows them. Rows are per transport and the tmpfs
column repeats its one run; ratios are tmpfs µs / memfs µs and memfs tx/s /
tmpfs tx/s (higher is better). A run whose stats/transport does not show the
transport its row names fails; where the kernel has no FUSE over io_uring the
io_uring rows are empty and a note says why.
Case 1 (bench/native/transport.c, one C program so that Python's own cost
does not hide tmpfs's microseconds): N creates (open O_CREAT|O_EXCL + close)
in 20 directories, N stats of those names (answered from the kernel's caches),
N/4 stats each right after a write to the file (one GETATTR each), N open +
read(4 KiB) + close of one small file, N fgetxattr of a missing name on an
open file (one lone request each: the round trip), N unlinks.
Case 2 (full mode only): Postmark in the MemFS paper's settings (10,000 files
of 10,000-15,000 bytes, 100 subdirectories), the transaction phase timed.
"""

MANAGES_MOUNTS = True
VARIANTS = ("uring", "devfuse")
OPTION = {"uring": "on", "devfuse": "off"}
SHOWN = {"uring": "io_uring", "devfuse": "/dev/fuse"}
STATS_NAME = {"uring": "io_uring", "devfuse": "dev_fuse"}  # stats/transport's first line
URING_PARAM = "/sys/module/fuse/parameters/enable_uring"
OPS = [("create", "create (open O_CREAT|O_EXCL + close)", "create"),
       ("stat", "stat of a cached name", "stat"),
       ("stat_after_write", "stat right after a write (GETATTR)", "stat after write"),
       ("open_read_close", "open + read 4 KiB + close of a cached file", "open+read+close"),
       ("round_trip", "fgetxattr of a missing name (one request: the round trip)", "round trip"),
       ("unlink", "unlink", "unlink")]

# Full: 3 repetitions in about 6 minutes on 2 vCPUs (quick: under a minute).
FULL = {"files": 20000, "postmark_transactions": 50000}
QUICK = {"files": 2000, "postmark_transactions": None}


def _note(text):
    """A note on what this run could not measure (runner.note)."""
    note(sys.modules[__name__], text)


def cases(cfg):
    p = QUICK if cfg.quick else FULL
    out = [Case(id="ops", label=f"{p['files']:,} files", params={"kind": "ops", "files": p["files"]})]
    if p["postmark_transactions"]:
        out.append(Case(id="postmark", label="Postmark, MemFS paper settings",
                        params={"kind": "postmark", "transactions": p["postmark_transactions"]}))
    return out


def _rows(case, table, rows, unit, better):
    """One Metric per (row, transport); rows = [(name, label, short)]."""
    return [Metric(key=f"{case.id}:{v}_{name}", table=table, label=f"{label}, {SHOWN[v]}",
                   unit=unit, better=better, chart=True, short=f"{short} ({SHOWN[v]})")
            for name, label, short in rows for v in VARIANTS]


def metrics(case):
    p = case.params
    if p["kind"] == "ops":
        return _rows(case, f"Case 1: metadata calls, {p['files']:,} files in 20 directories "
                     "(µs per call)", OPS, "µs", "lower")
    table = (f"Case 2: Postmark, {POSTMARK_FILES:,} files of 10,000-15,000 bytes in 100 "
             "subdirectories (transactions/s)")
    return _rows(case, table, [("tps", f"{p['transactions']:,} transactions", "Postmark")],
                 "tx/s", "higher")


def run(ctx):
    if not ctx.fs.managed:
        return {}  # an existing directory has no transport to choose: not applicable
    task = {"ops": _ops, "postmark": _postmark}[ctx.case.params["kind"]]
    k = ctx.case.id
    values = {}
    if ctx.fs.kind != "memfs":
        with _mounted(ctx, None) as fs:
            figures = task(ctx, fs)
        for v in VARIANTS:  # the one reference run stands beside both transports
            values.update({f"{k}:{v}_{n}": x for n, x in figures.items()})
        return values
    order = VARIANTS if ctx.rep % 2 == 0 else VARIANTS[::-1]
    for v in order:
        with _uring_param(v) as why_not:
            if why_not:
                _note(f"no FUSE over io_uring here ({why_not}): its rows are empty")
                continue
            with _mounted(ctx, v) as fs:
                _check_transport(fs, v)
                figures = task(ctx, fs)
        values.update({f"{k}:{v}_{n}": x for n, x in figures.items()})
    return values


@contextlib.contextmanager
def _uring_param(variant):
    """For the io_uring runs, enable_uring on meanwhile (put back after);
    yields None, or why FUSE over io_uring cannot be had here."""
    if variant != "uring":
        yield None
        return
    try:
        with open(URING_PARAM) as f:
            before = f.read().strip()
    except OSError as e:
        yield f"{URING_PARAM}: {e.strerror}"
        return
    try:
        with open(URING_PARAM, "w") as f:
            f.write("Y\n")
    except OSError as e:
        yield f"cannot write {URING_PARAM}: {e.strerror}"
        return
    try:
        yield None
    finally:
        with open(URING_PARAM, "w") as f:
            f.write(before + "\n")


@contextlib.contextmanager
def _mounted(ctx, variant):
    """A fresh mount on the suite's mount point for this file system: memfs
    with the suite's options and this transport (None: tmpfs). Always unmounted."""
    if variant is None:
        fs = FileSystem(ctx.fs.name, "tmpfs", ctx.fs.options, ctx.fs.path)
    else:
        keep = [o for o in ctx.fs.options.split(",") if o and o.split("=")[0] != "uring"]
        fs = FileSystem(ctx.fs.name, "memfs", ",".join(keep + [f"uring={OPTION[variant]}"]),
                        ctx.fs.path)
    try:
        fs.mount()
        yield fs
    finally:
        fs.unmount()


def _check_transport(fs, variant):
    """A run only counts if memfs really used the transport its row names.
    The io_uring queues register just after the mount is live (requests go
    over /dev/fuse until the kernel has them all), so `io_uring_starting`
    is waited out, for up to 5 s (a CI run once read it 0.1 s after mount)."""
    path = os.path.join(fs.path, ".memfs", "stats", "transport")
    deadline = time.monotonic() + 5
    while True:
        try:
            with open(path) as f:
                first = f.readline().strip()
        except OSError as e:
            raise BenchError(f"{path}: {e.strerror}") from None
        if first != "transport: io_uring_starting" or time.monotonic() > deadline:
            break
        time.sleep(0.01)
    if first != f"transport: {STATS_NAME[variant]}":
        raise BenchError(f"mounted with uring={OPTION[variant]} but stats/transport says {first!r}")


def _ops(ctx, fs):
    work = os.path.join(fs.path, "transport")
    os.mkdir(work)
    out = run_cmd([native.program("transport"), work, str(ctx.case.params["files"])],
                  ctx.timeout(1800, 180)).stdout.decode()
    try:
        figures = json.loads(out)
    except ValueError:
        raise BenchError(f"transport printed no JSON: {out[-300:]!r}") from None
    missing = [name for name, _, _ in OPS if name not in figures]
    if missing:
        raise BenchError(f"transport printed no figure for {', '.join(missing)}")
    return figures


def _postmark(ctx, fs):
    r = postmark_timed(fs.path, 100, ctx.case.params["transactions"], ctx.cfg.scratch,
                       ctx.timeout(3600, 300))
    return {"tps": r["tps"]}
