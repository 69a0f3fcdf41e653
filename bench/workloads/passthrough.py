"""FUSE passthrough: memfs with `passthrough=on` and with `passthrough=off`,
each against kernel tmpfs in the same run, on what passthrough changes: bulk
data (1 MiB blocks), 4 KiB random reads (fio, buffered and O_DIRECT), the
RedHawk O_DIRECT lseek+write / lseek+read loop, the memory held per byte
stored, and the price of answering every OPEN (open+read+close of a small
cached file, creates, Postmark) and what it does to real work (the devwork
workload's builds and sort with each setting).

Owns: the cases and their sizes, mounting its own instances (memfs twice, with
passthrough=on and =off, and tmpfs, each fresh for every case and always
unmounted, MANAGES_MOUNTS), a small C program compiled at run time into the
run's scratch directory that does the timed I/O loops, reading fio's JSON,
/proc/meminfo growth, MOUNT/.memfs/stats/{passthrough,ops}, and noting page
cache drops by other processes during a run (/proc/vmstat drop_pagecache).
A memfs run measures both passthrough settings (their order alternating
between repetitions), so each table has a row per setting and the tmpfs
column repeats the one tmpfs run beside them.
"""
import contextlib
import dataclasses
import hashlib
import json
import os
import sys
import time

from filesystems import FileSystem, daemon_rss
from proc import BenchError
from proc import drop_caches as _drop_all
from proc import run as run_cmd
from runner import Case, Metric, note
from sysinfo import meminfo
from workloads import devwork
from workloads.fio_bulk import fio_job
from workloads.postmark import FILES as POSTMARK_FILES
from workloads.postmark import timed as postmark_timed

NAME = "passthrough"
TITLE = "FUSE passthrough: memfs passthrough=on and off against tmpfs"
DESCRIPTION = """
Each memfs run mounts memfs twice, one after the other, each time fresh:
`passthrough=on` (a file of `passthrough_min=`, 1 MiB by default, or more
keeps its bytes in a kernel memory file and its opens are answered with
FOPEN_PASSTHROUGH, so its reads, writes and mmap go straight to the kernel;
memfs answers every OPEN) and `passthrough=off` (bytes in memfs's heap,
reads and writes that miss the page cache are FUSE requests; OPEN is not
answered, so an open costs no round trip). Their order alternates between
repetitions; the tmpfs run follows them. Rows are per setting and the tmpfs
column repeats its one run; ratios are memfs over tmpfs for rates, tmpfs over
memfs for times and memory (higher is better). Timed loops are a small C
program compiled at run time; data are a fixed pseudo-random block, never
zeros. A run whose stats/passthrough does not show the setting its row names
(or, with passthrough=on, no passthrough open of the large file) fails.

Case 1: a file written in 1 MiB blocks as a fresh file (open, writes, fsync
and close timed), overwritten in place (opened without O_TRUNC), read
sequentially after `sync; echo 3 > /proc/sys/vm/drop_caches` (cold) and at
once again (warm); MB/s = 10^6 bytes/s. First writes of fresh memory vary a
lot from run to run on every file system here, tmpfs included (the host
backs a guest page lazily on its first touch; see MEASURED.md): judge the
data path by the overwrites. With passthrough=on the fresh file's creating
open is a passthrough open already (`passthrough_create=on`, the default):
its first write goes to the kernel memory file. (Before that option the
first write went through memfs, and the first overwrite shared the machine
with the drop of the page cache it left.)

Case 2: fio, psync, one job, 4 KiB random reads for a fixed time on a
laid-out file: buffered (page cache dropped first, fio's default
invalidate) and O_DIRECT.

Case 3: the RedHawk RAM-disk paper's loop (seed 004): an existing 8 MiB file
opened with O_DIRECT; N × (lseek to 0 + write of one 8 MiB buffer) timed,
then N × (lseek to 0 + read), as the paper times them, then the data
compared.

Case 4: after drop_caches, the growth of `Cached + AnonPages` in
/proc/meminfo 0.5 s after the bulk file's write is closed (before any
reopen) and again 0.5 s after it is read back, over the bytes stored (1.0 = held once). That figure
is system-wide, so anything else running on the host (a build) moves it;
beside it the file system's own after the read-back: growth of Shmem
(tmpfs's pages, memfs's memory files) + the memfs daemon's RSS + the page
cache over the memfs file (mincore; passthrough=off only: a mapping of a
passthrough file is the memory file, so page cache over a passthrough=on
file is seen only by the system-wide figure). Then the file is removed
and, once the own figure stops falling (memfs hands a removed file's heap
back after a quiet second, src/trim.rs), what is still grown is shown, with
how long that took.

Case 5: a cached 4 KiB file (below passthrough_min, so never passthrough)
opened, read (4 KiB) and closed in a loop, after a tenth as many untimed;
creates of empty files (open O_CREAT|O_EXCL + close) in 100 directories;
FUSE requests per operation from `.memfs/stats/ops` (tmpfs has none).

Case 6 (full mode only): Postmark in the MemFS paper's settings (10,000 files
of 10,000-15,000 bytes, 100 subdirectories), the transaction phase timed as
in the Postmark workload.

Case 7: the devwork workload's tasks with each setting (its C build, its
sort spilling to temporary files, and in full mode its cargo build), each in
a fresh directory of the mount with TMPDIR there too: what passthrough
(and, with it, new files passing through from their creating open,
`passthrough_create=on`) does to real work.
"""

