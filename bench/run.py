#!/usr/bin/env python3
"""memfs benchmark suite: the entry point of `make bench` / `make bench-quick`.

Owns: the command line, the run configuration (quick or full), setting up the
compared file systems (memfs, kernel tmpfs of the same size, any --also
directories), running the workloads through bench/runner.py, writing
bench/results/<timestamp>/ (results.json, report.md, PNGs), updating
docs/benchmarks.md after a full run, and the exit status (non-zero when any
run failed, never because of speed). Always unmounts what it mounted.
"""
import argparse
import dataclasses
import datetime
import json
import os
import shlex
import shutil
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import docs  # noqa: E402
import report  # noqa: E402
import sysinfo  # noqa: E402
from filesystems import FileSystem, cleanup_base, mounts  # noqa: E402
from runner import any_failed, run_workload  # noqa: E402
from workloads import ALL, BY_NAME  # noqa: E402

RESULTS = os.path.join(sysinfo.REPO, "bench", "results")


@dataclasses.dataclass
class Config:
    quick: bool
    reps: int
    scratch: str  # outside every compared file system: configs, generated inputs
    # --only WORKLOAD:CASE: the case ids to run per workload (absent: all of them).
    cases: dict = dataclasses.field(default_factory=dict)


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true",
                    help="smoke run: small sizes, 1 repetition (under 3 minutes)")
    ap.add_argument("--reps", type=int, help="repetitions per case (default: 3, quick: 1)")
    ap.add_argument("--size", default="8G", help="size of both memfs and tmpfs (default 8G)")
    ap.add_argument("--memfs-options", default="",
                    help="extra memfs -o options, e.g. threads=2")
    ap.add_argument("--also", action="append", default=[], metavar="DIR",
                    help="also compare this (already mounted) directory; repeatable")
    ap.add_argument("--only", help="comma-separated workloads, or WORKLOAD:CASE for one "
                    "case of one: " + ",".join(BY_NAME))
    ap.add_argument("--out", help="results directory (default bench/results/<timestamp>)")
    ap.add_argument("--no-docs", action="store_true",
                    help="do not update docs/benchmarks.md after a full run")
    ap.add_argument("--docs", action="store_true",
                    help="with --only WORKLOAD(s), whole workloads in full mode: replace their "
                    "sections of docs/benchmarks.md with this run's")
    ap.add_argument("--memfs-kind", choices=["memfs", "tmpfs"], default="memfs",
                    help=argparse.SUPPRESS)  # dev switch: a tmpfs stands in for memfs
    args = ap.parse_args(argv)
    if args.reps is None:
        args.reps = 1 if args.quick else 3
    if args.only:
        unknown = {n.split(":")[0] for n in args.only.split(",")} - set(BY_NAME)
        if unknown:
            ap.error(f"unknown workload(s): {', '.join(sorted(unknown))}")
    for d in args.also:
        if not os.path.isdir(d):
            ap.error(f"--also {d}: not a directory")
    if args.docs and (not args.only or ":" in args.only or args.quick or args.no_docs or args.reps < 3):
        ap.error("--docs takes whole workloads (--only W,...) in full mode with 3 or more repetitions")
    return args


def log_to(path):
    def log(msg):
        line = f"{time.strftime('%H:%M:%S')} {msg}"
        print(line, file=sys.stderr, flush=True)
        with open(path, "a") as f:
            f.write(line + "\n")
    return log


