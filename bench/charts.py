"""PNG charts of one run, drawn with matplotlib.

Owns: the ratio-to-tmpfs charts (grouped bars per operation, one chart per
workload and direction, one panel per compared file system, with the 1.0
tmpfs line and the targets marked) and the Postmark chart (transactions/s
against transaction count, one line per file system, like the MemFS paper's
figures 2 and 3), and the pager's throughput against working set / ceiling
(one line per file system, like the MemFS paper's figure of where paging
sets in).
"""
import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from targets import goal_for  # noqa: E402

REFERENCE = "tmpfs"
COLORS = plt.get_cmap("tab10").colors
CLIP = 3.0  # bars above this ratio are cut and labelled


def write_all(results, outdir):
    """Write every chart; returns [(file name, title)]."""
    names = [fs["name"] for fs in results["filesystems"]]
    compared = [n for n in names if n != REFERENCE]
    out = []
    for w in results["workloads"]:
        if w["name"] == "postmark":
            out.append(_postmark(w, names, outdir))
        if w["name"] == "pager":
            out.append(_pager(w, names, outdir))
        if any(m["unit"] == "KiB/file" for m in w["metrics"]):
            out.append(_memory(w, names, outdir))
        for better in ("higher", "lower"):
            metrics = [m for m in w["metrics"] if m["better"] == better and m["chart"] and m["ratio"]]
            if metrics and compared:
                suffix = "" if better == "higher" else "-" + metrics[0]["unit"].replace("/", "-per-").replace("µ", "u")
                name = f"ratio-{w['name']}{suffix}.png"
                title = f"{w['title']}: ratio to tmpfs (higher is better)"
                if better == "lower":
                    title = f"{w['title']} ({metrics[0]['unit']}): tmpfs / this (higher is better)"
                _ratio_chart(w, metrics, compared, title, os.path.join(outdir, name))
                out.append((name, title))
    return [o for o in out if o]


def _ratio_chart(workload, metrics, compared, title, path):
    hues = list(dict.fromkeys(m["table"] for m in metrics))
    xs = list(dict.fromkeys(_short(m) for m in metrics))
    width = 0.8 / len(hues)
    fig_w = min(16.0, max(8.0, 4 + 0.3 * len(xs) * len(hues)))
    fig, axes = plt.subplots(len(compared), 1, figsize=(fig_w, 5.0 * len(compared)),
                             squeeze=False)
    for ax, fs in zip(axes[:, 0], compared):
        top = 1.2
        for h, hue in enumerate(hues):
            for m in (m for m in metrics if m["table"] == hue):
                x = xs.index(_short(m)) + (h - (len(hues) - 1) / 2) * width
                entry = workload["summary"][m["key"]]
                ratio = entry["ratio"].get(fs)
                if entry["by_fs"][fs].get("failed") or entry["by_fs"][REFERENCE].get("failed"):
                    ax.text(x, 0.02, "failed", rotation=90, ha="center", va="bottom",
                            color="red", fontsize=7, transform=ax.get_xaxis_transform())
                    continue
                if ratio is None:
                    continue
                ax.bar(x, min(ratio, CLIP), width * 0.92, color=COLORS[h % len(COLORS)],
                       label=hue.split(" (")[0] if not _has_label(ax, hue.split(" (")[0]) else None)
                shown = f"{ratio:.2f}" if ratio <= CLIP else f"{ratio:.1f}↑"
                ax.text(x, min(ratio, CLIP), shown, ha="center", va="bottom", fontsize=6,
                        rotation=90 if len(hues) > 2 else 0)
                top = max(top, min(ratio, CLIP) * 1.2)
                goal = goal_for(workload["name"], m["key"])
                if goal and goal.kind == "ratio":
                    ax.hlines(goal.value, x - width / 2, x + width / 2, colors="crimson",
                              linewidth=2, label=None)
        ax.axhline(1.0, color="black", linewidth=0.8, linestyle="--")
        ax.text(1.0, 1.0, " tmpfs = 1", transform=ax.get_yaxis_transform(), fontsize=7,
                va="center", ha="left")
        ax.set_ylim(0, top)
        ax.set_xlim(-0.6, len(xs) - 0.4)
        ax.set_xticks(range(len(xs)))
        ax.set_xticklabels([_wrap(x) for x in xs], rotation=30 if len(xs) > 6 else 0,
                           ha="right" if len(xs) > 6 else "center", fontsize=8)
        ax.set_ylabel(f"{fs} relative to tmpfs")
        ax.grid(axis="y", alpha=0.3)
        if any(goal_for(workload["name"], m["key"]) for m in metrics):
            ax.plot([], [], color="crimson", linewidth=2, label="target")
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    _save(fig, title, path)


