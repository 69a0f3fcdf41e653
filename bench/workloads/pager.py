"""The pager: memfs with a RAM ceiling (`ram=`, `compress=`, `backing=`)
against what a user has today, kernel tmpfs used by tasks in a memory cgroup
limited to the same RAM, with a zram swap device (lz4) behind it.

Owns: the corpus of real file contents (pieces of /usr/bin, /usr/lib and
/usr/share, built once per suite run in cfg.scratch), setting up and always
tearing down the anchor (a memory cgroup of its own, v1 or v2, and a zram
swap device), mounting memfs with the pager options (backing file in a fresh
directory under /var/tmp), the clients (a small Python reader/writer, fio,
postmark) run inside the cgroup for tmpfs and outside any limit for memfs,
and reading MOUNT/.memfs/stats/pager, `memfs where`, /sys/block/zramN/mm_stat
and the cgroup's memory files. It mounts and unmounts itself (MANAGES_MOUNTS).
What could not be set up or measured is added to DESCRIPTION as a note.
"""
import contextlib
import dataclasses
import errno
import glob
import hashlib
import json
import math
import os
import random
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

from filesystems import FileSystem, daemon_rss, mounts
from proc import BenchError, kill_group
from proc import run as run_cmd
from runner import Case, Metric, note
from sysinfo import meminfo
from workloads.postmark import _run_stamped, _stamp_after  # the suite's Postmark timing

NAME = "pager"
TITLE = "Pager: memfs ram= against tmpfs in a memory cgroup with zram swap"
DESCRIPTION = """
Ceiling C: memfs's `ram=` (resident and compressed pages together;
`compress=lz4`, zstd where stated; `backing=` a fresh directory under
/var/tmp, on disk) against the anchor, kernel tmpfs whose every client
(writer, reader, fio, postmark) runs in a memory cgroup of this run's own
limited to C (v1 `memory.limit_in_bytes`, swappiness 100; v2 `memory.max`),
with a zram swap device (lz4, priority 32767) set up for each run and
removed after it. memfs's clients run under no limit. Outside the ceilings,
and reported: the zram device's memory (anchor); the kernel page cache of
memfs's files (FUSE) and of its backing file (memfs). Ratios are memfs over
the anchor from the same run (anchor over memfs for times and memory):
higher is better.

Data are real files: pieces of 64 KiB to 4 MiB cut from the contents of
/usr/bin, /usr/lib and /usr/share, built once per run outside both mounts.
Before every timed read the kernel page cache of memfs's files is dropped
(posix_fadvise DONTNEED: what drop_caches does to them, without evicting the
corpus); tmpfs's pages are its storage and stay.

Case 1: one file of W × C (corpus pieces concatenated), fio psync random
reads with a zipf(1.2) offset distribution, 4 KiB and 64 KiB, for a fixed
time each; then the same on memfs with its `backing=` on a zram block device
of its own (lz4; no swap) instead of disk: like for like with the anchor, whose
zram swap is RAM outside its cgroup's limit too (those rows' anchor figures are
the anchor's case 1 figures). Case 2: a hot set of C/2 read three times, one sequential pass
over 2 × C of other files, then the hot set again: the share of its pages
resident just before that pass (anchor: mincore, a page in zram is not
resident; memfs: `memfs where`, a compressed page is not resident) and the
pass's speed. Cases 3 and 5: 4 × C of files written, then read back and
compared with the corpus's SHA-1 (read time only), memory sampled every
20 ms meanwhile. Case 4: 2 × C written, then compressed_original_bytes /
compressed_bytes (memfs, lz4 and zstd) against orig_data_size /
compr_data_size of zram's mm_stat. Case 6: Postmark (files of 10,000-15,000
bytes, 100 subdirectories) with the ceiling at half its data set. The
issue's targets are in the row labels: shown, never enforced.

Hosts that reclaim cold page cache on their own (this project's VMs run a
DAMON `pageout` scheme, kdamond) take memfs's cached pages away during and
between runs, and tmpfs's not: memfs's reads then miss again, and a page
that misses twice is made resident (docs/PAGER.md). results.json has the
bytes DAMON paged out during each case-1 read (`<case>:<bs>_damon_pageout_bytes`,
system-wide) and the requests that reached memfs (`op_read`, ...).
"""

MANAGES_MOUNTS = True
MiB = 1 << 20
PAGE = 4096  # memfs's page and the kernel's

# Full: the whole workload (3 repetitions) in about 6 minutes on 2 vCPUs.
FULL = {"ceiling": 128 * MiB, "ws": [0.5, 1, 2, 4], "read_seconds": 2.0,
        "postmark_files": 10000, "postmark_transactions": 30000}
QUICK = {"ceiling": 32 * MiB, "ws": [0.5, 2], "read_seconds": 1.0,
         "postmark_files": 3000, "postmark_transactions": 6000}
ZIPF_THETA = 1.2
POSTMARK_MEAN_FILE = 12500  # set size 10000 15000
BACKING_BASE = "/var/tmp"   # on disk
SOURCES = ["/usr/bin", "/usr/lib", "/usr/share"]
PIECE_MIN, PIECE_MAX = 64 << 10, 4 << 20
SOURCE_MAX = 4 << 20        # at most this much of any one source file (variety)
CGROUP_NAME = f"memfs-bench-pager-{os.getpid()}"
# The anchor cgroup's memory.swappiness (v1; v2 has none, vm.swappiness rules).
# The kernel's documentation suggests values above the default 60 for in-memory
# swap such as zram; 100 weighs swapping and dropping file pages (the clients'
# own programs) equally, so a cgroup full of tmpfs data swaps it to zram rather
# than refaulting its programs.
CGROUP_SWAPPINESS = 100
ZRAM_PRIORITY = 32767
SAMPLE_SECONDS = 0.02
OOM_RETRIES = 3
# `memfs where PATH...`, one line a file:
# "PATH: 1465 pages (5.7M): resident 0 (0%), compressed 1114 (76%), backing store 351 (23%)"
WHERE_FIELDS = {"pages": r": (\d+) pages", "resident": r"resident (\d+)",
                "compressed": r"compressed (\d+)", "backing": r"backing store (\d+)"}

def _note(text):
    """A note on what this run could not set up or measure (runner.note)."""
    note(sys.modules[__name__], text)


class AnchorUnavailable(Exception):
    """The tmpfs + cgroup + zram anchor cannot be set up on this machine."""


class AnchorOOM(Exception):
    """The anchor's cgroup OOM-killed a client every time it was tried: a property
    of the anchor, not a failure of memfs, so the run has no anchor figures."""


# -- cases and metrics ----------------------------------------------------------

def _x(r):
    return f"{r:g}"


def _mib(n):
    return f"{n / MiB:,.0f} MiB"