def main(argv):
    args = parse_args(argv)
    if os.geteuid() != 0:
        sys.exit("bench/run.py needs root: it mounts file systems and drops the page cache")
    started = time.monotonic()
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S") + ("-quick" if args.quick else "")
    outdir = args.out or os.path.join(RESULTS, stamp)
    os.makedirs(outdir, exist_ok=True)
    log = log_to(os.path.join(outdir, "run.log"))
    base = f"/tmp/memfs-bench-{os.getpid()}"
    cfg = Config(quick=args.quick, reps=args.reps, scratch=os.path.join(base, "scratch"))
    for name, _, case in (n.partition(":") for n in (args.only or "").split(",") if ":" in n):
        cfg.cases.setdefault(name, set()).add(case)
    os.makedirs(cfg.scratch, exist_ok=True)

    common = f"size={args.size},nr_inodes=0"
    memfs_opts = ",".join(filter(None, [common, args.memfs_options]))
    filesystems = [
        FileSystem("memfs", args.memfs_kind, memfs_opts if args.memfs_kind == "memfs" else common,
                   os.path.join(base, "memfs")),
        FileSystem("tmpfs", "tmpfs", common, os.path.join(base, "tmpfs")),
        *[FileSystem(os.path.abspath(d), "dir", "", os.path.abspath(d)) for d in args.also],
    ]
    selected = (list(dict.fromkeys(BY_NAME[n.split(":")[0]] for n in args.only.split(",")))
                if args.only else ALL)
    meta = start_meta(args, argv, filesystems, common)
    results = {"meta": meta, "filesystems": [dict(name=f.name, kind=f.kind, options=f.options)
                                             for f in filesystems], "workloads": []}
    log(f"results in {outdir}; file systems: " + "; ".join(f.describe() for f in filesystems))

    def on_term(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")
    signal.signal(signal.SIGTERM, on_term)
    interrupted = False
    try:
        for mod in selected:
            log(f"{mod.NAME}: {mod.TITLE}")
            results["workloads"].append(run_workload(mod, filesystems, cfg, log))
            save(results, outdir, started)
    except KeyboardInterrupt:
        interrupted = True
        log("interrupted: writing what has run so far")
    finally:
        for fs in filesystems:
            if fs.managed and mounts.is_mountpoint(fs.path):
                fs.unmount()
        shutil.rmtree(cfg.scratch, ignore_errors=True)
        cleanup_base(base)

    save(results, outdir, started)
    images = report.write(results, outdir)
    log(f"report: {os.path.join(outdir, 'report.md')}")
    if (not args.quick and (not args.only or args.docs) and not args.no_docs and not interrupted
            and args.memfs_kind == "memfs"):
        docs.update(results, outdir, images, partial=bool(args.only))
        log(f"updated {docs.DOC}")
    if interrupted or any_failed(results["workloads"]):
        log("some runs FAILED (see the report's Failures section)")
        return 1
    return 0


def start_meta(args, argv, filesystems, common):
    memfs = filesystems[0]
    return {
        "date": datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z"),
        "mode": "quick" if args.quick else "full",
        "command": shlex.join(["python3", "bench/run.py", *argv]),
        "cwd": os.getcwd(),
        "machine": sysinfo.machine(),
        "load_start": sysinfo.loadavg(),
        "transport": sysinfo.fuse_uring(),
        "memfs": {
            "binary": mounts.MEMFS_BIN,
            "version": sysinfo.memfs_version(mounts.MEMFS_BIN),
            "sha256": sysinfo.file_digest(mounts.MEMFS_BIN),
            "commit": sysinfo.git_commit(),
            "options": memfs.options,
            "stand_in": None if args.memfs_kind == "memfs" else "kernel tmpfs (--memfs-kind tmpfs)",
        },
        "tmpfs_options": common,
        "also": [f.name for f in filesystems[2:]],
        "reps": args.reps,
        "tools": sysinfo.tool_versions(),
    }


def save(results, outdir, started):
    runs = [r for w in results["workloads"] for r in w["runs"]]
    results["meta"]["load_end"] = sysinfo.loadavg()
    results["meta"]["duration_s"] = round(time.monotonic() - started, 1)
    results["status"] = {"total_runs": len(runs), "failed_runs": sum(not r["ok"] for r in runs)}
    tmp = os.path.join(outdir, "results.json.tmp")
    with open(tmp, "w") as f:
        json.dump(results, f, indent=1)
    os.replace(tmp, os.path.join(outdir, "results.json"))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