def _save(fig, title, path):
    """Title, lay out, write the PNG and free the figure."""
    fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)


def _short(metric):
    return metric.get("short") or metric["label"]


def _wrap(label, width=22):
    words, lines, cur = label.split(), [], ""
    for w in words:
        if cur and len(cur) + len(w) + 1 > width:
            lines.append(cur)
            cur = w
        else:
            cur = f"{cur} {w}".strip()
    return "\n".join(lines + [cur])


def _postmark(workload, names, outdir):
    cases = {c["id"]: c["params"] for c in workload["cases"]}
    series = sorted({p["subdirs"] for p in cases.values()}, reverse=True)
    fig, axes = plt.subplots(1, len(series), figsize=(6 * len(series), 4.3), squeeze=False)
    for ax, subdirs in zip(axes[0], series):
        for i, fs in enumerate(names):
            pts = []
            for m in workload["metrics"]:
                p = cases[m["key"].split(":")[0]]
                if p["subdirs"] != subdirs:
                    continue
                entry = workload["summary"][m["key"]]["by_fs"][fs]
                if entry.get("median") is not None:
                    pts.append((p["transactions"], entry["median"], *_span(entry)))
            if not pts:
                continue
            pts.sort()
            x, y, lo, hi = zip(*pts)
            ax.errorbar(x, y, yerr=[[a - b for a, b in zip(y, lo)], [b - a for a, b in zip(y, hi)]],
                        marker="o", capsize=3, color=COLORS[i % len(COLORS)], label=fs)
        where = "100 subdirectories" if subdirs == 100 else f"{subdirs} directory"
        ax.set_title(f"10,000 files, {where}", fontsize=10)
        ax.set_xscale("log")
        ticks = sorted({p["transactions"] for p in cases.values()})
        ax.set_xticks(ticks)
        ax.set_xticklabels([f"{t // 1000:,}k" for t in ticks])
        ax.minorticks_off()
        ax.set_xlabel("transactions")
        ax.set_ylabel("transactions per second")
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    name = "postmark.png"
    _save(fig, "Postmark: transactions/s against transaction count (median, min-max bars)",
          os.path.join(outdir, name))
    return name, "Postmark transactions per second"


def _span(entry):
    """(min, max) of the runs that gave a figure (a partial median has some
    that did not)."""
    have = [v for v in entry["values"] if v is not None]
    return min(have), max(have)