MANAGES_MOUNTS = True
MiB = 1 << 20
GiB = 1 << 30
BLOCK = MiB
SMALL = 4096
ODIRECT_BYTES = 8 * MiB
CREATE_DIRS = 100
VARIANTS = ("on", "off")
# After an rm, memory counts as settled once it moved less than SETTLED_SHARE of
# the bytes stored (at least SETTLED_MIN_KIB: Shmem moves by a few MiB on its own
# here) over SETTLE_SAMPLES samples SETTLE_STEP seconds apart (given up after
# SETTLE_TIMEOUT). memfs gives freed heap back only after a quiet second
# (src/trim.rs), in steps seen 1.5 s apart, so the window is 3 s.
SETTLED_SHARE = 0.02
SETTLED_MIN_KIB = 4096
SETTLE_SAMPLES = 13
SETTLE_STEP = 0.25
SETTLE_TIMEOUT = 60.0

_own_drops = 0  # drop_caches done by this workload


def _note(text):
    """A note on what disturbed this run (runner.note)."""
    note(sys.modules[__name__], text)


# Full: the whole workload, 3 repetitions, in about 7 minutes on 2 vCPUs (quick: 45 s).
FULL = {"bulk": GiB, "rand_seconds": 10, "odirect_iterations": 200, "openread": 200_000,
        "creates": 100_000, "postmark_transactions": 50_000, "build": devwork.FULL}
QUICK = {"bulk": 256 * MiB, "rand_seconds": 3, "odirect_iterations": 20, "openread": 20_000,
         "creates": 10_000, "postmark_transactions": None, "build": devwork.QUICK}
# The build tasks, as the devwork workload runs them.
BUILD_TASKS = (("cc", "C build, {cc_files} files, make -j<cores>"),
               ("sort", "sort -S 32M of {sort_mib} MiB (temporary files in the mount)"),
               ("cargo", "cargo build --release of memfs"))


# -- cases and metrics ------------------------------------------------------------

def _mib(n):
    return f"{n / MiB:,.0f} MiB"


def cases(cfg):
    p = QUICK if cfg.quick else FULL
    size = p["bulk"]
    out = [
        Case(id="bulk", label=f"{_mib(size)} file, 1 MiB blocks",
             params={"kind": "bulk", "bytes": size}),
        Case(id="rand", label=f"fio 4 KiB random reads, {_mib(size)} file",
             params={"kind": "rand", "bytes": size, "seconds": p["rand_seconds"]}),
        Case(id="odirect", label=f"O_DIRECT loop, {_mib(ODIRECT_BYTES)}",
             params={"kind": "odirect", "bytes": ODIRECT_BYTES,
                     "iterations": p["odirect_iterations"]}),
        Case(id="memory", label=f"memory held for {_mib(size)}",
             params={"kind": "memory", "bytes": size}),
        Case(id="roundtrip", label="open+read+close and creates",
             params={"kind": "roundtrip", "openread": p["openread"], "creates": p["creates"]}),
    ]
    if p["postmark_transactions"]:  # full mode only: quick stays well under a minute
        out.append(Case(id="postmark", label="Postmark, MemFS paper settings",
                        params={"kind": "postmark",
                                "transactions": p["postmark_transactions"]}))
    out.append(Case(id="build", label="builds and sort", params={"kind": "build", **p["build"]}))
    return out


