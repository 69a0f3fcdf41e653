#!/usr/bin/env python3
"""FUSE requests per system call on memfs, for docs/TRANSPORT.md's table.

Mounts a memfs for each option set given (default: the default mount, then
passthrough=off), performs each case below, and counts the requests the
kernel sent for it from the control directory's operation counters
(.memfs/stats/ops), read just before and just after the case's action.
Each case's setup ends with a stat of its directory, so the counts are the
action's own; the last row shows what a change in a directory costs the
next path walk through it.

    python3 scripts/roundtrips.py                       # the default table
    python3 scripts/roundtrips.py --opts uring=off --opts cache=metadata
    python3 scripts/roundtrips.py --json

Needs root (mounts) and target/release/memfs (or MEMFS_BIN=another build,
for a before/after table). Counts are exact, not timed:
they are the same from run to run (the first ls -l of a directory differs
from later ones; both are shown).
"""
import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MEMFS = os.environ.get("MEMFS_BIN", os.path.join(ROOT, "target", "release", "memfs"))
# Requests that are not answers to the action (the kernel's FORGET and
# RELEASE are sent after it returns; both are shown, marked async).
ASYNC = {"forget", "release", "releasedir"}


def ops(mnt):
    counts = {}
    with open(os.path.join(mnt, ".memfs/stats/ops")) as f:
        for line in f.read().splitlines()[1:]:
            name, count = line.split()[:2]
            counts[name] = int(count)
    return counts


def counted(mnt, action):
    """Requests `action` caused: counter deltas, less what reading them costs."""
    a = ops(mnt)
    b = ops(mnt)
    action()
    c = ops(mnt)
    # Async requests (RELEASE of a close) may land after the second read:
    # wait for the counters to stop moving.
    for _ in range(50):
        d = ops(mnt)
        if d == c:
            break
        c = d
    noise = {k: b[k] - a[k] for k in b}
    return {k: c[k] - b[k] - noise[k] for k in c if c[k] - b[k] - noise[k]}


def write_new(path, data=b""):
    fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_EXCL, 0o644)
    if data:
        os.write(fd, data)
    os.close(fd)


def cases(d):
    """(row, setup, action) in directory d."""
    f = os.path.join(d, "f")
    sub = os.path.join(d, "sub")

    def prefill():
        for i in range(10):
            write_new(os.path.join(d, f"e{i}"), b"x")

    def ls():
        subprocess.run(["ls", "-l", d], stdout=subprocess.DEVNULL, check=True)

    def python_open_append():
        with open(f, "ab") as fh:
            fh.write(b"y")

    link = os.path.join(d, "link")

    def symlinked():
        os.mkdir(sub)
        write_new(os.path.join(sub, "f"))
        os.symlink("sub", link)
        os.readlink(link)
        os.stat(os.path.join(link, "f"))

    def read_all():
        fd = os.open(f, os.O_RDONLY)
        os.read(fd, 4096)
        os.close(fd)

    return [
        ("create + close (O_CREAT, O_EXCL)", None, lambda: write_new(f)),
        ("create + write 100 B + close", None, lambda: write_new(f, b"x" * 100)),
        ("write 100 B to an open file", "open", None),
        ("open + close (read-only)", lambda: write_new(f, b"x"), lambda: os.close(os.open(f, os.O_RDONLY))),
        ("open + read 4 KiB + close (cached)", lambda: (write_new(f, b"x" * 4096), read_all()), read_all),
        ("Python open(f, 'ab') + write + close", lambda: write_new(f, b"x"), python_open_append),
        ("stat after a write", lambda: write_new(f, b"x"), lambda: os.stat(f)),
        ("stat again", lambda: (write_new(f, b"x"), os.stat(f)), lambda: os.stat(f)),
        ("stat of a missing name", None, lambda: os.path.exists(os.path.join(d, "nope"))),
        ("stat of the same missing name again", lambda: os.path.exists(os.path.join(d, "nope")),
         lambda: os.path.exists(os.path.join(d, "nope"))),
        ("unlink", lambda: write_new(f), lambda: os.unlink(f)),
        ("rename to a new name", lambda: write_new(f), lambda: os.rename(f, os.path.join(d, "g"))),
        ("mkdir", None, lambda: os.mkdir(sub)),
        ("ls -l of 10 files, first time", prefill, ls),
        ("ls -l of 10 files, again", lambda: (prefill(), ls()), ls),
        ("write 1 MiB in one call to a new file", None, lambda: write_new(f, b"x" * (1 << 20))),
        ("stat of a name in a directory just changed", lambda: write_new(f), "dirchanged"),
        ("readlink of a symlink read before", symlinked, lambda: os.readlink(link)),
        ("stat through a symlink walked before", symlinked, lambda: os.stat(os.path.join(link, "f"))),
    ]


def measure(options):
    mnt = tempfile.mkdtemp(prefix="memfs-rt-")
    subprocess.run([MEMFS, "-o", options, mnt] if options else [MEMFS, mnt], check=True)
    rows = []
    try:
        # Warm up: the kernel learns once per mount which requests memfs
        # answers ENOSYS to (CREATE without OPEN requests, OPENDIR).
        write_new(os.path.join(mnt, "warm"))
        os.listdir(mnt)
        for i in range(len(cases(mnt))):
            d = os.path.join(mnt, f"c{i}")
            os.mkdir(d)
            row, setup, action = cases(d)[i]
            if setup == "open":
                fd = os.open(os.path.join(d, "f"), os.O_CREAT | os.O_WRONLY, 0o644)
                os.stat(d)
                rows.append((row, counted(mnt, lambda: os.write(fd, b"x" * 100))))
                os.close(fd)
                continue
            if setup:
                setup()
            if action == "dirchanged":
                rows.append((row, counted(mnt, lambda: os.stat(os.path.join(d, "f")))))
                continue
            os.stat(d)
            rows.append((row, counted(mnt, action)))
    finally:
        subprocess.run(["umount", mnt], check=False)
        with contextlib.suppress(OSError):
            os.rmdir(mnt)
    return rows


def fmt(counts):
    if not counts:
        return "none"
    sync = sum(v for k, v in counts.items() if k not in ASYNC)
    parts = [f"{k.upper()}{'×' + str(v) if v > 1 else ''}" for k, v in sorted(counts.items()) if k not in ASYNC]
    late = [f"{k.upper()}" for k in sorted(counts) if k in ASYNC]
    text = f"{sync}: " + " ".join(parts) if parts else "0"
    if late:
        text += " (+ async " + " ".join(late) + ")"
    return text


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--opts", action="append", help="mount options of one column ('' = defaults); repeatable")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("roundtrips.py: needs root (it mounts memfs)")
    columns = args.opts if args.opts else ["", "passthrough=off"]
    results = {opts: measure(opts) for opts in columns}
    if args.json:
        print(json.dumps({k: [[r, c] for r, c in v] for k, v in results.items()}, indent=1))
        return
    heads = [f"`{c}`" if c else "defaults" for c in columns]
    print("| system call | " + " | ".join(heads) + " |")
    print("|---|" + "---|" * len(columns))
    for i, (row, _) in enumerate(results[columns[0]]):
        print(f"| {row} | " + " | ".join(fmt(results[c][i][1]) for c in columns) + " |")


if __name__ == "__main__":
    main()
