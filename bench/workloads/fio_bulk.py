"""Bulk data with fio (Debian package `fio`): a sequential write and read of
one large file in 1 MiB blocks, the read cold (page cache dropped) and warm,
and 4 KiB random reads on a 1 GiB file.

Owns: the fio job parameters and reading fio's JSON output.
"""
import json
import os

from proc import BenchError, drop_caches
from proc import run as run_cmd
from runner import Case, Metric

NAME = "fio"
TITLE = "Bulk data (fio)"
DESCRIPTION = """
fio with the psync engine, one job, no fallocate. Sequential write of the
whole file in 1 MiB blocks (end_fsync=1), then sequential read after
`sync; echo 3 > /proc/sys/vm/drop_caches` (cold) and again at once (warm).
Then a separate file is laid out, the cache dropped again, and 4 KiB random
reads run for a fixed time. Bandwidth and IOPS as fio reports them; higher is
better. (tmpfs keeps its data in the page cache, so its cold read is warm.)
"""

FULL = {"seq_bytes": 2 << 30, "rand_bytes": 1 << 30, "rand_seconds": 20}
QUICK = {"seq_bytes": 128 << 20, "rand_bytes": 64 << 20, "rand_seconds": 2}
ROWS = [("seq_write", "sequential write, 1 MiB blocks", "MiB/s"),
        ("seq_read_cold", "sequential read, 1 MiB blocks, cold cache", "MiB/s"),
        ("seq_read_warm", "sequential read, 1 MiB blocks, warm cache", "MiB/s"),
        ("rand_read", "random read, 4 KiB blocks", "IOPS")]


def cases(cfg):
    p = QUICK if cfg.quick else FULL
    label = f"{p['seq_bytes'] >> 20:,} MiB sequential, {p['rand_bytes'] >> 20:,} MiB random"
    return [Case(id="bulk", label=label, params=p)]


def metrics(case):
    p = case.params
    table = (f"{p['seq_bytes'] >> 20:,} MiB file sequential, "
             f"{p['rand_bytes'] >> 20:,} MiB file random ({p['rand_seconds']} s)")
    return [Metric(key=f"{case.id}:{key}", table=table, label=label, unit=unit, better="higher")
            for key, label, unit in ROWS]


def _fio(ctx, name, path, rw, bs, size, extra=()):
    cmd = ["fio", f"--name={name}", f"--filename={path}", f"--rw={rw}", f"--bs={bs}",
           f"--size={size}", "--ioengine=psync", "--numjobs=1", "--fallocate=none",
           "--output-format=json", *extra]
    return fio_job(cmd, name, ctx.timeout(1200, 120))


def fio_job(cmd, name, timeout):
    """Run fio command `cmd` (with --output-format=json); its one job's results."""
    out = run_cmd(cmd, timeout).stdout.decode(errors="replace")
    try:
        job = json.loads(out[out.index("{"):])["jobs"][0]
    except (ValueError, KeyError, IndexError):
        raise BenchError(f"fio output not understood: {out[-300:]!r}") from None
    if job.get("error"):
        raise BenchError(f"fio job {name} reported error {job['error']}")
    return job


def run(ctx):
    p = ctx.case.params
    seq = os.path.join(ctx.dir, "fio-seq")
    rand = os.path.join(ctx.dir, "fio-rand")
    k = ctx.case.id
    values = {}
    job = _fio(ctx, "seqwrite", seq, "write", "1M", p["seq_bytes"], ["--end_fsync=1"])
    values[f"{k}:seq_write"] = job["write"]["bw_bytes"] / 2**20
    drop_caches()
    job = _fio(ctx, "seqread-cold", seq, "read", "1M", p["seq_bytes"])
    values[f"{k}:seq_read_cold"] = job["read"]["bw_bytes"] / 2**20
    # fio drops a file's page cache before each job unless told not to
    # (invalidate=1 is its default); a warm read must keep the cache the
    # cold read just filled.
    job = _fio(ctx, "seqread-warm", seq, "read", "1M", p["seq_bytes"], ["--invalidate=0"])
    values[f"{k}:seq_read_warm"] = job["read"]["bw_bytes"] / 2**20
    run_cmd(["rm", "-f", seq], ctx.timeout(300, 60))
    _fio(ctx, "layout", rand, "write", "1M", p["rand_bytes"], ["--end_fsync=1"])
    drop_caches()
    job = _fio(ctx, "randread", rand, "randread", "4k", p["rand_bytes"],
               ["--time_based", f"--runtime={p['rand_seconds']}", "--norandommap",
                "--randrepeat=1"])
    values[f"{k}:rand_read"] = job["read"]["iops"]
    for key, _, _ in ROWS:
        if not values[f"{k}:{key}"] > 0:
            raise BenchError(f"fio reported no throughput for {key}")
    return values