def _pager(workload, names, outdir):
    """Case 1 of the pager workload: MiB/s of zipf reads against W / C, a
    panel per read size; None when the run has no such case."""
    cases = {c["id"]: c["params"] for c in workload["cases"] if c["params"].get("kind") == "ws"}
    if not cases:
        return None
    sizes = ("4k", "64k")
    fig, axes = plt.subplots(1, len(sizes), figsize=(6 * len(sizes), 4.3), squeeze=False)
    for ax, bs in zip(axes[0], sizes):
        for i, fs in enumerate(names):
            pts = []
            for cid, p in cases.items():
                entry = workload["summary"].get(f"{cid}:{bs}_mibs", {}).get("by_fs", {}).get(fs, {})
                if entry.get("median") is not None:
                    pts.append((p["ratio"], entry["median"], *_span(entry)))
            if not pts:
                continue
            pts.sort()
            x, y, lo, hi = zip(*pts)
            label = "tmpfs in a cgroup of C, zram swap" if fs == REFERENCE else f"{fs} ram=C"
            ax.errorbar(x, y, yerr=[[a - b for a, b in zip(y, lo)], [b - a for a, b in zip(y, hi)]],
                        marker="o", capsize=3, color=COLORS[i % len(COLORS)], label=label)
        ceiling = next(iter(cases.values()))["ceiling"] >> 20
        ax.set_title(f"zipf random reads of {bs.replace('k', ' KiB')}, C = {ceiling} MiB", fontsize=10)
        ax.set_xscale("log", base=2)
        ticks = sorted(p["ratio"] for p in cases.values())
        ax.set_xticks(ticks)
        ax.set_xticklabels([f"{t:g}" for t in ticks])
        ax.minorticks_off()
        ax.axvline(1, color="grey", linestyle="--", linewidth=0.8)
        ax.set_xlabel("working set / RAM ceiling")
        ax.set_ylabel("MiB/s")
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    name = "pager-ws.png"
    title = "Pager: read throughput against working set / ceiling (median, min-max bars)"
    _save(fig, title, os.path.join(outdir, name))
    return name, title


# Stacked parts of "all-in" (each file system has two of them).
MEMORY_PARTS = [("mem_rss", "daemon RSS"), ("mem_shmem", "Shmem (data pages)"),
                ("mem_slab", "kernel slab")]


def _memory(workload, names, outdir):
    """Memory per file: one stacked bar per file system per case."""
    cases = [c for c in workload["cases"]
             if any(m["key"] == f"{c['id']}:mem_allin" for m in workload["metrics"])]
    width = 0.8 / len(names)
    fig, ax = plt.subplots(figsize=(max(8.0, 2.2 * len(cases) + 3), 5))
    for i, fs in enumerate(names):
        for c, case in enumerate(cases):
            x = c + (i - (len(names) - 1) / 2) * width
            get = lambda part: workload["summary"][f"{case['id']}:{part}"]["by_fs"][fs]  # noqa: E731
            if get("mem_allin").get("failed"):
                ax.text(x, 0.1, "failed", rotation=90, ha="center", color="red", fontsize=7)
                continue
            bottom = 0.0
            for p, (part, label) in enumerate(MEMORY_PARTS):
                v = get(part).get("median")
                if v is None:
                    continue
                ax.bar(x, max(v, 0), width * 0.9, bottom=bottom, color=COLORS[p],
                       edgecolor=COLORS[i + 3], linewidth=1.5,
                       label=label if c == 0 and not _has_label(ax, label) else None)
                bottom += max(v, 0)
            allin = get("mem_allin").get("median")
            if allin is not None:
                ax.text(x, bottom, f"{fs}\n{allin:.2f}", ha="center", va="bottom", fontsize=7)
            goal = goal_for(workload["name"], f"{case['id']}:mem_allin")
            if goal and goal.kind == "max" and fs == "memfs":
                ax.hlines(goal.value, x - width / 2, x + width / 2, colors="crimson", linewidth=2,
                          label="memfs target" if not _has_label(ax, "memfs target") else None)
    ax.set_xticks(range(len(cases)))
    ax.set_xticklabels([c["label"] for c in cases], fontsize=8)
    ax.set_ylabel("KiB per file (all-in: stacked solid parts)")
    ax.set_ylim(0, ax.get_ylim()[1] * 1.15)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    name = "memory.png"
    _save(fig, "Memory per file, measured after creating the files (lower is better)",
          os.path.join(outdir, name))
    return name, "Memory per file"


def _has_label(ax, label):
    return label in ax.get_legend_handles_labels()[1]
