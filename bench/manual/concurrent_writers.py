"""Concurrent writers on a paged mount (a manual tool, not a test).

Usage: python3 bench/manual/concurrent_writers.py MEMFS_BIN OPTIONS SECONDS
Mounts memfs with OPTIONS plus a backing directory under /var/tmp, then
runs three writer threads that rewrite 1-30 MiB files (O_TRUNC, 1 MiB
writes of real bytes from /usr/lib and /usr/share/doc) while another runs
`memfs evict`/`memfs prime` on them and a third moves `ram=` through
16M, 96M, 12M and 48M every 5 s. Prints every short write or error.

Written in the thirty-first session to reproduce a judge's walk: with
several workers (`threads=4`, or io_uring's queues) and `ram=48M`, 2-3
writes in each 60 s run came back short or ENOSPC while the store had
room (`python3 bench/manual/concurrent_writers.py target/release/memfs
size=1G,ram=48M,threads=4 60`). Open: docs/PAGER.md, "Open: ENOSPC with
room on the store".
"""
import os
import subprocess
import sys
import tempfile
import threading
import time
import random

MEMFS, OPTS, DUR = sys.argv[1], sys.argv[2], float(sys.argv[3])


def pool_bytes(limit=64 << 20):
    out = bytearray()
    for top in ("/usr/lib/x86_64-linux-gnu", "/usr/share/doc", "/usr/lib"):
        for d, dirs, files in os.walk(top):
            dirs.sort()
            for name in sorted(files):
                try:
                    with open(os.path.join(d, name), "rb") as f:
                        out += f.read(1 << 20)
                except OSError:
                    continue
                if len(out) >= limit:
                    return bytes(out[:limit])
    return bytes(out)


pool = pool_bytes()
mnt = tempfile.mkdtemp(prefix="cw-")
store = tempfile.mkdtemp(prefix="cw-s-", dir="/var/tmp")
subprocess.run([MEMFS, "-o", f"{OPTS},backing={store}", mnt], check=True)
stop = time.time() + DUR
failures = []


def writer(k):
    rng = random.Random(k)
    while time.time() < stop:
        p = f"{mnt}/w{k}_{rng.randrange(4)}"
        size = rng.randrange(1 << 20, min(30 << 20, len(pool) - 1))
        o = rng.randrange(0, len(pool) - size)
        fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        off = 0
        try:
            while off < size:
                chunk = pool[o + off:o + min(size, off + (1 << 20))]
                w = os.write(fd, chunk)
                if w != len(chunk):
                    failures.append(f"SHORT {p} at {off}: {w} of {len(chunk)}")
                    break
                off += w
        except OSError as e:
            failures.append(f"ERROR {p} at {off}: {e}")
        finally:
            os.close(fd)


def pager_ops():
    rng = random.Random(99)
    while time.time() < stop:
        names = [f for f in os.listdir(mnt) if f.startswith("w")]
        if names:
            subprocess.run([MEMFS, rng.choice(["evict", "prime"]), os.path.join(mnt, rng.choice(names))],
                           capture_output=True)
        time.sleep(0.05)


def ceilings():
    seq = ["16M", "96M", "12M", "48M"]
    i = 0
    while time.time() < stop:
        with open(os.path.join(mnt, ".memfs", "opts", "ram"), "w") as f:
            f.write(seq[i % 4])
        i += 1
        time.sleep(5)


try:
    ts = [threading.Thread(target=writer, args=(k,)) for k in range(3)]
    ts += [threading.Thread(target=pager_ops), threading.Thread(target=ceilings)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    print("\n".join(failures) or "no short writes or errors")
finally:
    subprocess.run(["umount", mnt])
    os.rmdir(mnt)
    subprocess.run(["rm", "-rf", store])
