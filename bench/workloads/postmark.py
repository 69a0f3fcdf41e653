"""Postmark (NetApp, Debian package `postmark`) in the HP-UX MemFS paper's
configuration: files of 10,000-15,000 bytes, a pool of 10,000 files, in 100
subdirectories and, as a second series, in 1 directory, over a series of
transaction counts.

Owns: the Postmark configuration and timing its phases. Postmark prints whole
seconds only, so the suite times the transaction phase itself: postmark runs
unbuffered (stdbuf -o0) and the suite stamps the moment it prints
"Performing transactions" and the "Done" after it. Transactions per second =
transactions / that interval.
"""
import os
import re
import select
import subprocess
import time

from proc import BenchError, kill_group
from runner import Case, Metric

NAME = "postmark"
TITLE = "Postmark"
DESCRIPTION = """
Postmark v1.51 as configured in the HP-UX MemFS white paper: `set size 10000
15000`, `set number 10000`, `set subdirectories 100` (and 1), `set
transactions N`, everything else at Postmark's defaults. Transactions per
second are timed by the suite (Postmark itself prints whole seconds): the
interval between Postmark announcing the transaction phase and finishing it.
"""

FULL_TRANSACTIONS = [1000, 10000, 25000, 75000, 125000, 300000, 500000]
QUICK_TRANSACTIONS = [1000, 5000]
SUBDIRS = [100, 1]
FILES = 10000


def cases(cfg):
    series = QUICK_TRANSACTIONS if cfg.quick else FULL_TRANSACTIONS
    return [Case(id=f"d{d}-t{t}", label=f"{_where(d)}, {t:,} transactions",
                 params={"subdirs": d, "transactions": t})
            for d in SUBDIRS for t in series]


def _where(subdirs):
    return f"{subdirs} subdirectories" if subdirs > 1 else "1 directory"


def table_title(subdirs):
    return f"{FILES:,} files of 10,000-15,000 bytes in {_where(subdirs)} (transactions/s)"


def metrics(case):
    p = case.params
    return [Metric(key=f"{case.id}:tps", table=table_title(p["subdirs"]),
                   label=f"{p['transactions']:,} transactions", unit="tx/s", better="higher")]


def config(location, subdirs, transactions):
    return "\n".join([
        f"set location {location}",
        "set size 10000 15000",
        f"set number {FILES}",
        f"set transactions {transactions}",
        f"set subdirectories {subdirs}",
        "set report verbose",
        "run",
        "quit",
        "",
    ])


def run(ctx):
    p = ctx.case.params
    figures = timed(ctx.dir, p["subdirs"], p["transactions"], ctx.cfg.scratch, ctx.timeout(3600, 300))
    return {f"{ctx.case.id}:{name}": value for name, value in figures.items()}


def timed(location, subdirs, transactions, scratch, timeout):
    """Run Postmark in `location` (its config file in `scratch`) and time the
    transaction phase from its output's arrival: {tps, transaction_seconds,
    postmark_reported_seconds, total_seconds}. Also used by the passthrough
    and transport workloads."""
    cfg_path = os.path.join(scratch, f"postmark-{os.getpid()}.cfg")
    with open(cfg_path, "w") as f:
        f.write(config(location, subdirs, transactions))
    stamps, output = _run_stamped(["stdbuf", "-o0", "postmark", cfg_path], scratch, timeout)
    start = _stamp_after(stamps, output, "Performing transactions")
    end = _stamp_after(stamps, output, "Done\nDeleting files", after=start)
    secs = end[0] - start[0]
    reported = re.search(r"(\d+) seconds of transactions", output)
    if secs <= 0 or not reported:
        raise BenchError(f"could not time the transaction phase: {output[-300:]!r}")
    return {"tps": transactions / secs, "transaction_seconds": secs,
            "postmark_reported_seconds": int(reported.group(1)), "total_seconds": stamps[-1][0]}


def _run_stamped(cmd, cwd, timeout):
    """Run cmd; return ([(seconds since start, output length so far)], output)."""
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, start_new_session=True)
    stamps, chunks, size = [], [], 0
    try:
        while True:
            if time.monotonic() - t0 > timeout:
                raise BenchError(f"postmark timed out after {timeout}s")
            chunk = _read(proc.stdout.fileno(), t0 + timeout - time.monotonic())
            if not chunk:
                break
            size += len(chunk)
            chunks.append(chunk)
            stamps.append((time.monotonic() - t0, size))
        proc.wait(timeout=max(1, t0 + timeout - time.monotonic()))
    except (BenchError, subprocess.TimeoutExpired):
        kill_group(proc)
        raise BenchError(f"postmark timed out after {timeout}s") from None
    output = b"".join(chunks).decode(errors="replace")
    if proc.returncode != 0 or "Deleting files" not in output:
        raise BenchError(f"postmark failed (exit {proc.returncode}): {output[-400:]!r}")
    return stamps, output


def _read(fd, timeout):
    ready, _, _ = select.select([fd], [], [], max(0.0, timeout))
    if not ready:
        raise BenchError("no output from postmark")
    return os.read(fd, 65536)


def _stamp_after(stamps, output, text, after=None):
    """The stamp of the chunk in which `text` finished arriving."""
    begin = 0 if after is None else after[1]
    pos = output.find(text, max(0, begin - len(text)))
    if pos < 0:
        raise BenchError(f"postmark output lacks {text!r}: {output[-300:]!r}")
    end = pos + len(text)
    for stamp in stamps:
        if stamp[1] >= end:
            return stamp
    raise BenchError("postmark output stamps inconsistent")
