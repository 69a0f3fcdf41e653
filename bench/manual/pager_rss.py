"""By hand: daemon RSS while real files pass through a RAM ceiling.

Usage (root): python3 bench/manual/pager_rss.py MEMFS_BINARY LABEL OPTIONS
e.g.  python3 bench/manual/pager_rss.py target/release/memfs new \
          size=4G,ram=64M,backing=/var/tmp/mc-back,passthrough=off

Needs /var/tmp/mc-data.bin (1 GiB of real files:
`tar cf - /usr/lib /usr/share /usr/bin | head -c 1G > /var/tmp/mc-data.bin`)
and the directory /var/tmp/mc-back. Writes it as 4,096 files of 256 KiB,
drops the page cache, reads them back in order and compares the md5;
prints write/read rates, the daemon's RSS (fresh, peak, end), its split
(2 MiB arena chunks, malloc heap) from smaps, stats/pager and stats/usage.
Used for the "Arenas" table in docs/PAGER.md.
"""
import os
import re
import subprocess
import sys
import threading
import time

DATA = "/var/tmp/mc-data.bin"
BACK = "/var/tmp/mc-back"


def daemon_pid(binary, mp):
    for p in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{p}/cmdline", "rb") as f:
                cmd = f.read().split(b"\0")
        except OSError:
            continue
        if cmd and os.path.realpath(cmd[0].decode()) == os.path.realpath(binary) and mp.encode() in cmd:
            return p
    raise SystemExit(f"no daemon for {mp}")


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS"))


def smaps_mib(pid):
    """RSS of 2 MiB anonymous mappings (arena chunks), the heap, other anonymous memory."""
    out = {"arena2M": 0, "heap": 0, "other_anon": 0}
    name, size = None, 0
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            if re.match(r"^[0-9a-f]+-[0-9a-f]+ ", line):
                parts = line.split()
                name = parts[5] if len(parts) > 5 else ""
            elif line.startswith("Size:"):
                size = int(line.split()[1])
            elif line.startswith("Rss:"):
                r = int(line.split()[1])
                if name == "[heap]":
                    out["heap"] += r
                elif name == "" and size == 2048:
                    out["arena2M"] += r
                elif name == "":
                    out["other_anon"] += r
    return {k: round(v / 1024, 1) for k, v in out.items()}


def main():
    binary, label, opts = sys.argv[1:4]
    mp = f"/tmp/memfs-rss-{label}"
    os.makedirs(mp, exist_ok=True)
    os.makedirs(BACK, exist_ok=True)
    subprocess.run([binary, "-o", opts, mp], check=True)
    try:
        pid = daemon_pid(binary, mp)
        fresh = rss_kib(pid)
        peak = [fresh]
        done = threading.Event()

        def watch():
            while not done.is_set():
                peak[0] = max(peak[0], rss_kib(pid))
                time.sleep(0.05)

        watcher = threading.Thread(target=watch)
        watcher.start()
        t = time.time()
        n = 0
        with open(DATA, "rb") as src:
            while block := src.read(256 * 1024):
                with open(f"{mp}/f{n}", "wb") as f:
                    f.write(block)
                n += 1
        write_s = time.time() - t
        subprocess.run("sync; echo 3 > /proc/sys/vm/drop_caches", shell=True, check=True)
        t = time.time()
        got = subprocess.run(f"cd {mp} && cat $(ls -v | grep ^f) | md5sum", shell=True,
                             capture_output=True, text=True).stdout.split()[0]
        read_s = time.time() - t
        done.set()
        watcher.join()
        want = subprocess.run(f"md5sum < {DATA}", shell=True, capture_output=True, text=True).stdout.split()[0]
        mib = os.path.getsize(DATA) / (1 << 20)
        print(f"{label}: write {mib / write_s:.0f} MB/s read {mib / read_s:.0f} MB/s "
              f"md5 {'ok' if got == want else 'BAD'}; RSS fresh {fresh / 1024:.1f} "
              f"peak {peak[0] / 1024:.1f} end {rss_kib(pid) / 1024:.1f} MiB")
        print("smaps MiB:", smaps_mib(pid))
        for name in ("pager", "usage"):
            with open(f"{mp}/.memfs/stats/{name}") as f:
                print(f.read().replace("\n", "; "))
    finally:
        subprocess.run(["umount", mp])


if __name__ == "__main__":
    main()