def _rows(case, table, rows, unit, better, ratio=True, chart=False):
    """One Metric per (row, passthrough setting); rows = [(name, label, short)]."""
    return [Metric(key=f"{case.id}:{v}_{name}", table=table, label=f"{label}, passthrough={v}",
                   unit=unit, better=better, ratio=ratio, chart=chart,
                   short=f"{short} ({v})" if short else "")
            for name, label, short in rows for v in VARIANTS]


def metrics(case):
    p = case.params
    kind = p["kind"]
    if kind == "bulk":
        return _rows(case, f"Case 1: {_mib(p['bytes'])} file in 1 MiB blocks (MB/s)", [
            ("first_write", "first write (fresh file; varies with host page faults)",
             "first write"),
            ("overwrite", "overwrite (same file, not truncated; first reopen)", "overwrite"),
            ("overwrite2", "overwrite again", "overwrite again"),
            ("read_cold", "sequential read after drop_caches", "cold read"),
            ("read_warm", "sequential read, warm", "warm read")],
            "MB/s", "higher", chart=True)
    if kind == "rand":
        return _rows(case, f"Case 2: fio 4 KiB random reads, {_mib(p['bytes'])} file, "
                     f"{p['seconds']} s (IOPS)", [
                         ("buffered_iops", "buffered (page cache dropped first)", "rand buffered"),
                         ("direct_iops", "O_DIRECT", "rand O_DIRECT")],
                     "IOPS", "higher", chart=True)
    if kind == "odirect":
        title = (f"Case 3: RedHawk O_DIRECT loop, one {_mib(p['bytes'])} buffer, "
                 f"{p['iterations']} iterations")
        return (_rows(case, f"{title} (µs per call pair)", [
                    ("write_us", "lseek + write", ""), ("read_us", "lseek + read", "")],
                      "µs", "lower")
                + _rows(case, f"{title} (MB/s)", [
                    ("write_mbs", "lseek + write", "O_DIRECT write"),
                    ("read_mbs", "lseek + read", "O_DIRECT read")],
                        "MB/s", "higher", chart=True))
    if kind == "memory":
        stored = _mib(p["bytes"])
        return (_rows(case, f"Case 4: memory held per byte stored, {stored} written and "
                      "read back (growth / bytes stored, ×)", [
                          ("write_per_byte", "after the write, before any reopen: Cached + "
                           "AnonPages, system-wide", ""),
                          ("per_byte", "after the read-back: Cached + AnonPages, system-wide",
                           ""),
                          ("own_per_byte", "after the read-back: own, Shmem + daemon RSS + the "
                           "file's page cache", "")],
                      "×", "lower")
                + _rows(case, f"Case 4: memory, {stored} written and read back (MiB)", [
                    ("write_mib", "growth of Cached + AnonPages after the write, system-wide",
                     ""),
                    ("grown_mib", "growth of Cached + AnonPages after the read-back, system-wide",
                     ""),
                    ("own_mib", "growth of own after the read-back: Shmem + daemon RSS + the "
                     "file's page cache", ""),
                    ("rss_mib", "of which memfs daemon RSS", ""),
                    ("left_mib", "still grown after rm, Cached + AnonPages", ""),
                    ("left_own_mib", "still grown after rm, own: Shmem + daemon RSS", "")],
                        "MiB", "lower", ratio=False)
                + _rows(case, "Case 4: seconds after rm until the own memory stopped falling "
                        f"(moved < {SETTLED_SHARE:.0%} of {stored} in "
                        f"{(SETTLE_SAMPLES - 1) * SETTLE_STEP:g} s; s)", [
                            ("left_seconds", "rm of the file", "")],
                        "s", "lower", ratio=False))
    if kind == "roundtrip":
        return (_rows(case, f"Case 5: open + read(4 KiB) + close of a cached 4 KiB file, "
                      f"{p['openread']:,} iterations (µs per iteration)", [
                          ("openread_us", "open + read + close", "open+read+close")],
                      "µs", "lower", chart=True)
                + _rows(case, f"Case 5: creates of {p['creates']:,} empty files in "
                        f"{CREATE_DIRS} directories (µs per file)", [
                            ("create_us", "open (O_CREAT, O_EXCL) + close", "create")],
                        "µs", "lower", chart=True)
                + _rows(case, "Case 5: FUSE requests per operation (.memfs/stats/ops)", [
                    ("openread_requests", "open + read + close", ""),
                    ("create_requests", "create", "")],
                        "requests", "lower", ratio=False))
    if kind == "build":
        return _rows(case, "Case 7: builds and sort, as the devwork workload runs them (seconds)",
                     [(task, label.format(**p), task) for task, label in _build_tasks(p)],
                     "s", "lower", chart=True)
    table = (f"Case 6: Postmark, {POSTMARK_FILES:,} files of 10,000-15,000 bytes in 100 "
             "subdirectories (transactions/s)")
    return _rows(case, table, [("tps", f"{p['transactions']:,} transactions", "Postmark")],
                 "tx/s", "higher", chart=True)


