"""The tmpfs paper's create/delete loop (Table 2): open, write N bytes, close,
reopen, read, close, delete; milliseconds per iteration for N = 0, 10 KB,
100 KB and 1 MB.

Owns: the sizes and iteration counts; bench/native/createdelete.c does the work.
"""
import json

import native
from proc import run as run_cmd
from runner import Case, Metric

NAME = "createdelete"
TITLE = "File create/delete loop"
DESCRIPTION = """
After the tmpfs paper (and Ousterhout 1990): each iteration creates a file,
writes N bytes in 8 KiB writes, closes it, reopens it, reads it back, closes
and deletes it. Milliseconds per iteration (mean of the iterations of one run;
the table shows the median of the runs). Lower is better.
"""

SIZES_KIB = [0, 10, 100, 1024]


def cases(cfg):
    iterations = 100 if cfg.quick else 1000
    return [Case(id=f"{kib}k", label=f"{kib} KiB", params={"bytes": kib * 1024,
                                                           "iterations": iterations})
            for kib in SIZES_KIB]


def metrics(case):
    kib = case.params["bytes"] // 1024
    label = "1024 (1 MiB)" if kib == 1024 else str(kib)
    return [Metric(key=f"{case.id}:ms", table="Milliseconds per create/write/read/delete iteration",
                   label=f"file size {label} KiB", unit="ms", better="lower")]


def run(ctx):
    p = ctx.case.params
    cmd = [native.program("createdelete"), ctx.dir, str(p["bytes"]), str(p["iterations"])]
    out = json.loads(run_cmd(cmd, ctx.timeout(1200, 60)).stdout)
    return {f"{ctx.case.id}:ms": out["ms_per_iteration"]}