def cases(cfg):
    p = QUICK if cfg.quick else FULL
    c = p["ceiling"]
    common = {"ceiling": c, "quick": cfg.quick}
    out = [Case(id=f"ws{_x(r)}", label=f"working set {_x(r)}× ceiling",
                params={**common, "kind": "ws", "ratio": r, "seconds": p["read_seconds"]})
           for r in p["ws"]]
    out += [
        Case(id="scan", label=f"hot set {_mib(c // 2)}, scan {_mib(2 * c)}",
             params={**common, "kind": "scan"}),
        Case(id="seq", label=f"write and read back {_mib(4 * c)}",
             params={**common, "kind": "seq"}),
        Case(id="compress", label=f"compression of {_mib(2 * c)}",
             params={**common, "kind": "compress"}),
    ]
    files = p["postmark_files"]
    pm_ceiling = max(1, round(files * POSTMARK_MEAN_FILE / 2 / MiB)) * MiB
    out.append(Case(id="postmark", label=f"Postmark, {files:,} files, ceiling {_mib(pm_ceiling)}",
                    params={"ceiling": pm_ceiling, "quick": cfg.quick, "kind": "postmark",
                            "files": files, "transactions": p["postmark_transactions"]}))
    return out


def metrics(case):
    p, k = case.params, case.id
    c = _mib(p["ceiling"])

    def m(name, table, label, unit, better, ratio=True, chart=False, short=""):
        return Metric(key=f"{k}:{name}", table=table, label=label, unit=unit, better=better,
                      ratio=ratio, chart=chart, short=short)

    if p["kind"] == "ws":
        target = " (target ≥ 0.5×)" if p["ratio"] == 2 else ""
        label = f"{case.label}{target}"
        short = f"W = {_x(p['ratio'])}× C"
        out = []
        for bs in ("4k", "64k"):
            size = bs.replace("k", " KiB")
            out += [m(f"{bs}_mibs", f"Case 1: zipf random reads of {size}, ceiling {c} (MiB/s)",
                      label, "MiB/s", "higher", chart=True, short=short),
                    m(f"{bs}_us", f"Case 1: zipf random reads of {size}, ceiling {c} "
                      "(µs per read)", label, "µs", "lower")]
        out.append(m("cache_mib", f"Case 1: kernel page cache of memfs's file after the reads "
                     f"(mincore; outside ram=), ceiling {c} (MiB)", label, "MiB", "lower",
                     ratio=False))
        for bs in ("4k", "64k"):
            size = bs.replace("k", " KiB")
            like = (f"Case 1, like for like: memfs's backing= on a zram device (RAM outside "
                    f"the ceiling, as the anchor's swap), zipf random reads of {size}, "
                    f"ceiling {c}")
            out += [m(f"zb_{bs}_mibs", f"{like} (MiB/s)", label, "MiB/s", "higher"),
                    m(f"zb_{bs}_us", f"{like} (µs per read)", label, "µs", "lower")]
        return out
    if p["kind"] == "scan":
        table = f"Case 2: scan resistance, {case.label}"
        # No ratio: the anchor keeps little or none of its hot set in RAM (its
        # pages go to zram), so a ratio of the two shares means nothing.
        return [m("resident_pct", table, "hot set still resident after the scan "
                  "(target ≥ 90%)", "%", "higher", ratio=False),
                m("hot_mibs", table, "second hot pass, read speed", "MiB/s", "higher"),
                m("hot_seconds", table, "second hot pass, time", "s", "lower")]
    if p["kind"] == "seq":
        t5 = f"Case 5: sequential write of 4× the ceiling ({_mib(4 * p['ceiling'])}), " \
             "verified read-back"
        t3 = f"Case 3: memory while writing and reading back {_mib(4 * p['ceiling'])}, " \
             f"ceiling {c} (MiB)"
        return [m("write_mibs", t5, "write", "MiB/s", "higher"),
                m("read_mibs", t5, "read-back (SHA-1 compared with the corpus)", "MiB/s",
                  "higher"),
                m("allin_peak", t3, "all-in, peak (memfs: RSS + growth of Cached; tmpfs: "
                  "cgroup usage + zram memory; sampled)", "MiB", "lower"),
                m("allin_steady", t3, "all-in, at the end (memfs: RSS + page cache of its "
                  "files and backing file)", "MiB", "lower"),
                m("rss_peak", t3, "memfs daemon RSS, peak (VmHWM)", "MiB", "lower",
                  ratio=False),
                m("rss_steady", t3, "memfs daemon RSS, at the end", "MiB", "lower",
                  ratio=False),
                m("cache_peak", t3, "kernel page cache growth (Cached, system-wide) with "
                  "memfs, peak", "MiB", "lower", ratio=False),
                m("cache_mount_end", t3, "of which the mount's files, at the end (mincore)",
                  "MiB", "lower", ratio=False),
                m("cache_backing_end", t3, "of which memfs's backing file, at the end (mincore)",
                  "MiB", "lower", ratio=False),
                m("rss_over_ceiling", t3, "memfs peak RSS / (ram= + RSS of the empty daemon) "
                  "(target ≤ 1.10)", "×", "lower", ratio=False),
                m("cg_peak", t3, "cgroup max usage (tmpfs anchor)", "MiB", "lower", ratio=False),
                m("memsw_peak", t3, "cgroup max usage including swap (tmpfs anchor)", "MiB",
                  "lower", ratio=False),
                m("zram_peak", t3, "zram memory, peak (mem_used_max)", "MiB", "lower",
                  ratio=False)]
    if p["kind"] == "compress":
        table = f"Case 4: compression ratio (original / compressed), {case.label}"
        return [m("lz4", table, "memfs compress=lz4 against zram lz4 (target ≥ 1.0×)", "×",
                  "higher"),
                m("zstd", table, "memfs compress=zstd against zram lz4 (target: clearly "
                  "better than lz4)", "×", "higher"),
                m("zstd_over_lz4", table, "memfs zstd ratio / memfs lz4 ratio", "×", "higher",
                  ratio=False)]
    table = (f"Case 6: Postmark, {p['files']:,} files of 10,000-15,000 bytes in 100 "
             f"subdirectories, ceiling {c} = half the data set (transactions/s)")
    return [m("tps", table, f"{p['transactions']:,} transactions", "tx/s", "higher")]


# -- one run ----------------------------------------------------------------------

def run(ctx):
    fs, p = ctx.fs, ctx.case.params
    if not fs.managed:
        return {}  # an existing directory has no RAM ceiling to set: not applicable
    task = {"ws": _case_ws, "scan": _case_scan, "seq": _case_seq,
            "compress": _case_compress, "postmark": _case_postmark}[p["kind"]]
    try:
        return task(ctx)
    except AnchorUnavailable as e:
        _note(f"the tmpfs + memory cgroup + zram anchor could not be set up, so its "
              f"figures are missing: {e}")
        return {f"{ctx.case.id}:anchor_unavailable": str(e)}
    except AnchorOOM as e:
        _note(f"in case {ctx.case.id} (rep {ctx.rep + 1}) the anchor's memory cgroup "
              f"OOM-killed its client {OOM_RETRIES + 1} times in a row, its swap having "
              "room (the kernel found no inactive page to reclaim): that run has no "
              "anchor figures, so the case shows the median of the runs that have "
              "them, marked")
        return {f"{ctx.case.id}:anchor_oom": str(e)}