# -- one run ------------------------------------------------------------------------

def run(ctx):
    if not ctx.fs.managed:
        return {}  # an existing directory has no passthrough setting: not applicable
    task = {"bulk": _bulk, "rand": _rand, "odirect": _odirect, "memory": _memory,
            "roundtrip": _roundtrip, "postmark": _postmark, "build": _build}[ctx.case.params["kind"]]
    k = ctx.case.id
    with _foreign_drops(ctx) as values:
        values.update(_run_settings(ctx, task, k))
    return values


def _run_settings(ctx, task, k):
    """tmpfs once, or memfs with each passthrough setting; {key: value}."""
    values = {}
    if ctx.fs.kind != "memfs":
        with _mounted(ctx, None) as fs:
            figures = task(ctx, fs)
        for v in VARIANTS:  # the one reference run stands beside both settings
            values.update({f"{k}:{v}_{n}": x for n, x in figures.items()})
        return values
    order = VARIANTS if ctx.rep % 2 == 0 else VARIANTS[::-1]
    for v in order:
        with _mounted(ctx, v) as fs:
            figures = task(ctx, fs)
            figures.update({f"stat_{n}": x for n, x in _stats(fs.path, "passthrough").items()})
            _check_setting(ctx, v, figures)
        values.update({f"{k}:{v}_{n}": x for n, x in figures.items()})
    return values


@contextlib.contextmanager
def _foreign_drops(ctx):
    """Yields the run's values; adds to them (and notes) how many times another
    process dropped the page cache meanwhile (/proc/vmstat drop_pagecache less
    our own): memfs passthrough=off's warm reads and memory depend on its page
    cache."""
    first, ours = _vmstat_drops(), _own_drops
    values = {}
    yield values
    foreign = _vmstat_drops() - first - (_own_drops - ours)
    values[f"{ctx.case.id}:foreign_drop_caches"] = foreign
    if foreign:
        _note(f"another process dropped the page cache {foreign} time(s) during case "
              f"{ctx.case.id} (rep {ctx.rep + 1}) on {ctx.fs.name}: figures that rely on "
              "the page cache (memfs passthrough=off's warm reads and memory) are suspect")


def _drop_caches():
    global _own_drops
    _drop_all()
    _own_drops += 1


def _vmstat_drops():
    with open("/proc/vmstat") as f:
        for line in f:
            if line.startswith("drop_pagecache "):
                return int(line.split()[1])
    return 0


@contextlib.contextmanager
def _mounted(ctx, passthrough):
    """A fresh mount on the suite's mount point for this file system: memfs with
    the suite's options and passthrough= (None: tmpfs). Always unmounted."""
    if passthrough is None:
        fs = FileSystem(ctx.fs.name, "tmpfs", ctx.fs.options, ctx.fs.path)
    else:
        fs = FileSystem(ctx.fs.name, "memfs", _memfs_options(ctx.fs.options, passthrough),
                        ctx.fs.path)
    try:
        fs.mount()
        if fs.is_memfs and fs.daemon is None:
            raise BenchError("memfs mounted but its daemon was not found in /proc")
        yield fs
    finally:
        fs.unmount()


def _memfs_options(base, passthrough):
    """The suite's memfs options with this workload's passthrough= instead of any given."""
    keep = [o for o in base.split(",") if o and o.split("=")[0] != "passthrough"]
    return ",".join(keep + [f"passthrough={passthrough}"])


def _check_setting(ctx, variant, figures):
    """A run only counts if memfs really ran the setting its row names."""
    mode = figures.get("stat_passthrough")
    if mode is None:
        raise BenchError(".memfs/stats/passthrough is missing or has no 'passthrough' line")
    if mode != (variant == "on"):
        raise BenchError(f"mounted with passthrough={variant} but stats/passthrough says "
                         f"passthrough: {mode}")
    large = ctx.case.params["kind"] in ("bulk", "rand", "odirect", "memory")
    if variant == "on" and large and not figures.get("stat_passthrough_opens_total"):
        raise BenchError("passthrough=on, but no open of the large file was a passthrough "
                         f"open (stats/passthrough: {figures})")


