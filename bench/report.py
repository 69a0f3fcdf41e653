"""The markdown report of one run (report.md beside results.json and the PNGs).

Owns: turning results.json into tables laid out like the papers' (rows =
tests or operations, columns = file systems), the targets table, the run's
header (machine, load, memfs build and options, exact command) and the list
of failed runs. Can be re-run on a results.json:
    python3 bench/report.py bench/results/<timestamp>/results.json
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import charts  # noqa: E402
from targets import GOALS, goal_for  # noqa: E402

MEMFS = "memfs"


def fmt_value(v, unit):
    if v is None:
        return "–"
    if unit in ("ops/s", "tx/s", "IOPS", "MiB/s"):
        return f"{v:,.0f}"
    if unit == "KiB/file":
        return f"{v:.2f}"
    if abs(v) >= 100:
        return f"{v:,.0f}"
    return f"{v:.3g}" if abs(v) >= 0.01 else f"{v:.2g}"


def fmt_ratio(r):
    return "–" if r is None else f"{r:.2f}×"


def mark(met):
    return {True: "✅ met", False: "❌ not met", None: "–"}[met]


def cell(entry, unit):
    if entry.get("failed"):
        ok = len(entry.get("values", []))
        return f"**FAILED** ({ok} ok)" if ok else "**FAILED**"
    value = fmt_value(entry.get("median"), unit)
    # The median of the runs that gave a figure, where some did not.
    return f"{value} ({entry['partial']} runs)" if entry.get("partial") else value


def fs_names(results):
    return [fs["name"] for fs in results["filesystems"]]


def goal_result(workload, metric, summary):
    """(goal, met) for memfs on one metric, or (None, None)."""
    goal = goal_for(workload["name"], metric["key"])
    if not goal:
        return None, None
    entry = summary[metric["key"]]
    value = entry["by_fs"].get(MEMFS, {}).get("median")
    return goal, goal.met(entry["ratio"].get(MEMFS), value)


def workload_tables(workload, names):
    """Markdown tables of one workload, one per metric table title."""
    others = [n for n in names if n != "tmpfs"]
    header = ["", *[f"{n} ({{unit}})" for n in names], *[f"{n}/tmpfs" for n in others],
              "target", "memfs meets it"]
    lines = []
    # Tables in order of appearance, those spanning several cases (a summary
    # such as memory per file) after the per-case ones.
    cases_in = {}
    for m in workload["metrics"]:
        cases_in.setdefault(m["table"], set()).add(m["key"].split(":")[0])
    tables = sorted(dict.fromkeys(m["table"] for m in workload["metrics"]),
                    key=lambda t: len(cases_in[t]) > 1)
    ordered = [m for t in tables for m in workload["metrics"] if m["table"] == t]
    current = None
    for m in ordered:
        if m["table"] != current:
            current = m["table"]
            lines += ["", f"### {current}", "",
                      "| " + " | ".join(h.format(unit=m["unit"]) for h in header) + " |",
                      "|" + "---|" * len(header)]
        entry = workload["summary"][m["key"]]
        goal, met = goal_result(workload, m, workload["summary"])
        row = [m["label"], *[cell(entry["by_fs"][n], m["unit"]) for n in names],
               *[fmt_ratio(entry["ratio"].get(n)) if m["ratio"] else "" for n in others],
               goal.short() if goal else "", mark(met) if goal else ""]
        lines.append("| " + " | ".join(row) + " |")
    return lines


def targets_table(results):
    """One row per target: memfs's worst and best case and how many cases meet it."""
    lines = ["| target | cases | memfs, worst case | memfs, best case | met |", "|---|---|---|---|---|"]
    for goal in GOALS:
        judged = []
        for w in results["workloads"]:
            for m in w["metrics"]:
                g, met = goal_result(w, m, w["summary"])
                if g is goal:
                    entry = w["summary"][m["key"]]
                    shown = (entry["ratio"].get(MEMFS) if goal.kind == "ratio"
                             else entry["by_fs"].get(MEMFS, {}).get("median"))
                    judged.append((shown, met, m))
        if not judged:
            lines.append(f"| {goal.text} | not run | | | – |")
            continue
        valid = [j for j in judged if j[0] is not None]
        show = (lambda v: fmt_ratio(v)) if goal.kind == "ratio" else (lambda v: f"{v:.2f} KiB")
        reverse = goal.kind != "ratio"  # for a maximum the worst case is the largest
        if valid:
            worst = sorted(valid, key=lambda j: j[0], reverse=reverse)[0]
            best = sorted(valid, key=lambda j: j[0], reverse=not reverse)[0]
            worst_s = f"{show(worst[0])} ({worst[2]['table'].split(' (')[0]}: {worst[2]['label']})"
            best_s = f"{show(best[0])} ({best[2]['table'].split(' (')[0]}: {best[2]['label']})"
        else:
            worst_s = best_s = "no result"
        n_met = sum(1 for j in judged if j[1])
        verdict = ("✅ met" if n_met == len(judged) else
                   f"❌ met in {n_met} of {len(judged)}" if valid else "– no result")
        lines.append(f"| {goal.text} | {len(judged)} | {worst_s} | {best_s} | {verdict} |")
    return lines


