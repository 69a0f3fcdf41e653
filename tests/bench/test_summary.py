"""bench/runner.py's summary of a workload's runs and bench/report.py's cell
for it: medians per file system, ratios, failed runs, and runs that finished
without a figure for a metric (no mount needed)."""
import os
import sys

BENCH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench")
sys.path.insert(0, BENCH)

import report  # noqa: E402
import runner  # noqa: E402

METRIC = runner.Metric(key="ws2:4k_mibs", table="t", label="2x", unit="MiB/s", better="higher")


def run(fs, value, ok=True, rep=0):
    return {"case": "ws2", "fs": fs, "rep": rep, "ok": ok,
            "values": {} if value is None else {"ws2:4k_mibs": value},
            "error": None if ok else "boom"}


def summary(runs):
    return runner.summarize([METRIC], runs, ["memfs", "tmpfs"])["ws2:4k_mibs"]


def test_every_run_with_a_figure_gives_the_median_and_the_ratio():
    s = summary([run("memfs", 30.0), run("memfs", 10.0), run("memfs", 20.0),
                 run("tmpfs", 40.0), run("tmpfs", 50.0), run("tmpfs", 60.0)])
    assert s["by_fs"]["memfs"]["median"] == 20.0
    assert "partial" not in s["by_fs"]["memfs"]
    assert s["ratio"]["memfs"] == 20.0 / 50.0
    assert report.cell(s["by_fs"]["tmpfs"], "MiB/s") == "50"


def test_a_run_without_a_figure_leaves_the_median_of_the_others_marked():
    # The pager's anchor OOM-killed in one repetition: that run is ok but has
    # no figure. The case keeps the median of the two that have one, says so,
    # and still has its ratio.
    s = summary([run("memfs", 24.0), run("memfs", 23.0), run("memfs", 25.0),
                 run("tmpfs", 44.0), run("tmpfs", 46.0), run("tmpfs", None)])
    tmpfs = s["by_fs"]["tmpfs"]
    assert tmpfs["median"] == 45.0
    assert tmpfs["partial"] == "2 of 3"
    assert s["ratio"]["memfs"] == 24.0 / 45.0
    assert report.cell(tmpfs, "MiB/s") == "45 (2 of 3 runs)"
    assert report.cell(s["by_fs"]["memfs"], "MiB/s") == "24"


def test_no_run_with_a_figure_gives_no_median_and_no_ratio():
    s = summary([run("memfs", 24.0), run("tmpfs", None), run("tmpfs", None)])
    assert s["by_fs"]["tmpfs"]["median"] is None
    assert "partial" not in s["by_fs"]["tmpfs"]
    assert s["ratio"] == {}
    assert report.cell(s["by_fs"]["tmpfs"], "MiB/s") == "–"


def test_a_failed_run_fails_the_case_whatever_the_others_gave():
    s = summary([run("memfs", 24.0), run("memfs", 25.0, ok=False), run("tmpfs", 40.0)])
    assert s["by_fs"]["memfs"]["failed"]
    assert s["ratio"] == {}
    assert report.cell(s["by_fs"]["memfs"], "MiB/s") == "**FAILED** (1 ok)"
