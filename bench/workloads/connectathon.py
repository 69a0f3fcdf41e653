"""Connectathon-style basic tests (written by us from their published
descriptions), in seconds per test, laid out like the tables in the HP-UX
MemFS paper (Figure 4) and the tmpfs paper (Table 1).

Owns: the test parameters; bench/native/cthon.c does the work.
"""
import json

import native
from proc import run as run_cmd
from runner import Case, Metric

NAME = "connectathon"
TITLE = "Connectathon-style basic tests"
DESCRIPTION = """
Our own C implementation (bench/native/cthon.c) of the nine Connectathon basic
tests as the MemFS paper describes them. Seconds per test, lower is better; the
ratio is tmpfs time / memfs time. Set-up outside each test is not timed.
"""

# (key, row label template) in the order of the papers' tables.
TESTS = [
    ("create", "Create: directory tree {levels} levels deep ({files_total} files, {dirs_total} dirs)"),
    ("remove", "Remove: that directory tree"),
    ("lookup", "Lookup: stat a directory {lookups} times"),
    ("setattr", "Setattr: chmod and stat {sa_files} files {sa_count} times each"),
    ("write", "Write: write and close a {rw_mib} MiB file {rw_count} times"),
    ("read", "Read: read that file {rw_count} times"),
    ("readdir", "Readdir: read {rd_files:,} files in a directory {rd_count} times"),
    ("link_rename", "Link and rename: rename, link and unlink {ln_files} files {ln_count} times"),
    ("symlink", "Symlink and readlink: create and read {sl_total} symlinks on {sl_files} files"),
    ("statfs", "Statfs: statfs the mount point {sf_count} times"),
]

PARAMS = dict(levels=6, files=5, dirs=2, lookups=500, sa_files=10, sa_count=1000,
              rw_bytes=1 << 20, rw_count=10, rd_files=20500, rd_count=200,
              ln_files=10, ln_count=200, sl_files=10, sl_count=40, sf_count=1500)
QUICK = dict(PARAMS, rd_count=20)
ORDER = ["levels", "files", "dirs", "lookups", "sa_files", "sa_count", "rw_bytes", "rw_count",
         "rd_files", "rd_count", "ln_files", "ln_count", "sl_files", "sl_count", "sf_count"]


def cases(cfg):
    return [Case(id="basic", label="basic tests", params=QUICK if cfg.quick else PARAMS)]


def _labels(p):
    dirs_per_level = [p["dirs"] ** lv for lv in range(p["levels"])]
    fmt = dict(p, files_total=p["files"] * sum(dirs_per_level),
               dirs_total=p["dirs"] * sum(dirs_per_level), rw_mib=p["rw_bytes"] >> 20,
               sl_total=p["sl_files"] * p["sl_count"])
    return {key: label.format(**fmt) for key, label in TESTS}


def metrics(case):
    labels = _labels(case.params)
    return [Metric(key=f"{case.id}:{key}", table="Seconds per test", label=labels[key],
                   unit="s", better="lower", short=labels[key].split(":")[0])
            for key, _ in TESTS]


def run(ctx):
    p = ctx.case.params
    cmd = [native.program("cthon"), ctx.dir] + [str(p[k]) for k in ORDER]
    out = json.loads(run_cmd(cmd, ctx.timeout(1800, 120)).stdout)
    return {f"{ctx.case.id}:{key}": out[key] for key, _ in TESTS}