def header(results):
    meta = results["meta"]
    mach = meta["machine"]
    memfs = meta["memfs"]
    status = results["status"]
    lines = [
        f"# memfs benchmark report: {meta['date']} ({meta['mode']} mode)",
        "",
        f"- **Command:** `{meta['command']}` (in `{meta['cwd']}`)",
        f"- **Machine:** {mach['cores']} cores ({mach['cpu']}), "
        f"{mach['mem_total_kib'] / 2**20:.1f} GiB memory, Linux {mach['kernel']}, {mach['os']}",
        f"- **Load average** (1/5/15 min): {meta['load_start']} at start, {meta['load_end']} at end",
        f"- **memfs:** {memfs['version']}, commit {memfs['commit']}, binary `{memfs['binary']}` "
        f"(sha256 {memfs.get('sha256', '?')}…), options `-o {memfs['options']}`",
    ]
    if meta.get("transport"):
        lines.append(f"- **FUSE transport** (`uring=auto`, where a workload does not set it): {meta['transport']}")
    if memfs.get("stand_in"):
        lines.append(f"- **WARNING:** memfs was replaced by a stand-in ({memfs['stand_in']}): "
                     "these are not memfs figures.")
    lines += [
        f"- **Reference:** kernel tmpfs `-o {meta['tmpfs_options']}`, mounted beside memfs",
    ]
    if meta["also"]:
        lines.append(f"- **Also compared:** {', '.join(meta['also'])}")
    lines += [
        f"- **Method:** each workload's cases run {meta['reps']} time(s) on each file system, "
        "alternating (A B A B ...), each run on a fresh mount; tables show medians. "
        "Ratio = memfs/tmpfs for rates and tmpfs/memfs for times and memory, so higher is "
        "better everywhere. Targets are shown, not enforced.",
        "- **Tools:** " + ", ".join(f"{k} {v}" for k, v in meta["tools"].items()),
        f"- **Duration:** {meta['duration_s'] / 60:.1f} min",
        f"- **Status:** {status['total_runs'] - status['failed_runs']} of {status['total_runs']} "
        "runs succeeded" + (" — **some runs FAILED, see Failures**" if status["failed_runs"] else ""),
    ]
    return lines


def failures(results):
    lines = []
    for w in results["workloads"]:
        for r in w["runs"]:
            if not r["ok"]:
                first = r["error"].strip().splitlines()[0][:500].replace("`", "'")
                lines.append(f"- {w['name']} [{r['case']}] rep {r['rep'] + 1} on {r['fs']}: `{first}`")
    return lines


def render(results, images, image_prefix=""):
    """Markdown text of the report; images = [(file name, title)] of its charts."""
    names = fs_names(results)
    lines = header(results)
    lines += ["", "## Targets", "", *targets_table(results)]
    lines += ["", "## Charts", ""]
    lines += [f"![{title}]({image_prefix}{name})" for name, title in images]
    for w in results["workloads"]:
        lines += ["", f"## {w['title']}", "", w["description"]]
        lines += workload_tables(w, names)
    fails = failures(results)
    lines += ["", "## Failures", ""] + (fails or ["None: every run succeeded."])
    return "\n".join(lines) + "\n"


def write(results, outdir):
    """Draw the charts and write report.md into outdir; returns the charts."""
    images = charts.write_all(results, outdir)
    with open(os.path.join(outdir, "report.md"), "w") as f:
        f.write(render(results, images))
    return images


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: report.py RESULTS.json")
    with open(sys.argv[1]) as f:
        data = json.load(f)
    write(data, os.path.dirname(os.path.abspath(sys.argv[1])))
