"""The daemon gives freed memory back (memfs only; tmpfs frees pages itself).

Owns: checking the daemon's resident memory after deletes. Big files
written between small ones that stay (so freed pages are not at the top
of the heap, where malloc would give them back anyway), then the big ones
deleted: the daemon's RSS must come back near what is still stored
(src/trim.rs). Memory use is a behaviour here, not a timing: the bound is
generous and the wait is for the asynchronous trim, not a speed limit.
"""
import os
import time

from mounts import daemon_pid, mounted

MIB = 1 << 20


def rss_bytes(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def test_rss_follows_deletes():
    # passthrough=off: the bytes are in the daemon's heap (with passthrough,
    # files this large live in kernel memory files: tests/passthrough).
    with mounted("memfs", "size=1G,passthrough=off") as mnt:
        pid = daemon_pid(mnt)
        block = os.urandom(MIB)
        for i in range(96):
            with open(os.path.join(mnt, f"big{i}"), "wb") as f:
                f.write(block * 2)
            with open(os.path.join(mnt, f"small{i}"), "wb") as f:
                f.write(b"kept")
        full = rss_bytes(pid)
        assert full > 150 * MIB, full  # the data really is in the daemon
        for i in range(96):
            os.unlink(os.path.join(mnt, f"big{i}"))
        deadline = time.monotonic() + 10
        while rss_bytes(pid) > 48 * MIB and time.monotonic() < deadline:
            time.sleep(0.05)
        assert rss_bytes(pid) <= 48 * MIB, (full, rss_bytes(pid))
        for i in range(96):
            with open(os.path.join(mnt, f"small{i}"), "rb") as f:
                assert f.read() == b"kept"