# -- the cases ------------------------------------------------------------------------

def _bulk(ctx, fs):
    p = ctx.case.params
    path = os.path.join(fs.path, "bulk.dat")
    t = ctx.timeout(900, 120)
    out = {"first_write": _mbs(_io(ctx, ["write", path, p["bytes"], BLOCK, "trunc"], t),
                               p["bytes"])}
    for name in ("overwrite", "overwrite2"):
        out[name] = _mbs(_io(ctx, ["write", path, p["bytes"], BLOCK, "notrunc"], t), p["bytes"])
    _drop_caches()
    out["read_cold"] = _mbs(_io(ctx, ["read", path, BLOCK], t), p["bytes"])
    out["read_warm"] = _mbs(_io(ctx, ["read", path, BLOCK], t), p["bytes"])
    return out


def _rand(ctx, fs):
    p = ctx.case.params
    path = os.path.join(fs.path, "rand.dat")
    _io(ctx, ["write", path, p["bytes"], BLOCK, "trunc"], ctx.timeout(900, 120))
    out = {}
    for name, extra in (("buffered", []), ("direct", ["--direct=1"])):
        _drop_caches()
        job = _fio(ctx, name, path, p, extra)
        out[f"{name}_iops"] = job["read"]["iops"]
        out[f"{name}_mean_us"] = job["read"]["lat_ns"]["mean"] / 1000
        if not out[f"{name}_iops"] > 0:
            raise BenchError(f"fio reported no reads for {name}")
    return out


def _odirect(ctx, fs):
    p = ctx.case.params
    path = os.path.join(fs.path, "odirect.dat")
    r = _io(ctx, ["odirect", path, p["bytes"], p["iterations"]], ctx.timeout(900, 120))
    n, moved = p["iterations"], p["bytes"] * p["iterations"]
    return {"write_us": r["write_seconds"] / n * 1e6, "read_us": r["read_seconds"] / n * 1e6,
            "write_mbs": moved / 1e6 / r["write_seconds"],
            "read_mbs": moved / 1e6 / r["read_seconds"]}


def _memory(ctx, fs):
    p = ctx.case.params
    path = os.path.join(fs.path, "memory.dat")
    t = ctx.timeout(900, 120)
    _drop_caches()
    time.sleep(0.5)
    before = _held(fs)
    _io(ctx, ["write", path, p["bytes"], BLOCK, "trunc"], t)
    time.sleep(0.5)
    written = _grown(before, _held(fs))
    _io(ctx, ["read", path, BLOCK], t)
    time.sleep(0.5)
    grown = _grown(before, _held(fs))
    grown["page_cache"] = _page_cache_kib(ctx, fs, path, t)
    grown["own"] += grown["page_cache"]
    os.unlink(path)
    run_cmd(["sync"], t)
    left, seconds = _settled(fs, before, max(SETTLED_MIN_KIB, SETTLED_SHARE * p["bytes"] / 1024))
    return _memory_figures(p["bytes"], written, grown, left, seconds)


def _memory_figures(stored, written, grown, left, seconds):
    """Case 4's rows from the growths (KiB) after the write, after the read-back
    and after the rm."""
    out = {"write_per_byte": written["held"] * 1024 / stored,
           "write_mib": written["held"] / 1024,
           "per_byte": grown["held"] * 1024 / stored, "own_per_byte": grown["own"] * 1024 / stored,
           "grown_mib": grown["held"] / 1024, "own_mib": grown["own"] / 1024,
           "rss_mib": None if grown["rss"] is None else grown["rss"] / 1024,
           "left_mib": left["held"] / 1024, "left_own_mib": left["own"] / 1024,
           "left_seconds": None if seconds is None else round(seconds, 2)}
    out.update({f"written_{n}_kib": v for n, v in written.items()})
    out.update({f"grown_{n}_kib": v for n, v in grown.items()})
    out.update({f"left_{n}_kib": v for n, v in left.items()})
    return out


def _roundtrip(ctx, fs):
    p = ctx.case.params
    t = ctx.timeout(1200, 120)
    small = os.path.join(fs.path, "small")
    _io(ctx, ["write", small, SMALL, SMALL, "trunc"], t)
    _io(ctx, ["read", small, SMALL], t)  # cached from here on
    before = _requests(fs)
    r = _io(ctx, ["openread", small, p["openread"]], t)
    after = _requests(fs)
    out = {"openread_us": r["seconds"] / p["openread"] * 1e6,
           "openread_requests": _per(before, after, r["iterations"])}
    tree = os.path.join(fs.path, "creates")
    os.mkdir(tree)
    for i in range(CREATE_DIRS):
        os.mkdir(os.path.join(tree, f"d{i:03d}"))
    before = _requests(fs)
    r = _io(ctx, ["create", tree, p["creates"], CREATE_DIRS], t)
    after = _requests(fs)
    out["create_us"] = r["seconds"] / p["creates"] * 1e6
    out["create_requests"] = _per(before, after, p["creates"])
    return out


