"""The targets from issue 3, shown beside the results. They are not tests: the
suite reports whether memfs meets them and never fails on speed.

Owns: the list of targets and deciding met / not met for one metric.
"""
import dataclasses
import fnmatch


@dataclasses.dataclass
class Goal:
    workload: str
    pattern: str   # fnmatch pattern on the metric key ("<case>:<name>")
    kind: str      # "ratio": memfs/tmpfs ratio >= value; "max": memfs value <= value
    value: float
    text: str      # how the target reads in the report

    def short(self):
        return f"≥ {self.value:g}×" if self.kind == "ratio" else f"≤ {self.value:g}"

    def met(self, ratio, value):
        """True / False, or None when there is nothing to judge."""
        if self.kind == "ratio":
            return None if ratio is None else ratio >= self.value
        return None if value is None else value <= self.value


GOALS = [
    Goal("postmark", "*:tps", "ratio", 0.5, "Postmark transactions/s at least 0.5× tmpfs"),
    Goal("fileop", "*:create", "ratio", 0.3, "create at least 0.3× tmpfs"),
    Goal("fileop", "*:stat", "ratio", 0.9, "stat at least 0.9× tmpfs"),
    Goal("fileop", "*:open+close", "ratio", 0.65, "open+close at least 0.65× tmpfs"),
    Goal("fileop", "*:unlink", "ratio", 0.4, "unlink at least 0.4× tmpfs"),
    Goal("fileop", "*:delete", "ratio", 0.4, "delete (unlink of a file) at least 0.4× tmpfs"),
    Goal("fio", "*:seq_write", "ratio", 0.9, "sequential write at least 0.9× tmpfs"),
    Goal("fio", "*:seq_read_*", "ratio", 0.9, "sequential read at least 0.9× tmpfs"),
    Goal("fileop", "*s1024:mem_allin", "max", 2.4,
         "memory for ~100,000 files of 1 KiB at most 2.4 KiB per file all-in "
         "(tmpfs uses about 4.9)"),
]


def goal_for(workload, key):
    for goal in GOALS:
        if goal.workload == workload and fnmatch.fnmatchcase(key, goal.pattern):
            return goal
    return None
