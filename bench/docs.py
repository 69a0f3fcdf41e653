"""docs/benchmarks.md and the results-keeping policy.

Owns: rewriting docs/benchmarks.md from the latest full run (its date,
command, targets and charts), the sections of workloads run alone since
(`run.py --only W --docs`, full mode: each with its own run's date, command
and charts, kept until the next full run), and bench/results/.gitignore so
that only the runs the document references are kept (bench/results/docs.json
lists them); every other results directory is scratch. Only runs on a real
memfs update them.
"""
import json
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

    make bench          # full suite, 3 repetitions, over two hours; updates this page
    make bench-quick    # smoke run, about a minute; what CI runs
    python3 bench/run.py --only pager --docs   # one workload, full mode: replaces its section below

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
speed: stat of an unchanged file, warm reads. Reads, writes and mmap of a
file opened with FUSE passthrough (large files, and new files while they
are written: docs/PASSTHROUGH.md) run in the kernel too. Everything else is
a FUSE round trip to the daemon. On these machines (2 vCPUs of a VM whose
idle vCPUs halt) a lone round trip costs about 6-13 us over /dev/fuse with
the daemon polling (`poll_us`, docs/TUNABLES.md), about 49 us without
polling, and about 9 us over io_uring with the memfs-awake helper
keeping the other vCPU awake (20-30 us without it: the client is woken on
the other, halted vCPU; docs/TRANSPORT.md), while tmpfs
does a whole create in about 5 us. The kernel decides how many round
trips an operation costs (docs/TRANSPORT.md, "Round trips per system
call"): a create is a LOOKUP and a CREATE (and a RELEASE after the close),
an unlink is an UNLINK (and a FORGET), and either marks the directory's
attributes stale, so the next path walk through it adds a GETATTR; a
file's first write adds a GETXATTR (security.capability); every write(2)
through a cached open is one WRITE (no write-back cache, so that a full
file system gives ENOSPC at write time); a stat after a write is a
GETATTR. Metadata-heavy ratios are therefore set by that count times the
round trip, not by memfs's own work (a few microseconds per request,
docs/DESIGN.md).
"""


INDEX = os.path.join(RESULTS, "docs.json")
LATER = "## Workloads run alone since the full run"
LATER_INTRO = """Each section below comes from a full-mode run of that workload alone
(`python3 bench/run.py --only WORKLOAD --docs`), newer than the full run
above, whose section for the same workload (if it has one) it supersedes.
The next full run replaces them all."""


def _demote(text):
    return "\n".join("#" + line if line.startswith("#") else line for line in text.splitlines())


def update(results, run_dir, images, partial=False):
    """Rewrite docs/benchmarks.md from this run. A full run of every workload
    replaces the page; a run of some workloads alone (partial) replaces only
    their sections under LATER. Keeps the referenced run directories."""
    index = _read_index()
    name = os.path.basename(run_dir)
    if partial:
        if not index.get("full") or not os.path.exists(DOC):
            raise SystemExit("docs/benchmarks.md takes a workload run alone only after a full run")
        for w in results["workloads"]:
            index["workloads"][w["name"]] = {"run": name, "images": [list(i) for i in _own(images, w["name"])]}
        with open(DOC) as f:
            base = f.read().split("\n" + LATER + "\n", 1)[0].rstrip("\n") + "\n"
    else:
        index = {"full": name, "workloads": {}}
        rel = os.path.relpath(run_dir, os.path.dirname(DOC))
        body = _demote(report.render(results, images, image_prefix=rel + "/"))
        body = body.replace("## memfs benchmark report:", "## Latest full results:", 1)
        base = (INTRO + "\n" + f"Raw data and report: `{os.path.relpath(run_dir, REPO)}/`.\n\n"
                + body + "\n")
    os.makedirs(os.path.dirname(DOC), exist_ok=True)
    with open(DOC, "w") as f:
        f.write(base + _later(index))
    with open(INDEX, "w") as f:
        json.dump(index, f, indent=1, sort_keys=True)
        f.write("\n")
    runs = sorted({index["full"], *(e["run"] for e in index["workloads"].values())})
    with open(os.path.join(RESULTS, ".gitignore"), "w") as f:
        f.write("# Policy: keep only the runs that docs/benchmarks.md references (docs.json);\n"
                "# everything else here is scratch. bench/docs.py rewrites this file.\n"
                "/*\n!/.gitignore\n!/docs.json\n" + "".join(f"!/{r}/\n" for r in runs))


def _own(images, workload):
    """The charts of `workload` among a run's (their file names carry the
    workload's name); all of them if none does."""
    own = [i for i in images if workload in os.path.splitext(i[0])[0].split("-")]
    return own or images


def _read_index():
    try:
        with open(INDEX) as f:
            return json.load(f)
    except FileNotFoundError:
        # Before docs.json existed: the full run is the one .gitignore keeps.
        try:
            with open(os.path.join(RESULTS, ".gitignore")) as f:
                kept = [ln[2:].strip("/\n") for ln in f if ln.startswith("!/") and ln.strip() != "!/.gitignore"]
        except FileNotFoundError:
            kept = []
        return {"full": kept[0] if kept else None, "workloads": {}}


def _later(index):
    """The sections of workloads run alone since the full run (Markdown)."""
    if not index["workloads"]:
        return ""
    out = ["", LATER, "", LATER_INTRO]
    for wname, entry in sorted(index["workloads"].items()):
        run_dir = os.path.join(RESULTS, entry["run"])
        with open(os.path.join(run_dir, "results.json")) as f:
            data = json.load(f)
        w = next(w for w in data["workloads"] if w["name"] == wname)
        rel = os.path.relpath(run_dir, os.path.dirname(DOC))
        head = report.header(data)[2:]  # its title line (and the blank after it) is this section's
        out += ["", f"### {w['title']}: {data['meta']['date']}", "", *head,
                f"- **Raw data and report:** `{os.path.relpath(run_dir, REPO)}/`", ""]
        out += [f"![{title}]({rel}/{img})" for img, title in _own(entry["images"], wname)]
        out += ["", w["description"].strip()]
        out += ["#" + ln if ln.startswith("#") else ln for ln in report.workload_tables(w, report.fs_names(data))]
        fails = [ln for ln in report.failures(data)]
        out += ["", "Failures: " + ("; ".join(fails) if fails else "none, every run succeeded.")]
    return "\n".join(out) + "\n"


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
        update(data, run_dir, report.write(data, run_dir), partial="--only" in data["meta"]["command"])