def _postmark(ctx, fs):
    r = postmark_timed(fs.path, 100, ctx.case.params["transactions"], ctx.cfg.scratch,
                       ctx.timeout(3600, 300))
    return {"tps": r["tps"], "total_seconds": r["total_seconds"]}


def _build_tasks(p):
    return [(task, label) for task, label in BUILD_TASKS if task != "cargo" or p["cargo"]]


def _build(ctx, fs):
    """The devwork workload's tasks in a fresh directory of `fs`: seconds each."""
    p = ctx.case.params
    out = {}
    for task, _ in _build_tasks(p):
        work = os.path.join(fs.path, f"build-{task}")
        os.makedirs(os.path.join(work, "tmp"))
        sub = dataclasses.replace(ctx, dir=work, case=Case(id=task, label=task, params=p))
        env = dict(os.environ, TMPDIR=os.path.join(work, "tmp"), LC_ALL="C")
        out[task] = {"cc": devwork.cc, "sort": devwork.sort, "cargo": devwork.cargo}[task](sub, env)
        run_cmd(["rm", "-rf", work], ctx.timeout(600, 120))
    return out


# -- measuring ------------------------------------------------------------------------

def _mbs(result, nbytes):
    if result["bytes"] != nbytes:
        raise BenchError(f"moved {result['bytes']} bytes, expected {nbytes}")
    return nbytes / 1e6 / result["seconds"]


def _held(fs):
    """KiB: held = Cached + AnonPages (system-wide, any process's growth counts);
    own = Shmem + the memfs daemon's RSS (what this file system holds apart from
    the page cache over its files: tmpfs's and the memory files' pages, memfs's
    heap); their parts."""
    info = meminfo()
    rss = daemon_rss(fs.daemon) if fs.is_memfs else None
    return {"held": info["Cached"] + info["AnonPages"], "own": info["Shmem"] + (rss or 0),
            "cached": info["Cached"], "anon": info["AnonPages"], "shmem": info["Shmem"],
            "rss": rss}


def _page_cache_kib(ctx, fs, path, timeout):
    """KiB of kernel page cache over a memfs file (mincore through a mapping). Not
    for tmpfs (its page cache is its storage, in Shmem) nor passthrough=on (a
    mapping of a passthrough file maps the memory file, already in Shmem)."""
    if not fs.is_memfs or "passthrough=on" in fs.options.split(","):
        return 0
    r = _io(ctx, ["resident", path], timeout)
    return r["resident"] * os.sysconf("SC_PAGE_SIZE") // 1024


def _settled(fs, before, tolerance_kib):
    """After an rm: (growth since before, seconds after the call until the file
    system's own memory stopped falling). memfs returns a removed file's heap to
    the system over seconds."""
    t0 = time.monotonic()
    samples = []
    while True:
        samples.append((time.monotonic() - t0, _grown(before, _held(fs))))
        window = [g["own"] for _, g in samples[-SETTLE_SAMPLES:]]
        if len(window) == SETTLE_SAMPLES and max(window) - min(window) < tolerance_kib:
            return samples[-1][1], samples[-SETTLE_SAMPLES][0]
        if samples[-1][0] > SETTLE_TIMEOUT:
            return samples[-1][1], None
        time.sleep(SETTLE_STEP)


def _grown(before, after):
    return {n: None if before[n] is None or after[n] is None else after[n] - before[n]
            for n in before}


def _fio(ctx, name, path, p, extra):
    cmd = ["fio", f"--name=rand-{name}", f"--filename={path}", "--rw=randread", "--bs=4k",
           f"--size={p['bytes']}", "--ioengine=psync", "--numjobs=1", "--time_based",
           f"--runtime={p['seconds']}", "--norandommap", "--randrepeat=1",
           "--output-format=json", *extra]
    return fio_job(cmd, name, ctx.timeout(600, 60))


