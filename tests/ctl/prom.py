"""A strict parser of the Prometheus text exposition format (0.0.4), for
checking stats/prometheus without outside packages.

Owns: parse_prometheus(text) -> {family: {"help", "type", "samples"}},
raising ValueError on anything the format does not allow: a sample before
its family's # TYPE, a bad name, label or value, a duplicate series,
histogram buckets that are not cumulative or whose +Inf differs from _count.
"""
import math
import re

NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
LABEL = r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\\\|\\"|\\n)*)"'
SAMPLE = re.compile(rf"^({NAME})(?:\{{((?:{LABEL})(?:,{LABEL})*)?\}})? (\S+)$")
TYPES = {"counter", "gauge", "histogram", "summary", "untyped"}
SUFFIXES = ("_bucket", "_sum", "_count")


def _unescape(v):
    return v.replace("\\n", "\n").replace('\\"', '"').replace("\\\\", "\\")


def _value(v):
    if v in ("+Inf", "-Inf", "NaN"):
        return float(v.replace("Inf", "inf"))
    return float(v)  # raises ValueError on garbage


def _family_of(name, families):
    if name in families:
        return name
    for suffix in SUFFIXES:
        base = name[: -len(suffix)]
        if name.endswith(suffix) and families.get(base, {}).get("type") == "histogram":
            return base
    raise ValueError(f"sample {name} has no # TYPE before it")


def parse_prometheus(text):
    if not text.endswith("\n"):
        raise ValueError("must end with a newline")
    families = {}
    seen = set()
    for line in text.splitlines():
        if line.startswith("# HELP "):
            name, _, help_text = line[7:].partition(" ")
            if not re.fullmatch(NAME, name):
                raise ValueError(f"bad name in {line!r}")
            families.setdefault(name, {"help": None, "type": None, "samples": []})["help"] = help_text
        elif line.startswith("# TYPE "):
            name, _, kind = line[7:].partition(" ")
            if kind not in TYPES:
                raise ValueError(f"bad type in {line!r}")
            fam = families.setdefault(name, {"help": None, "type": None, "samples": []})
            if fam["type"] or fam["samples"]:
                raise ValueError(f"# TYPE for {name} repeated or after its samples")
            fam["type"] = kind
        elif line.startswith("#") or not line.strip():
            continue
        else:
            m = SAMPLE.match(line)
            if not m:
                raise ValueError(f"bad sample line {line!r}")
            name, value = m.group(1), _value(m.group(m.lastindex))
            labels = {k: _unescape(v) for k, v in re.findall(LABEL, m.group(2) or "")}
            key = (name, tuple(sorted(labels.items())))
            if key in seen:
                raise ValueError(f"duplicate series {line!r}")
            seen.add(key)
            families[_family_of(name, families)]["samples"].append((name, labels, value))
    for name, fam in families.items():
        if fam["type"] == "histogram":
            _check_histogram(name, fam["samples"])
    return families


def _check_histogram(name, samples):
    series = {}
    for sname, labels, value in samples:
        rest = tuple(sorted((k, v) for k, v in labels.items() if k != "le"))
        s = series.setdefault(rest, {"buckets": [], "count": None, "sum": None})
        if sname == name + "_bucket":
            s["buckets"].append((_value(labels["le"]), value))
        elif sname == name + "_count":
            s["count"] = value
        elif sname == name + "_sum":
            s["sum"] = value
        else:
            raise ValueError(f"{sname} in histogram {name}")
    for rest, s in series.items():
        bounds = [b for b, _ in s["buckets"]]
        counts = [c for _, c in s["buckets"]]
        if not bounds or bounds != sorted(bounds) or not math.isinf(bounds[-1]):
            raise ValueError(f"{name}{rest}: buckets not ascending to +Inf")
        if counts != sorted(counts):
            raise ValueError(f"{name}{rest}: buckets not cumulative")
        if s["count"] != counts[-1] or s["sum"] is None:
            raise ValueError(f"{name}{rest}: _count differs from the +Inf bucket or _sum missing")
