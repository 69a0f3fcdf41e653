"""Stores pages into a new file through a shared writable mapping, as a
program that fills a file system through mmap does, for the tests that
check such pages are never lost without the writer being told.

Owns the child process (run with `python3 mapped_writer.py PATH PAGES
[random]`) and the expected bytes of each page. The child exits 0 when
msync and fsync succeeded, 3 with the errno printed when one failed; on
tmpfs it dies of SIGBUS at the first page that has no room.
"""
import mmap
import os
import random
import signal
import subprocess
import sys

PAGE = 4096


def page_bytes(i, incompressible):
    """What page i holds: seeded random bytes, or its number repeated."""
    return random.Random(i).randbytes(PAGE) if incompressible else b"%08d" % i * (PAGE // 8)


def run(path, pages, incompressible=False):
    """Run the writer; returns "ok", "sigbus" or the errno msync/fsync gave."""
    cmd = [sys.executable, os.path.abspath(__file__), path, str(pages)]
    res = subprocess.run(cmd + (["random"] if incompressible else []),
                         capture_output=True, text=True, timeout=120)
    if res.returncode == 3:
        return int(res.stdout.strip())
    if res.returncode == -signal.SIGBUS:
        return "sigbus"
    assert res.returncode == 0, (res.returncode, res.stderr[-500:])
    return "ok"


def lost_pages(path, pages, incompressible=False):
    """The pages that do not read back as written (the caller drops caches first)."""
    with open(path, "rb") as f:
        return [i for i in range(pages) if f.read(PAGE) != page_bytes(i, incompressible)]


def _main(path, pages, incompressible):
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    os.ftruncate(fd, pages * PAGE)
    m = mmap.mmap(fd, pages * PAGE)
    for i in range(pages):
        m[i * PAGE:(i + 1) * PAGE] = page_bytes(i, incompressible)
    try:
        m.flush()
        os.fsync(fd)
    except OSError as e:
        print(e.errno)
        sys.exit(3)


if __name__ == "__main__":
    _main(sys.argv[1], int(sys.argv[2]), sys.argv[3:] == ["random"])