def _case_ws(ctx):
    p, k = ctx.case.params, ctx.case.id
    corpus = _corpus(ctx)
    pieces = _fill(corpus, int(p["ratio"] * p["ceiling"]))
    values = {}
    with _setup(ctx, p["ceiling"]) as side:
        values.update(_ws_reads(ctx, side, pieces, f"{k}:"))
        caches = [values[f"{k}:{bs}_cache_mount"] for bs in ("4k", "64k")]
        values[f"{k}:cache_mib"] = None if None in caches else max(caches)
        values.update(side.final_figures(k))
    if ctx.fs.kind != "memfs":
        # The like-for-like rows set memfs's backing store beside the same anchor.
        values.update({f"{k}:zb_{bs}_{n}": values[f"{k}:{bs}_{n}"]
                       for bs in ("4k", "64k") for n in ("mibs", "us")})
        return values
    try:
        with _setup(ctx, p["ceiling"], zram_backing=True) as side:
            values.update(_ws_reads(ctx, side, pieces, f"{k}:zb_"))
            values.update(side.final_figures(f"{k}:zb"))
    except AnchorUnavailable as e:
        _note(f"case 1's rows with memfs's backing store on zram are missing: {e}")
    return values


def _ws_reads(ctx, side, pieces, prefix):
    """Case 1 on one side: the working set written as one file, then fio's zipf
    reads of each block size; figures keyed prefix + bs + "_" + name."""
    path = os.path.join(side.root, "ws.dat")
    _warm(e["path"] for e in pieces)
    wrote = side.copy([(path, [e["path"] for e in pieces])], timeout=ctx.timeout(900, 120))
    values = {f"{prefix}ws_bytes": wrote["bytes"],
              f"{prefix}layout_mibs": wrote["bytes"] / MiB / wrote["seconds"]}
    for bs in ("4k", "64k"):
        side.drop([path], ctx.timeout(300, 60))
        before = side.counters()
        job = side.fio(path, bs, ctx.case.params["seconds"], ctx.timeout(600, 120))
        cache = side.page_cache_mib([path], ctx.timeout(300, 60))
        values[f"{prefix}{bs}_cache_mount"] = cache["mount"]
        values[f"{prefix}{bs}_cache_backing"] = cache["backing"]
        values[f"{prefix}{bs}_mibs"] = job["read"]["bw_bytes"] / MiB
        values[f"{prefix}{bs}_us"] = job["read"]["lat_ns"]["mean"] / 1000
        values[f"{prefix}{bs}_p99_us"] = _p99_us(job)
        values.update(_delta(f"{prefix}{bs}_", before, side.counters()))
        if not values[f"{prefix}{bs}_mibs"] > 0:
            raise BenchError(f"fio reported no throughput for {bs} reads")
    return values


