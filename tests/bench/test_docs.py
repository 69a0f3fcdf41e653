"""bench/docs.py: docs/benchmarks.md from a full run, and the sections of
workloads run alone since (`run.py --only W --docs`), with the results
directories the page references kept and no other (no mount needed: runs on
synthetic results in a temporary directory)."""
import json
import os
import sys

import pytest

BENCH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench")
sys.path.insert(0, BENCH)

docs = pytest.importorskip("docs")  # needs matplotlib, as the benchmark suite does


def results(date, commit, workloads, command):
    """A results.json of the shape bench/run.py writes, with one metric a workload."""
    meta = {"date": date, "mode": "full", "command": command, "cwd": "/src", "reps": 3,
            "machine": {"cores": 2, "cpu": "cpu", "mem_total_kib": 2**20, "kernel": "6.18", "os": "Debian"},
            "load_start": "0", "load_end": "0", "also": [], "tools": {}, "duration_s": 60,
            "tmpfs_options": "size=1G",
            "memfs": {"version": "memfs 0.1.0", "commit": commit, "binary": "memfs", "options": "size=1G"}}
    ws = []
    for name, value in workloads.items():
        key = "c1:rate"
        ws.append({"name": name, "title": f"The {name} workload", "description": f"What {name} does.",
                   "cases": [{"id": "c1", "params": {}}], "runs": [],
                   "metrics": [{"key": key, "table": f"{name} table", "label": "rate", "unit": "MiB/s",
                                "better": "higher", "ratio": True, "chart": False}],
                   "summary": {key: {"by_fs": {"memfs": {"median": value, "values": [value]},
                                               "tmpfs": {"median": 100.0, "values": [100.0]}},
                                     "ratio": {"memfs": value / 100.0}}}})
    return {"meta": meta, "filesystems": [{"name": "memfs"}, {"name": "tmpfs"}], "workloads": ws,
            "status": {"total_runs": 2, "failed_runs": 0}}


@pytest.fixture
def place(tmp_path, monkeypatch):
    """docs.py writing into tmp_path: RESULTS and the page."""
    res = tmp_path / "bench" / "results"
    res.mkdir(parents=True)
    monkeypatch.setattr(docs, "RESULTS", str(res))
    monkeypatch.setattr(docs, "INDEX", str(res / "docs.json"))
    monkeypatch.setattr(docs, "DOC", str(tmp_path / "docs" / "benchmarks.md"))
    monkeypatch.setattr(docs, "REPO", str(tmp_path))

    def run(name, data, partial):
        d = res / name
        d.mkdir()
        (d / "results.json").write_text(json.dumps(data))
        docs.update(data, str(d), [(f"{name}.png", f"chart of {name}")], partial=partial)
        return (tmp_path / "docs" / "benchmarks.md").read_text(), (res / ".gitignore").read_text()
    return run


def test_a_workload_run_alone_replaces_only_its_own_section(place):
    page, kept = place("full1", results("day 1", "aaa", {"postmark": 30.0, "pager": 20.0}, "run.py"), False)
    assert "Latest full results: day 1" in page and docs.LATER not in page
    assert "!/full1/" in kept

    page, kept = place("pager1", results("day 2", "bbb", {"pager": 48.0}, "run.py --only pager --docs"), True)
    assert page.count(docs.LATER) == 1
    later = page.split(docs.LATER, 1)[1]
    assert "### The pager workload: day 2" in later and "commit bbb" in later and "0.48×" in later
    assert "(../bench/results/pager1/pager1.png)" in later
    assert "Latest full results: day 1" in page.split(docs.LATER, 1)[0], "the full run's part stays"
    assert "!/full1/" in kept and "!/pager1/" in kept

    # Again: the newer run's section replaces the older one's, whose directory is no longer kept.
    page, kept = place("pager2", results("day 3", "ccc", {"pager": 51.0}, "run.py --only pager --docs"), True)
    later = page.split(docs.LATER, 1)[1]
    assert "day 3" in later and "day 2" not in later and later.count("### The pager workload") == 1
    assert "!/pager2/" in kept and "!/pager1/" not in kept

    # Another workload alone: both sections.
    page, _ = place("pm1", results("day 4", "ddd", {"postmark": 33.0}, "run.py --only postmark --docs"), True)
    later = page.split(docs.LATER, 1)[1]
    assert "### The pager workload: day 3" in later and "### The postmark workload: day 4" in later

    # A full run replaces everything.
    page, kept = place("full2", results("day 5", "eee", {"postmark": 31.0, "pager": 52.0}, "run.py"), False)
    assert docs.LATER not in page and "Latest full results: day 5" in page
    assert kept.count("!/") == 3 and "!/full2/" in kept  # .gitignore, docs.json, the run


def test_a_workload_run_alone_needs_a_full_run_first(place):
    with pytest.raises(SystemExit):
        place("pager1", results("day 1", "aaa", {"pager": 48.0}, "run.py --only pager --docs"), True)