def _stats(mount, name):
    """MOUNT/.memfs/stats/<name> `key: value` lines as {key: int}; {} if unreadable."""
    try:
        res = run_cmd(["cat", os.path.join(mount, ".memfs", "stats", name)], 30, check=False)
    except BenchError:
        return {}
    out = {}
    for line in res.stdout.decode(errors="replace").splitlines() if res.returncode == 0 else []:
        key, sep, value = line.partition(":")
        with contextlib.suppress(ValueError, IndexError):
            if sep:
                out[key.strip()] = int(value.split()[0])
    return out


def _requests(fs):
    """Total FUSE requests so far by operation (stats/ops), or None for tmpfs."""
    if not fs.is_memfs:
        return None
    res = run_cmd(["cat", os.path.join(fs.path, ".memfs", "stats", "ops")], 30)
    counts = {}
    for line in res.stdout.decode(errors="replace").splitlines()[1:]:
        fields = line.split()
        if len(fields) >= 2 and fields[1].isdigit():
            counts[fields[0]] = int(fields[1])
    if not counts:
        raise BenchError(".memfs/stats/ops has no per-operation counts")
    return counts


def _per(before, after, operations):
    if before is None:
        return None
    return sum(after[n] - before.get(n, 0) for n in after) / operations


# -- the C program --------------------------------------------------------------------

def _io(ctx, args, timeout):
    """Run the I/O program with args; returns its JSON answer."""
    out = run_cmd([_program(ctx.cfg.scratch), *map(str, args)], timeout).stdout.decode()
    try:
        return json.loads(out)
    except ValueError:
        raise BenchError(f"passthrough I/O program answer not understood: {out[-300:]!r}") \
            from None


def _program(scratch):
    """The I/O program, compiled with cc once per source into the run's scratch dir."""
    digest = hashlib.sha256(PROGRAM.encode()).hexdigest()[:12]
    binary = os.path.join(scratch, f"passthrough-io-{digest}")
    if not os.path.exists(binary):
        source = binary + ".c"
        with open(source, "w") as f:
            f.write(PROGRAM)
        tmp = f"{binary}.tmp{os.getpid()}"
        run_cmd(["cc", "-O2", "-Wall", "-o", tmp, source], 120)
        os.replace(tmp, binary)
    return binary