def _case_scan(ctx):
    p, k = ctx.case.params, ctx.case.id
    corpus = _corpus(ctx)
    hot = _fill(corpus, p["ceiling"] // 2)
    scan = _fill(corpus, 2 * p["ceiling"], skip=hot)
    t = ctx.timeout(900, 120)
    values = {}
    with _setup(ctx, p["ceiling"]) as side:
        hot_paths = [os.path.join(side.root, "hot", e["name"]) for e in hot]
        scan_paths = [os.path.join(side.root, "scan", e["name"]) for e in scan]
        _warm(e["path"] for e in hot + scan)
        side.copy([(d, [e["path"]]) for d, e in zip(hot_paths + scan_paths, hot + scan)], t)
        hot_bytes = sum(e["size"] for e in hot)
        hot_pages = sum(-(-e["size"] // PAGE) for e in hot)
        values[f"{k}:hot_bytes"] = hot_bytes
        values[f"{k}:scan_bytes"] = sum(e["size"] for e in scan)
        for i in range(3):
            side.drop(hot_paths, t)
            kept, r, figures = _hot_pass(side, hot_paths, hot_pages, t)
            values[f"{k}:hot_pass{i + 1}_mibs"] = r["bytes"] / MiB / r["seconds"]
        # After two passes: how much of the hot set the third one found resident.
        values[f"{k}:resident_before_scan_pct"] = kept
        values[f"{k}:missed_before_scan_pct"] = figures.get("missed_pct")
        side.drop(scan_paths, t)
        r = side.read(scan_paths, t)
        values[f"{k}:scan_mibs"] = r["bytes"] / MiB / r["seconds"]
        side.drop(hot_paths + scan_paths, t)
        kept, r, delta = _hot_pass(side, hot_paths, hot_pages, t)
        if r["bytes"] != hot_bytes:
            raise BenchError(f"hot pass read {r['bytes']} bytes, expected {hot_bytes}")
        values.update({f"{k}:hot_{n}": v for n, v in delta.items()})
        values[f"{k}:resident_pct"] = kept
        values[f"{k}:hot_mibs"] = r["bytes"] / MiB / r["seconds"]
        values[f"{k}:hot_seconds"] = r["seconds"]
        values.update(side.final_figures(k))
    return values


def _hot_pass(side, paths, pages, timeout):
    """Read the hot set once: (share of it resident just before, in %, read
    result, figures). Resident: see Side.tiers. For memfs the figures also hold
    the share the pass had to page in (misses_total / pages read, stats/pager),
    which stands in for `memfs where` if that gives nothing."""
    tiers = side.tiers(paths, timeout)
    kept = 100 * tiers["resident"] / tiers["pages"] if tiers.get("pages") else None
    before = side.counters()
    r = side.read(paths, timeout)
    figures = _delta("", before, side.counters())
    figures.update({f"tier_{n}": v for n, v in tiers.items()})  # pages
    if side.kind == "memfs":
        misses = figures.get("misses_total")
        figures["missed_pct"] = None if misses is None else 100 * misses / pages
        if kept is None and misses is not None:
            kept = max(0.0, 100 - figures["missed_pct"])
            _note("`memfs where` gave nothing, so case 2's resident share for memfs is "
                  "1 - misses_total / pages read during the pass (stats/pager)")
        elif kept is None:
            _note("neither `memfs where` nor stats/pager's misses_total answered, so case "
                  "2's resident share for memfs is n/a")
    return kept, r, figures


def _case_seq(ctx):
    p, k = ctx.case.params, ctx.case.id
    pieces = _fill(_corpus(ctx), 4 * p["ceiling"])
    t = ctx.timeout(1200, 180)
    values = {}
    with _setup(ctx, p["ceiling"]) as side:
        dest = [os.path.join(side.root, "seq", e["name"]) for e in pieces]
        _warm(e["path"] for e in pieces)
        sampler = _Sampler(side.memory_sample)
        sampler.start()
        try:
            w = side.copy([(d, [e["path"]]) for d, e in zip(dest, pieces)], t)
            side.drop(dest, t)
            r = side.read(dest, t, digests=[e["sha1"] for e in pieces])
            time.sleep(0.5)  # let the figures settle for "at the end"
        finally:
            sampler.finish()
        if r["bad"]:
            raise BenchError(f"read-back differs from the corpus in {len(r['bad'])} files, "
                             f"first {r['bad'][0]}")
        values[f"{k}:write_mibs"] = w["bytes"] / MiB / w["seconds"]
        values[f"{k}:read_mibs"] = r["bytes"] / MiB / r["seconds"]
        cache = side.page_cache_mib(dest, t)
        values.update({f"{k}:cache_{n}_end": v for n, v in cache.items()})
        values.update(side.memory_figures(k, sampler, p["ceiling"], cache))
        values.update(side.final_figures(k))
    return values


def _case_compress(ctx):
    p, k = ctx.case.params, ctx.case.id
    pieces = _fill(_corpus(ctx), 2 * p["ceiling"])
    t = ctx.timeout(900, 120)
    values = {}
    algorithms = ["lz4", "zstd"] if ctx.fs.kind == "memfs" else ["lz4"]
    for algorithm in algorithms:
        with _setup(ctx, p["ceiling"], compress=algorithm) as side:
            dest = [os.path.join(side.root, "c", e["name"]) for e in pieces]
            _warm(e["path"] for e in pieces)
            side.copy([(d, [e["path"]]) for d, e in zip(dest, pieces)], t)
            ratio, figures = side.compression()
            values[f"{k}:{algorithm}"] = ratio
            values.update({f"{k}:{algorithm}_{n}": v for n, v in figures.items()})
    if ctx.fs.kind != "memfs":
        values[f"{k}:zstd"] = values[f"{k}:lz4"]  # the anchor's zram is lz4 for both rows
        values[f"{k}:zstd_over_lz4"] = None
    else:
        lz4, zstd = values[f"{k}:lz4"], values[f"{k}:zstd"]
        values[f"{k}:zstd_over_lz4"] = zstd / lz4 if lz4 and zstd else None
    return values


def _case_postmark(ctx):
    p, k = ctx.case.params, ctx.case.id
    with _setup(ctx, p["ceiling"]) as side:
        cfg_path = os.path.join(ctx.cfg.scratch, f"pager-postmark-{os.getpid()}.cfg")
        with open(cfg_path, "w") as f:
            f.write("\n".join([f"set location {side.root}", "set size 10000 15000",
                               f"set number {p['files']}",
                               f"set transactions {p['transactions']}",
                               "set subdirectories 100", "set report verbose", "run", "quit",
                               ""]))

        def attempt():
            run_cmd(["find", side.root, "-mindepth", "1", "-delete"], 300)  # a killed one's
            return _run_stamped(side.argv(["stdbuf", "-o0", "postmark", cfg_path]),
                                ctx.cfg.scratch, ctx.timeout(1800, 180))
        stamps, output = side.retry_oom(attempt)
        start = _stamp_after(stamps, output, "Performing transactions")
        end = _stamp_after(stamps, output, "Done\nDeleting files", after=start)
        if end[0] <= start[0]:
            raise BenchError(f"could not time the transaction phase: {output[-300:]!r}")
        values = {f"{k}:tps": p["transactions"] / (end[0] - start[0]),
                  f"{k}:total_seconds": stamps[-1][0]}
        values.update(side.final_figures(k))
    return values


# -- the two sides: memfs with the pager, tmpfs in a cgroup with zram ----------------

@contextlib.contextmanager
def _setup(ctx, ceiling, compress="lz4", zram_backing=False):
    """The side under test, mounted and ready; torn down whatever happens.
    zram_backing (memfs only): the backing store is a zram block device of its
    own (RAM, outside the ceiling, as the anchor's swap) instead of a file on
    disk; raises AnchorUnavailable when no zram device can be had."""
    if ctx.fs.kind == "memfs":
        with _memfs_side(ctx, ceiling, compress, zram_backing) as side:
            yield side
    else:
        with _anchor_side(ctx, ceiling) as side:
            yield side


@contextlib.contextmanager
def _memfs_side(ctx, ceiling, compress, zram_backing=False):
    with contextlib.ExitStack() as stack:
        if zram_backing:
            zram = Zram.create(max(8 * ceiling, 256 * MiB), "lz4", swap=False)
            stack.callback(zram.remove)  # after the unmount below: memfs holds it O_EXCL
            backing = zram.device
        else:
            backing = tempfile.mkdtemp(prefix="memfs-bench-pager-", dir=BACKING_BASE)
            stack.callback(shutil.rmtree, backing, ignore_errors=True)
        options = _pager_options(ctx.fs.options, ceiling, compress, backing)
        fs = FileSystem(ctx.fs.name, "memfs", options, ctx.fs.path)
        stack.callback(fs.unmount)
        try:
            fs.mount()
        except BenchError as e:
            said = str(e).rsplit(".: ", 1)[-1]  # memfs's own message, after the command
            raise BenchError(f"memfs with the pager is unavailable: {said} "
                             f"(mount -o {options})") from None
        if fs.daemon is None:
            raise BenchError("memfs mounted but its daemon was not found in /proc")
        yield Side(kind="memfs", root=fs.path, ceiling=ceiling, scratch=ctx.cfg.scratch,
                   fs=fs, base_rss_kib=daemon_rss(fs.daemon), backing=backing)


@contextlib.contextmanager
def _anchor_side(ctx, ceiling):
    with contextlib.ExitStack() as stack:
        try:
            zram = Zram.create(max(8 * ceiling, 256 * MiB), "lz4")
            stack.callback(zram.remove)
            cgroup = MemCgroup.create(ceiling)
            stack.callback(cgroup.remove)
        except (OSError, BenchError) as e:
            raise AnchorUnavailable(str(e)) from None
        fs = FileSystem(ctx.fs.name, "tmpfs", ctx.fs.options, ctx.fs.path)
        stack.callback(fs.unmount)  # first of the three: swap and cgroup then hold nothing
        fs.mount()
        _warm(_program_files())
        yield Side(kind="anchor", root=fs.path, ceiling=ceiling, scratch=ctx.cfg.scratch,
                   fs=fs, cgroup=cgroup, zram=zram)


def _pager_options(base, ceiling, compress, backing):
    """The suite's memfs options with this workload's pager options instead of any given."""
    ours = {"ram": f"{ceiling // 1024}k", "compress": compress, "backing": backing}
    keep = [o for o in base.split(",") if o and o.split("=")[0] not in ours]
    return ",".join(keep + [f"{k}={v}" for k, v in ours.items()])


@dataclasses.dataclass
class Side:
    kind: str          # "memfs" or "anchor"
    root: str          # the mount point
    ceiling: int
    scratch: str
    fs: object
    cgroup: object = None
    zram: object = None
    base_rss_kib: int = None
    backing: str = None  # memfs's backing= directory
    oom_retries: int = 0  # commands run again after the cgroup's OOM killer

    def argv(self, cmd):
        """cmd as run by the clients: inside the cgroup for the anchor."""
        if not self.cgroup:
            return list(cmd)
        return ["sh", "-c", 'echo $$ > "$0" && exec "$@"', self.cgroup.procs, *cmd]

    def run(self, cmd, timeout, inside=True):
        """Run a client command (as proc.run, but its process group is killed on any
        exit, an interrupt too, so nothing of ours is left in the mount or cgroup)."""
        return self.retry_oom(lambda: self._run_once(cmd, timeout, inside))

    def retry_oom(self, fn):
        """fn(); run again, up to OOM_RETRIES times, when the anchor's cgroup OOM-killed
        a client meanwhile (counted, and noted in the report)."""
        for attempt in range(OOM_RETRIES + 1):
            kills = self.cgroup.oom_kills() if self.cgroup else None
            try:
                return fn()
            except BenchError as e:
                if kills is None or self.cgroup.oom_kills() == kills:
                    raise self.explain(e) from None
                if attempt == OOM_RETRIES:
                    raise AnchorOOM(f"{e}"[:300]) from None
                self.oom_retries += 1
                _note("the anchor's memory cgroup OOM-killed a client (fio, the reader/writer "
                      "or postmark) in some runs although its swap had room; each such "
                      f"command was run again (up to {OOM_RETRIES} times), counted in "
                      "results.json as <case>:oom_retries")

    def _run_once(self, cmd, timeout, inside):
        cmd = self.argv(cmd) if inside else list(cmd)
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, start_new_session=True)
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise BenchError(f"timed out after {timeout:.0f}s: {shlex.join(cmd)[:300]}") from None
        finally:
            if proc.returncode is None:
                kill_group(proc)
        if proc.returncode != 0:
            tail = (err or out).decode(errors="replace").strip()[-500:]
            raise BenchError(f"exit {proc.returncode}: {shlex.join(cmd)[:300]}: {tail}")
        return subprocess.CompletedProcess(cmd, proc.returncode, out, err)

    def explain(self, error):
        """error, saying whether the anchor's cgroup OOM killer ran in this run."""
        kills = self.cgroup.oom_kills() if self.cgroup else None
        if kills:
            return BenchError(f"{error} (the anchor cgroup's OOM killer ran {kills} time(s) "
                              "in this run)")
        return error

    def client(self, job, timeout, inside=True):
        """Run the client script on job (a dict); returns its JSON answer."""
        path = os.path.join(self.scratch, f"pager-job-{os.getpid()}.json")
        with open(path, "w") as f:
            json.dump(job, f)
        cmd = [sys.executable, "-I", "-S", "-c", CLIENT, path]
        out = self.run(cmd, timeout, inside).stdout.decode()
        try:
            return json.loads(out)
        except ValueError:
            raise BenchError(f"client answer not understood: {out[-300:]!r}") from None

    def copy(self, files, timeout):
        """Write [(dest, [source, ...])] (sources concatenated); {seconds, bytes}."""
        return self.client({"op": "copy", "files": files}, timeout)

    def read(self, paths, timeout, digests=None):
        """Read paths whole; {seconds (read time only), bytes, bad (digest mismatches)}."""
        return self.client({"op": "read", "files": paths, "sha1": digests}, timeout)

    def drop(self, paths, timeout):
        """Drop the kernel page cache of these files (only memfs has one apart)."""
        if self.kind == "memfs":
            self.client({"op": "drop", "files": paths}, timeout, inside=False)

    def tiers(self, paths, timeout):
        """Where the files' pages are: {pages, resident[, compressed, backing]}, or {}.

        tmpfs: mincore (a page swapped to zram is not resident). memfs: `memfs
        where` (resident = uncompressed in memfs's RAM tier)."""
        if self.kind == "anchor":
            return self.client({"op": "resident", "files": paths}, timeout, inside=False)
        try:
            res = run_cmd([mounts.MEMFS_BIN, "where", *paths], timeout, check=False)
        except BenchError:
            return {}
        total = dict.fromkeys(["pages", "resident", "compressed", "backing"], 0)
        lines = res.stdout.decode(errors="replace").splitlines()
        for line in lines:
            found = {n: re.search(rx, line) for n, rx in WHERE_FIELDS.items()}
            if res.returncode or not all(found.values()):
                return {}
            for n, match in found.items():
                total[n] += int(match.group(1))
        return total if len(lines) == len(paths) else {}

    def page_cache_mib(self, paths, timeout):
        """memfs: MiB of kernel page cache held for the mount's files (paths) and for
        its backing file (reached through the daemon's /proc/PID/fd), by mincore."""
        if self.kind != "memfs":
            return {"mount": None, "backing": None}
        fd_dir = f"/proc/{self.fs.daemon}/fd"
        backing = []
        for fd in os.listdir(fd_dir):
            with contextlib.suppress(OSError):
                if os.readlink(os.path.join(fd_dir, fd)).startswith(self.backing + "/"):
                    backing.append(os.path.join(fd_dir, fd))
        out = {}
        for name, files in (("mount", paths), ("backing", backing)):
            r = self.client({"op": "resident", "files": files}, timeout, inside=False)
            out[name] = r["resident"] * PAGE / MiB
        return out

    def fio(self, path, bs, seconds, timeout):
        cmd = ["fio", f"--name=zipf{bs}", f"--filename={path}", "--rw=randread", f"--bs={bs}",
               "--ioengine=psync", "--numjobs=1", f"--random_distribution=zipf:{ZIPF_THETA}",
               "--norandommap", "--randrepeat=1", "--invalidate=0", "--time_based",
               f"--runtime={seconds:g}", "--output-format=json"]
        out = self.run(cmd, timeout).stdout.decode(errors="replace")
        try:
            job = json.loads(out[out.index("{"):])["jobs"][0]
        except (ValueError, KeyError, IndexError):
            raise BenchError(f"fio output not understood: {out[-300:]!r}") from None
        if job.get("error"):
            raise BenchError(f"fio reported error {job['error']}")
        return job

    # -- figures ----------------------------------------------------------------

    def counters(self):
        """Cumulative counters: memfs's stats/pager, or the kernel's swap traffic."""
        if self.kind == "memfs":
            out = {n: v for n, v in pager_stats(self.root).items() if n.endswith("_total")}
            # Requests of the kinds a reader makes, and passthrough opens: what
            # reached the daemon, for reading a run's figures (results.json).
            ops = _stat_file(self.root, "ops")
            for op in ("open", "release", "read", "getattr"):
                if op in ops:
                    out[f"op_{op}"] = ops[op]
            passthrough = _stat_file(self.root, "passthrough")
            if "passthrough_opens_total" in passthrough:
                out["passthrough_opens_total"] = passthrough["passthrough_opens_total"]
            out["damon_pageout_bytes"] = _damon_pageout_bytes()
            return out
        vm = _vmstat()
        return {"pswpin": vm.get("pswpin"), "pswpout": vm.get("pswpout"),
                "damon_pageout_bytes": _damon_pageout_bytes()}

    def pager(self):
        return pager_stats(self.root) if self.kind == "memfs" else {}

    def compression(self):
        """(ratio, figures) of what is compressed now; ratio None when n/a."""
        if self.kind == "memfs":
            s = self.pager()
            orig, comp = s.get("compressed_original_bytes"), s.get("compressed_bytes")
            figures = {n: s.get(n) for n in ("compressed_original_bytes", "compressed_bytes",
                                             "compressed_pages", "resident_bytes",
                                             "backing_bytes")}
        else:
            mm = self.zram.mm_stat()
            orig, comp = mm.get("orig_data_size"), mm.get("compr_data_size")
            figures = {n: mm.get(n) for n in ("orig_data_size", "compr_data_size",
                                              "mem_used_total", "same_pages")}
        if not _positive(orig, comp):
            if self.kind == "memfs":
                _note("memfs's stats/pager gave no compressed_original_bytes/compressed_bytes "
                      "(or nothing was compressed), so case 4's memfs ratios are n/a")
            return None, figures
        return orig / comp, figures

    def memory_sample(self):
        if self.kind == "memfs":
            return {"rss": daemon_rss(self.fs.daemon), "cached": meminfo()["Cached"]}
        return {"cg": self.cgroup.usage(), "zram": self.zram.mm_stat().get("mem_used_total")}

    def memory_figures(self, k, sampler, ceiling, cache):
        """Case 3's figures in MiB (the other side's rows None). memfs's peak counts
        the growth of Cached (system-wide, sampled), its end the page cache of the
        mount's files and of the backing file (cache: page_cache_mib)."""
        rows = dict.fromkeys(["allin_peak", "allin_steady", "rss_peak", "rss_steady",
                              "cache_peak", "rss_over_ceiling", "cg_peak", "memsw_peak",
                              "zram_peak"])
        first, last, samples = sampler.first, self.memory_sample(), sampler.samples
        if self.kind == "memfs":
            status = _proc_status(self.fs.daemon)
            cached0 = first["cached"]
            sums = [s["rss"] + s["cached"] - cached0 for s in samples if s["rss"] is not None]
            rows.update(
                allin_peak=max(sums) / 1024 if sums else None,
                allin_steady=last["rss"] / 1024 + cache["mount"] + cache["backing"]
                if last["rss"] is not None else None,
                rss_peak=status.get("VmHWM", 0) / 1024 or None,
                rss_steady=status.get("VmRSS", 0) / 1024 or None,
                cache_peak=max(s["cached"] - cached0 for s in samples) / 1024)
            if rows["rss_peak"] and self.base_rss_kib is not None:
                rows["rss_over_ceiling"] = rows["rss_peak"] * MiB / (
                    ceiling + self.base_rss_kib * 1024)
                rows["base_rss"] = self.base_rss_kib / 1024
        else:
            sums = [s["cg"] + (s["zram"] or 0) for s in samples]
            mm = self.zram.mm_stat()
            rows.update(
                allin_peak=max(sums) / MiB if sums else None,
                allin_steady=(last["cg"] + (last["zram"] or 0)) / MiB,
                cg_peak=_or_none(self.cgroup.peak(), MiB),
                memsw_peak=_or_none(self.cgroup.memsw_peak(), MiB),
                zram_peak=_or_none(mm.get("mem_used_max"), MiB))
        return {f"{k}:{n}": v for n, v in rows.items()}

    def final_figures(self, k):
        """Raw state at the end of a run, kept in results.json (not in the tables)."""
        if self.kind == "memfs":
            s = self.pager()
            if not s:
                _note("memfs's stats/pager file was missing or unreadable: its pager figures "
                      "(hits, misses, resident, compressed) are n/a")
            return {f"{k}:pager_{n}": v for n, v in s.items()}
        out = {f"{k}:zram_{n}": v for n, v in self.zram.mm_stat().items()}
        out[f"{k}:zram_device"] = self.zram.device
        out[f"{k}:cgroup"] = self.cgroup.path
        out[f"{k}:cgroup_oom_kills"] = self.cgroup.oom_kills()
        out[f"{k}:oom_retries"] = self.oom_retries
        out[f"{k}:cgroup_swappiness"] = self.cgroup.swappiness()
        return out


def _positive(orig, comp):
    return isinstance(orig, (int, float)) and isinstance(comp, (int, float)) and orig > 0 \
        and comp > 0


def _or_none(v, unit):
    return None if v is None else v / unit


def _delta(prefix, before, after):
    return {f"{prefix}{n}": after[n] - before[n] for n in after
            if isinstance(after.get(n), int) and isinstance(before.get(n), int)}


def _p99_us(job):
    pct = job["read"].get("clat_ns", {}).get("percentile", {})
    return pct.get("99.000000", 0) / 1000 or None


def _stat_file(mount, name):
    """MOUNT/.memfs/stats/NAME as {first word: first number after it}; {} if
    missing (stats/ops: each op's count)."""
    try:
        with open(os.path.join(mount, ".memfs", "stats", name)) as f:
            lines = f.read().splitlines()
    except OSError:
        return {}
    out = {}
    for line in lines:
        words = line.replace(":", " ").split()
        if len(words) >= 2 and words[1].isdigit():
            out[words[0]] = int(words[1])
    return out


def pager_stats(mount):
    """MOUNT/.memfs/stats/pager as {key: int}; {} when missing or unreadable."""
    path = os.path.join(mount, ".memfs", "stats", "pager")
    try:
        res = run_cmd(["cat", path], 30, check=False)
    except BenchError:
        return {}
    if res.returncode != 0:
        return {}
    out = {}
    for line in res.stdout.decode(errors="replace").splitlines():
        key, sep, value = line.partition(":")
        try:
            if sep:
                out[key.strip()] = int(value.strip().split()[0])
        except (ValueError, IndexError):
            continue
    return out


DAMON_ADMIN = "/sys/kernel/mm/damon/admin/kdamonds"


def _damon_pageout_bytes():
    """Bytes the host's DAMON has paged out so far (every running kdamond's
    pageout schemes, their stats refreshed first), or None when none runs.

    Some hosts (this project's VMs among them) run a DAMON scheme that pages
    out cold unmapped page cache, a few MiB to 128 MiB a second: memfs's
    files' pages in the kernel's page cache are such pages (tmpfs's are
    not), so a run in which it reclaims some has more of memfs's reads miss,
    and come back a second time (results.json: <case>:<bs>_damon_pageout_bytes)."""
    total, found = 0, False
    try:
        kdamonds = [d for d in os.listdir(DAMON_ADMIN) if d.isdigit()]
    except OSError:
        return None
    for k in kdamonds:
        base = os.path.join(DAMON_ADMIN, k)
        try:
            with open(os.path.join(base, "state")) as f:
                if f.read().strip() != "on":
                    continue
            with open(os.path.join(base, "state"), "w") as f:
                f.write("update_schemes_stats")
            for ctx in glob.glob(os.path.join(base, "contexts", "[0-9]*")):
                for scheme in glob.glob(os.path.join(ctx, "schemes", "[0-9]*")):
                    with open(os.path.join(scheme, "action")) as f:
                        if f.read().strip() != "pageout":
                            continue
                    with open(os.path.join(scheme, "stats", "sz_applied")) as f:
                        total += int(f.read())
                    found = True
        except (OSError, ValueError):
            continue
    return total if found else None


def _vmstat():
    out = {}
    with open("/proc/vmstat") as f:
        for line in f:
            key, _, value = line.partition(" ")
            out[key] = int(value)
    return out


def _proc_status(pid):
    out = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                key, _, rest = line.partition(":")
                if rest.strip().endswith("kB"):
                    out[key] = int(rest.split()[0])
    except OSError:
        pass
    return out


class _Sampler(threading.Thread):
    """Calls fn every SAMPLE_SECONDS until finish(); keeps the samples."""

    def __init__(self, fn):
        super().__init__(daemon=True)
        self.fn = fn
        self.first = fn()
        self.samples = [self.first]
        self._done = threading.Event()

    def run(self):
        while not self._done.wait(SAMPLE_SECONDS):
            self.samples.append(self.fn())

    def finish(self):
        self._done.set()
        self.join()
        self.samples.append(self.fn())


# -- the anchor's machinery -----------------------------------------------------------

def _read(path):
    with open(path) as f:
        return f.read().strip()


def _write(path, value):
    with open(path, "w") as f:
        f.write(f"{value}\n")


class MemCgroup:
    """A memory cgroup of this run's own, limited to `limit` bytes.

    cgroup v1 (the memory controller mounted at /sys/fs/cgroup/memory) or v2
    (a cgroup2 hierarchy whose root already delegates "memory"; nothing is
    enabled that was not). Created at the hierarchy's root, removed after.
    """
    V1 = "/sys/fs/cgroup/memory"

    def __init__(self, path, version):
        self.path, self.version = path, version
        self.procs = os.path.join(path, "cgroup.procs")

    @classmethod
    def create(cls, limit):
        if os.path.exists(os.path.join(cls.V1, "memory.limit_in_bytes")):
            root, version, limit_file = cls.V1, 1, "memory.limit_in_bytes"
        else:
            root = _cgroup2_root()
            if not root:
                raise AnchorUnavailable("no memory cgroup: neither the v1 memory controller at "
                                        f"{cls.V1} nor a cgroup2 hierarchy is mounted")
            try:
                delegated = _read(os.path.join(root, "cgroup.subtree_control")).split()
            except OSError:
                delegated = []
            if "memory" not in delegated:
                raise AnchorUnavailable(f"the cgroup2 root {root} does not enable the memory "
                                        "controller for its children (cgroup.subtree_control)")
            version, limit_file = 2, "memory.max"
        path = os.path.join(root, CGROUP_NAME)
        try:
            os.mkdir(path)
        except OSError as e:
            raise AnchorUnavailable(f"cannot create the cgroup {path}: {e}") from None
        cg = cls(path, version)
        try:
            _write(os.path.join(path, limit_file), limit)
            if version == 1:
                _write(os.path.join(path, "memory.swappiness"), CGROUP_SWAPPINESS)
        except OSError as e:
            cg.remove()
            raise AnchorUnavailable(f"cannot limit the cgroup {path}: {e}") from None
        return cg

    def _value(self, name):
        try:
            v = _read(os.path.join(self.path, name))
        except OSError:
            return None
        return None if v == "max" else int(v)

    def _keyed(self, name):
        try:
            text = _read(os.path.join(self.path, name))
        except OSError:
            return {}
        return {k: int(v) for k, v in (line.split() for line in text.splitlines())
                if v.lstrip("-").isdigit()}

    def usage(self):
        return self._value("memory.usage_in_bytes" if self.version == 1 else "memory.current")

    def peak(self):
        return self._value("memory.max_usage_in_bytes" if self.version == 1 else "memory.peak")

    def memsw_peak(self):
        if self.version == 1:
            return self._value("memory.memsw.max_usage_in_bytes")
        peak, swap = self.peak(), self._value("memory.swap.peak")
        return None if peak is None or swap is None else peak + swap

    def oom_kills(self):
        name = "memory.oom_control" if self.version == 1 else "memory.events"
        return self._keyed(name).get("oom_kill")

    def swappiness(self):
        return self._value("memory.swappiness") if self.version == 1 else None

    def remove(self):
        """rmdir, retried while exiting tasks still hold it. After a second, what is
        still in it is SIGKILLed: only this workload's clients are ever put there."""
        for attempt in range(100):
            try:
                os.rmdir(self.path)
                return
            except FileNotFoundError:
                return
            except OSError as e:
                if e.errno != errno.EBUSY or attempt == 99:
                    raise BenchError(f"could not remove the cgroup {self.path}: {e}") from None
                if attempt == 20:
                    for pid in self._members():
                        with contextlib.suppress(ProcessLookupError):
                            os.kill(pid, signal.SIGKILL)
                time.sleep(0.05)

    def _members(self):
        try:
            return [int(p) for p in _read(self.procs).split()]
        except OSError:
            return []


def _cgroup2_root():
    with open("/proc/mounts") as f:
        for line in f:
            fields = line.split()
            if len(fields) > 2 and fields[2] == "cgroup2":
                return fields[1]
    return None


class Zram:
    """A zram device of this run's own: hot-added (or /dev/zram0 if unused),
    swapped on (the anchor's swap) or left a bare block device (memfs's
    `backing=` in case 1's like-for-like rows), and after the run swapped off,
    reset and hot-removed."""
    CONTROL = "/sys/class/zram-control"

    def __init__(self, num, hot_added):
        self.num, self.hot_added, self.swapped_on = num, hot_added, False
        self.sys = f"/sys/block/zram{num}"
        self.device = f"/dev/zram{num}"

    @classmethod
    def create(cls, disksize, algorithm, swap=True):
        for tool in ("mkswap", "swapon", "swapoff"):
            if not shutil.which(tool):
                raise AnchorUnavailable(f"{tool} not found (Debian package util-linux)")
        if os.path.exists(os.path.join(cls.CONTROL, "hot_add")):
            try:
                num, hot = int(_read(os.path.join(cls.CONTROL, "hot_add"))), True
            except (OSError, ValueError) as e:
                raise AnchorUnavailable(f"zram hot_add failed: {e}") from None
        elif os.path.exists("/sys/block/zram0") and _read("/sys/block/zram0/initstate") == "0":
            num, hot = 0, False
        else:
            raise AnchorUnavailable("no zram device: the zram module is not loaded "
                                    "(modprobe zram) or /dev/zram0 is in use")
        z = cls(num, hot)
        try:
            offered = _read(f"{z.sys}/comp_algorithm").replace("[", " ").replace("]", " ")
            if algorithm not in offered.split():
                raise AnchorUnavailable(f"zram offers no {algorithm} (offers: {offered.split()})")
            _write(f"{z.sys}/comp_algorithm", algorithm)
            _write(f"{z.sys}/disksize", disksize)
            for _ in range(200):  # devtmpfs creates the node
                if os.path.exists(z.device):
                    break
                time.sleep(0.01)
            if swap:
                run_cmd(["mkswap", z.device], 60)
                run_cmd(["swapon", "-p", str(ZRAM_PRIORITY), z.device], 60)
                z.swapped_on = True
        except (OSError, BenchError, AnchorUnavailable) as e:
            z.remove()
            what = "swap" if swap else "a block device"
            raise AnchorUnavailable(f"setting up {z.device} as {what} failed: {e}") from None
        return z

    def mm_stat(self):
        names = ["orig_data_size", "compr_data_size", "mem_used_total", "mem_limit",
                 "mem_used_max", "same_pages", "pages_compacted", "huge_pages"]
        try:
            values = _read(f"{self.sys}/mm_stat").split()
        except OSError:
            return {}
        return {n: int(v) for n, v in zip(names, values)}

    def remove(self):
        """swapoff, reset, hot_remove; raises BenchError if any step failed."""
        errors = []
        if self.swapped_on or self.device in _active_swaps():
            for attempt in range(20):
                res = run_cmd(["swapoff", self.device], 600, check=False)
                if res.returncode == 0 or self.device not in _active_swaps():
                    self.swapped_on = False
                    break
                time.sleep(0.25)
            else:
                errors.append(f"swapoff {self.device}: {res.stderr.decode().strip()}")
        if not self.swapped_on:
            # A daemon that had it as its backing store may still be exiting after
            # its unmount returned (the device is busy until it closes it).
            for attempt in range(100):
                try:
                    _write(f"{self.sys}/reset", 1)
                    break
                except OSError as e:
                    if e.errno != errno.EBUSY or attempt == 99:
                        errors.append(f"reset {self.device}: {e}")
                        break
                    time.sleep(0.05)
            if self.hot_added:
                try:
                    _write(os.path.join(self.CONTROL, "hot_remove"), self.num)
                except OSError as e:
                    errors.append(f"hot_remove {self.num}: {e}")
        if errors:
            raise BenchError("tearing down the zram device failed: " + "; ".join(errors))


def _active_swaps():
    try:
        with open("/proc/swaps") as f:
            return [line.split()[0] for line in f.readlines()[1:] if line.strip()]
    except OSError:
        return []


# -- the corpus -----------------------------------------------------------------------

_corpora = {}  # scratch directory -> manifest, built once per suite run
CLIENT_PROGRAMS = ["fio", "postmark", "stdbuf", "sh", sys.executable]
_programs = []  # their files, see _program_files


def _corpus_bytes(quick):
    return 4 * (QUICK if quick else FULL)["ceiling"] + 8 * PIECE_MAX  # slack for _fill


def _corpus(ctx):
    """[{name, path, size, sha1}]: pieces of real files, at least 4 × C in all."""
    need = _corpus_bytes(ctx.cfg.quick)
    d = os.path.join(ctx.cfg.scratch, "pager-corpus")
    have = _corpora.get(d)
    if have and sum(e["size"] for e in have) >= need:
        return have
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    rng = random.Random(20261125)
    manifest, pending, total = [], bytearray(), 0
    size = _piece_size(rng)
    for data in _source_contents():
        pending += data
        while len(pending) >= size and total < need:
            piece, pending = bytes(pending[:size]), pending[size:]
            name = f"p{len(manifest):05d}"
            path = os.path.join(d, name)
            with open(path, "wb") as f:
                f.write(piece)
            manifest.append({"name": name, "path": path, "size": size,
                             "sha1": hashlib.sha1(piece).hexdigest()})
            total += size
            size = _piece_size(rng)
        if total >= need:
            break
    if total < need:
        raise BenchError(f"only {total} bytes of files in {SOURCES} for a corpus of {need}")
    _corpora[d] = manifest
    return manifest


def _piece_size(rng):
    return int(math.exp(rng.uniform(math.log(PIECE_MIN), math.log(PIECE_MAX))))


def _source_contents():
    """Contents (up to SOURCE_MAX each) of the regular files under SOURCES, taking
    one file of each in turn, in a fixed (sorted) order."""
    walkers = [_walk(root) for root in SOURCES if os.path.isdir(root)]
    while walkers:
        for w in list(walkers):
            path = next(w, None)
            if path is None:
                walkers.remove(w)
                continue
            try:
                with open(path, "rb") as f:
                    data = f.read(SOURCE_MAX)
            except OSError:
                continue
            if data:
                yield data


def _walk(root):
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(filenames):
            path = os.path.join(dirpath, name)
            if not os.path.islink(path) and os.path.isfile(path):
                yield path


def _fill(corpus, nbytes, skip=()):
    """Corpus pieces, in order, not in skip, that fit in nbytes: they hold
    between nbytes - PIECE_MIN and nbytes."""
    skipped = {e["name"] for e in skip}
    out, total = [], 0
    for e in corpus:
        if nbytes - total < PIECE_MIN:
            break
        if e["name"] not in skipped and total + e["size"] <= nbytes:
            out.append(e)
            total += e["size"]
    if nbytes - total >= PIECE_MIN:
        raise BenchError(f"corpus too small: {total} bytes for {nbytes}")
    return out


def _program_files():
    """The clients' programs and their shared libraries (ldd), found once."""
    if not _programs:
        found = set()
        for prog in CLIENT_PROGRAMS:
            path = shutil.which(prog)
            if not path:
                continue
            found.add(os.path.realpath(path))
            res = run_cmd(["ldd", path], 30, check=False)
            for word in res.stdout.decode(errors="replace").split():
                if word.startswith("/") and os.path.isfile(word):
                    found.add(os.path.realpath(word))
        _programs.extend(sorted(found))
    return _programs


def _warm(paths):
    """Read files (corpus pieces, the clients' programs) into the page cache from
    outside the cgroup, so that a client in it finds them cached and charged
    elsewhere: only the tmpfs data should count against the anchor's C. (fio's
    libraries alone are 80 MiB on Debian; loaded inside a 32 MiB cgroup they
    evicted each other and the data, and one 1-second fio took a minute.)"""
    buf = bytearray(MiB)
    for path in paths:
        with open(path, "rb", buffering=0) as f:
            while f.readinto(buf):
                pass


# The client: runs in its own process, inside the cgroup for the anchor. One
# JSON job in, one JSON answer out. Reads and writes 1 MiB at a time from one
# buffer so its own memory stays small (it counts against the anchor's limit).
CLIENT = r'''
import ctypes, hashlib, json, mmap, os, sys, time
job = json.load(open(sys.argv[1]))
op = job["op"]
buf = bytearray(1 << 20)
mv = memoryview(buf)
out = {}
if op == "copy":
    total, t0 = 0, time.perf_counter()
    for dst, srcs in job["files"]:
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        fd = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        for src in srcs:
            with open(src, "rb", buffering=0) as f:
                while True:
                    n = f.readinto(buf)
                    if not n:
                        break
                    view = mv[:n]
                    while view:
                        view = view[os.write(fd, view):]
                    total += n
        os.close(fd)
    out = {"seconds": time.perf_counter() - t0, "bytes": total}
elif op == "read":
    digests = job.get("sha1")
    seconds, total, bad = 0.0, 0, []
    for i, path in enumerate(job["files"]):
        h = hashlib.sha1() if digests else None
        t = time.perf_counter()
        f = open(path, "rb", buffering=0)
        seconds += time.perf_counter() - t
        while True:
            t = time.perf_counter()
            n = f.readinto(buf)
            seconds += time.perf_counter() - t
            if not n:
                break
            total += n
            if h:
                h.update(mv[:n])
        t = time.perf_counter()
        f.close()
        seconds += time.perf_counter() - t
        if h and h.hexdigest() != digests[i]:
            bad.append(path)
    out = {"seconds": seconds, "bytes": total, "bad": bad}
elif op == "drop":
    # O_NONBLOCK: on memfs such an open only looks (memfs where/evict do the
    # same); a plain read open of a memory file is a use that pages the file
    # in whole for passthrough, so dropping the cache would itself reload and
    # heat every file it touches (case 2 measured 21% before this, whatever
    # the policy did).
    for path in job["files"]:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.close(fd)
elif op == "resident":
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                          ctypes.c_int, ctypes.c_long]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]
    page = os.sysconf("SC_PAGE_SIZE")
    resident = pages = 0
    for path in job["files"]:
        size = os.path.getsize(path)
        if not size:
            continue
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # only looks (see "drop")
        addr = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        os.close(fd)
        if addr is None or addr == ctypes.c_void_p(-1).value:
            raise OSError(ctypes.get_errno(), "mmap " + path)
        n = (size + page - 1) // page
        vec = ctypes.create_string_buffer(n)
        rc = libc.mincore(addr, size, vec)
        libc.munmap(addr, size)
        if rc != 0:
            raise OSError(ctypes.get_errno(), "mincore " + path)
        resident += n - vec.raw[:n].count(0)
        pages += n
    out = {"resident": resident, "pages": pages}
print(json.dumps(out))
'''
