"""docs/benchmarks.md and the results-keeping policy.

Owns: rewriting docs/benchmarks.md from the latest full run (its date,
command, targets and charts) and bench/results/.gitignore so that only the
run the document references is kept; every other results directory is
scratch. Only a full run of every workload on a real memfs updates them.
"""
import os

import report
from sysinfo import REPO

DOC = os.path.join(REPO, "docs", "benchmarks.md")
RESULTS = os.path.join(REPO, "bench", "results")

INTRO = """# Benchmarks

memfs is measured against kernel tmpfs (the physical limit for a memory file
system on the same machine) in the same run, with the benchmarks the
documents this product comes from used: Postmark, the Connectathon basic
tests, fileop rates and memory per file, the tmpfs paper's create/delete loop,
bulk data with fio, a software-development workload, and mount/unmount time.

## How to run

    make bench          # full suite, 3 repetitions, 60-75 minutes; updates this page
    make bench-quick    # smoke run, about a minute; what CI runs

Both build memfs (`cargo build --release`) and run `python3 bench/run.py`
(root is needed: it mounts tmpfs and memfs and drops the page cache). Options:
`--also DIR` (compare another mounted file system too, repeatable),
`--reps N`, `--size SIZE` (of both memfs and tmpfs), `--memfs-options OPTS`
(extra memfs -o options, e.g. threads=2), `--only postmark,fio,...`.
Every run writes `bench/results/<timestamp>/` with `report.md`,
`results.json` (every raw value of every repetition) and the PNG charts.
Only the run referenced below is kept in git (see
`bench/results/.gitignore`); the rest is scratch. The suite reports speed,
it never fails on it; it exits non-zero when a run fails (a broken memfs).

The figures below were produced by the command shown, on the machine shown;
none is typed in by hand.

## Reading the figures

Whatever the kernel answers from its own caches runs at nearly tmpfs's
speed: stat of an unchanged file, open and close, warm reads. Everything else
is a FUSE round trip to the daemon, and on these machines (2 vCPUs of a VM
whose idle vCPUs halt) a round trip costs about 9-12 us with the daemon
polling (`poll_us`, docs/TUNABLES.md) and about 49 us without, while tmpfs
does the whole operation in 1-3 us. The kernel decides how many round trips
an operation costs: a create is LOOKUP + MKNOD, an unlink is UNLINK, and
either invalidates the directory's attributes, so the next path walk through
it adds a GETATTR; a file's first write adds a GETXATTR (security.capability);
every write(2) is one WRITE (no write-back cache, so that a full file system
gives ENOSPC at write time); a stat after a write is a GETATTR.
Metadata-heavy ratios are therefore set by that count times the round trip,
not by memfs's own work (a few microseconds per request, docs/DESIGN.md).
The metadata targets assume much cheaper round trips; the next step towards
them is FUSE-over-io_uring, whose per-CPU queues keep client and daemon on
one vCPU.
"""


def update(results, run_dir, images):
    """Rewrite docs/benchmarks.md from this run and keep only its directory."""
    rel = os.path.relpath(run_dir, os.path.dirname(DOC))
    body = report.render(results, images, image_prefix=rel + "/")
    body = "\n".join("#" + line if line.startswith("#") else line for line in body.splitlines())
    body = body.replace("## memfs benchmark report:", "## Latest full results:", 1)
    os.makedirs(os.path.dirname(DOC), exist_ok=True)
    with open(DOC, "w") as f:
        f.write(INTRO + "\n" + f"Raw data and report: `{os.path.relpath(run_dir, REPO)}/`.\n\n"
                + body + "\n")
    with open(os.path.join(RESULTS, ".gitignore"), "w") as f:
        f.write("# Policy: keep only the run that docs/benchmarks.md references; everything\n"
                "# else here is scratch. bench/docs.py rewrites this file after each full run.\n"
                f"/*\n!/.gitignore\n!/{os.path.basename(run_dir)}/\n")


def placeholder():
    """docs/benchmarks.md before any full run on a real memfs: intro and targets."""
    from targets import GOALS
    rows = "\n".join(f"- {g.text} ({g.short()})" for g in GOALS)
    with open(DOC, "w") as f:
        f.write(INTRO + "\n## Targets\n\n" + rows + "\n\n## Latest full results\n\n"
                "None yet: no full run (`make bench`) on a real memfs has completed.\n")


if __name__ == "__main__":
    # No argument: the page before any full run. With a run directory: rewrite
    # the page from that run's results.json (nothing is measured again).
    import json
    import sys
    if len(sys.argv) == 1:
        placeholder()
    else:
        run_dir = os.path.abspath(sys.argv[1])
        with open(os.path.join(run_dir, "results.json")) as f:
            data = json.load(f)
        if data["meta"]["mode"] != "full" or data["meta"]["memfs"].get("stand_in"):
            sys.exit("docs/benchmarks.md only takes a full run on a real memfs")
        update(data, run_dir, report.write(data, run_dir))
