"""The shared runner: alternates the file systems (A B A B ...), repeats, and
takes medians and ratios. Workloads only describe what to run.

A workload module provides:
  NAME, TITLE, DESCRIPTION       strings for the report
  cases(cfg) -> [Case]           what to run, in order
  metrics(case) -> [Metric]      what each run of a case yields for the tables
  run(ctx) -> {key: value}       one run on one file system (ctx below);
                                 raises on failure; a value of None means
                                 "not applicable to this file system"
  MANAGES_MOUNTS = True          (optional) run() mounts and unmounts itself

Both file systems stay mounted side by side while a workload runs; each run
gets a fresh, empty mount (the one just used is replaced at once).

Owns: the order of runs, failure capture (a failed run is recorded with its
message, never turned into a number), recovering a dead memfs mount between
runs, and the summary (medians, ratio to tmpfs with higher = better).
"""
import dataclasses
import statistics
import time
import traceback

from proc import BenchError


@dataclasses.dataclass
class Case:
    id: str      # short, unique in the workload (used in metric keys)
    label: str   # shown in the report
    params: dict


@dataclasses.dataclass
class Metric:
    key: str          # unique in the workload: "<case id>:<name>"
    table: str        # title of the report table the row goes in
    label: str        # row label
    unit: str
    better: str       # "higher" or "lower"
    ratio: bool = True  # show the ratio to tmpfs
    chart: bool = True  # include in the ratio chart
    short: str = ""     # label on the chart's axis (default: label)


@dataclasses.dataclass
class Context:
    """Everything one run may use."""
    cfg: object        # run.Config
    fs: object         # filesystems.FileSystem under test
    case: Case
    dir: str = ""      # work directory inside fs (empty for MANAGES_MOUNTS)
    rep: int = 0

    def timeout(self, full, quick=None):
        return quick if (self.cfg.quick and quick is not None) else full


def run_workload(mod, filesystems, cfg, log):
    """Run every case of one workload on every file system, alternating."""
    cases = mod.cases(cfg)
    wanted = cfg.cases.get(mod.NAME)
    if wanted:
        unknown = wanted - {c.id for c in cases}
        if unknown:
            raise SystemExit(f"{mod.NAME} has no case {', '.join(sorted(unknown))}; its cases: "
                             + ", ".join(c.id for c in cases))
        cases = [c for c in cases if c.id in wanted]
    runs = []
    side_by_side = not getattr(mod, "MANAGES_MOUNTS", False)
    if side_by_side:
        for fs in filesystems:
            _remount(fs)
    try:
        for case in cases:
            # A case may cap its repetitions (params["max_reps"]: one run of
            # it is long, e.g. scale's 10 million files).
            for rep in range(min(cfg.reps, case.params.get("max_reps", cfg.reps))):
                for fs in filesystems:
                    runs.append(_run_one(mod, case, fs, rep, cfg, log))
    finally:
        if side_by_side:
            for fs in filesystems:
                if fs.managed:
                    fs.unmount()
    metrics = [m for case in cases for m in mod.metrics(case)]
    return {
        "name": mod.NAME,
        "title": mod.TITLE,
        "description": mod.DESCRIPTION.strip(),
        "cases": [dataclasses.asdict(c) for c in cases],
        "metrics": [dataclasses.asdict(m) for m in metrics],
        "runs": runs,
        "summary": summarize(metrics, runs, [fs.name for fs in filesystems]),
    }


def _run_one(mod, case, fs, rep, cfg, log):
    ctx = Context(cfg=cfg, fs=fs, case=case, rep=rep)
    record = {"case": case.id, "fs": fs.name, "rep": rep, "ok": False, "values": {}, "error": None}
    t0 = time.monotonic()
    log(f"  {mod.NAME} [{case.label}] rep {rep + 1}/{cfg.reps} on {fs.name} ...")
    try:
        if getattr(mod, "MANAGES_MOUNTS", False):
            record["values"] = mod.run(ctx)
        else:
            ctx.dir = fs.workdir() or fs.mount()
            try:
                record["values"] = mod.run(ctx)
            finally:
                alive = fs.healthy()
                _remount(fs)  # the next run, on either file system, meets an empty one
            if not alive:
                raise BenchError(f"{fs.name} mount was dead after the run")
        record["ok"] = True
    except BenchError as e:
        record["error"] = str(e)
    except Exception as e:  # a bug or an OSError: still a failed run, not a number
        record["error"] = f"{type(e).__name__}: {e}\n{traceback.format_exc(limit=3)}"
    record["seconds"] = round(time.monotonic() - t0, 3)
    status = "ok" if record["ok"] else "FAILED: " + record["error"].splitlines()[0][:200]
    log(f"    {status} ({record['seconds']:.1f}s)")
    return record


def _remount(fs):
    """Replace fs by a fresh, empty mount (a scratch directory for --also)."""
    fs.unmount()
    if fs.managed:
        try:
            fs.mount()
        except BenchError:
            pass  # recorded when the next run on fs tries to mount it


def note(module, text):
    """Add a **Note:** paragraph to a workload module's DESCRIPTION, once per
    text: what a run could not set up or measure. The runner reads DESCRIPTION
    after the workload's runs, so a note reaches the report and results.json."""
    notes = module.__dict__.setdefault("_notes", [])
    if text not in notes:
        notes.append(text)
        module.DESCRIPTION = module.DESCRIPTION.rstrip() + f"\n\n**Note:** {text}\n"


def summarize(metrics, runs, fs_names, reference="tmpfs"):
    """Per metric: per file system the median of its runs, and the ratio.

    A (case, file system) with any failed run has no median: it is reported
    as failed. A run that finished without a figure for a metric (the pager's
    anchor OOM-killed in one repetition, say) leaves that metric the median
    of the runs that have one, marked with how many (`partial`: "2 of 3");
    with none at all it has no median. Ratios are medians over the tmpfs
    median, inverted for lower-is-better metrics, so a higher ratio is
    always better.
    """
    out = {}
    case_of = {m.key: m.key.split(":", 1)[0] for m in metrics}
    for m in metrics:
        entry = {"by_fs": {}, "ratio": {}}
        for name in fs_names:
            mine = [r for r in runs if r["case"] == case_of[m.key] and r["fs"] == name]
            failed = [r for r in mine if not r["ok"]]
            values = [r["values"].get(m.key) for r in mine if r["ok"]]
            if failed or not mine:
                entry["by_fs"][name] = {"failed": True, "values": values,
                                        "errors": [r["error"] for r in failed]}
            elif any(v is None for v in values):
                have = [v for v in values if v is not None]
                entry["by_fs"][name] = {"failed": False, "values": values,
                                        "median": statistics.median(have) if have else None}
                if have:
                    entry["by_fs"][name]["partial"] = f"{len(have)} of {len(values)}"
            else:
                entry["by_fs"][name] = {"failed": False, "median": statistics.median(values),
                                        "values": values}
        ref = entry["by_fs"].get(reference, {}).get("median")
        for name in fs_names:
            med = entry["by_fs"][name].get("median")
            if name == reference or not m.ratio or med is None or ref is None:
                continue
            if m.better == "higher":
                entry["ratio"][name] = med / ref if ref else None
            else:
                entry["ratio"][name] = ref / med if med else None
        out[m.key] = entry
    return out


def any_failed(results):
    return any(not r["ok"] for w in results for r in w["runs"])