# One JSON line out; any failed call exits non-zero (never a number).
#   write PATH BYTES BS trunc|notrunc  open (O_CREAT, O_TRUNC or not), write BYTES
#                                      in BS blocks, fsync, close: all timed
#   read PATH BS                       open, read to EOF in BS blocks, close: timed
#   odirect PATH BYTES N               write the file, reopen O_RDWR|O_DIRECT, time N
#                                      (lseek 0 + write BYTES), then N (lseek 0 + read
#                                      BYTES); compare the data
#   openread PATH N                    N x (open, read 4 KiB, close), after N/10 untimed
#   create DIR N D                     N x (open O_CREAT|O_EXCL + close) in DIR/d000..
#   resident PATH                      pages of the file in the page cache (mincore)
PROGRAM = r'''
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void die(const char *fmt, ...)
{
	va_list ap;
	int e = errno;
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, ": %s\n", strerror(e));
	exit(2);
}

static char *buffer(size_t n)
{
	void *p;
	if (posix_memalign(&p, 4096, n)) { errno = ENOMEM; die("buffer"); }
	unsigned long long x = 0x9e3779b97f4a7c15ULL;
	for (size_t i = 0; i < n; i++) {
		x ^= x << 13; x ^= x >> 7; x ^= x << 17;
		((unsigned char *)p)[i] = (unsigned char)(x | 1);
	}
	return p;
}

static void full_write(int fd, const char *buf, size_t n)
{
	while (n) {
		ssize_t w = write(fd, buf, n);
		if (w <= 0) die("write");
		buf += w;
		n -= w;
	}
}

static int do_write(const char *path, long long bytes, long bs, int trunc)
{
	char *buf = buffer(bs);
	double t0 = now();
	int fd = open(path, O_WRONLY | O_CREAT | (trunc ? O_TRUNC : 0), 0644);
	if (fd < 0) die("open %s", path);
	for (long long done = 0; done < bytes; done += bs)
		full_write(fd, buf, bytes - done < bs ? bytes - done : bs);
	if (fsync(fd) < 0) die("fsync");
	if (close(fd) < 0) die("close");
	printf("{\"seconds\": %.9f, \"bytes\": %lld}\n", now() - t0, bytes);
	return 0;
}

static int do_read(const char *path, long bs)
{
	char *buf = buffer(bs);
	long long total = 0;
	ssize_t n;
	double t0 = now();
	int fd = open(path, O_RDONLY);
	if (fd < 0) die("open %s", path);
	while ((n = read(fd, buf, bs)) > 0)
		total += n;
	if (n < 0) die("read");
	if (close(fd) < 0) die("close");
	printf("{\"seconds\": %.9f, \"bytes\": %lld}\n", now() - t0, total);
	return 0;
}

static int do_odirect(const char *path, size_t bytes, long n)
{
	char *data = buffer(bytes), *back = buffer(bytes);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0) die("create %s", path);
	full_write(fd, data, bytes);
	if (close(fd) < 0) die("close");
	fd = open(path, O_RDWR | O_DIRECT);
	if (fd < 0) die("open O_DIRECT %s", path);
	double t0 = now();
	for (long i = 0; i < n; i++) {
		if (lseek(fd, 0, SEEK_SET) < 0) die("lseek");
		if (write(fd, data, bytes) != (ssize_t)bytes) die("write");
	}
	double t1 = now();
	for (long i = 0; i < n; i++) {
		if (lseek(fd, 0, SEEK_SET) < 0) die("lseek");
		if (read(fd, back, bytes) != (ssize_t)bytes) die("read");
	}
	double t2 = now();
	if (close(fd) < 0) die("close");
	if (memcmp(data, back, bytes)) { errno = EIO; die("read back differs"); }
	printf("{\"write_seconds\": %.9f, \"read_seconds\": %.9f}\n", t1 - t0, t2 - t1);
	return 0;
}

static void open_read_close(const char *path, char *buf)
{
	int fd = open(path, O_RDONLY);
	if (fd < 0) die("open %s", path);
	if (read(fd, buf, 4096) != 4096) die("read");
	if (close(fd) < 0) die("close");
}

static int do_openread(const char *path, long n)
{
	char *buf = buffer(4096);
	for (long i = 0; i < n / 10; i++)
		open_read_close(path, buf);
	double t0 = now();
	for (long i = 0; i < n; i++)
		open_read_close(path, buf);
	printf("{\"seconds\": %.9f, \"iterations\": %ld}\n", now() - t0, n + n / 10);
	return 0;
}

static int do_create(const char *dir, long n, long dirs)
{
	char name[64];
	if (chdir(dir) < 0) die("chdir %s", dir);
	double t0 = now();
	for (long i = 0; i < n; i++) {
		snprintf(name, sizeof name, "d%03ld/f%07ld", i % dirs, i);
		int fd = open(name, O_WRONLY | O_CREAT | O_EXCL, 0644);
		if (fd < 0) die("create %s", name);
		if (close(fd) < 0) die("close");
	}
	printf("{\"seconds\": %.9f}\n", now() - t0);
	return 0;
}

static int do_resident(const char *path)
{
	int fd = open(path, O_RDONLY);
	if (fd < 0) die("open %s", path);
	off_t size = lseek(fd, 0, SEEK_END);
	if (size < 0) die("lseek");
	long page = sysconf(_SC_PAGESIZE), pages = (size + page - 1) / page, resident = 0;
	if (size) {
		void *map = mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0);
		if (map == MAP_FAILED) die("mmap %s", path);
		unsigned char *vec = malloc(pages);
		if (!vec) die("malloc");
		if (mincore(map, size, vec) < 0) die("mincore");
		for (long i = 0; i < pages; i++)
			resident += vec[i] & 1;
		munmap(map, size);
	}
	close(fd);
	printf("{\"pages\": %ld, \"resident\": %ld}\n", pages, resident);
	return 0;
}

int main(int argc, char **argv)
{
	const char *op = argc > 1 ? argv[1] : "";
	if (!strcmp(op, "write") && argc == 6)
		return do_write(argv[2], atoll(argv[3]), atol(argv[4]), !strcmp(argv[5], "trunc"));
	if (!strcmp(op, "read") && argc == 4)
		return do_read(argv[2], atol(argv[3]));
	if (!strcmp(op, "odirect") && argc == 5)
		return do_odirect(argv[2], atol(argv[3]), atol(argv[4]));
	if (!strcmp(op, "openread") && argc == 4)
		return do_openread(argv[2], atol(argv[3]));
	if (!strcmp(op, "create") && argc == 5)
		return do_create(argv[2], atol(argv[3]), atol(argv[4]));
	if (!strcmp(op, "resident") && argc == 3)
		return do_resident(argv[2]);
	fprintf(stderr, "usage: write|read|odirect|openread|create|resident ...\n");
	return 1;
}
'''
