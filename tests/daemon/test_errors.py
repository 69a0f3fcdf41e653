"""A broken invariant fails safe (issue 11, item 6): `errors=`.

The daemon is started with MEMFS_FAULT=rename (src/fault.rs), which makes
the core panic in the middle of a rename, after the old name is removed and
before the new one is inserted: the worst moment to stop. What follows
depends on errors= (ext4's names): remount-ro (the default) refuses every
change from then on and remounts read-only, so what is stored stays as it
is and readable; continue serves on; panic ends the daemon.
"""
import errno
import os
import subprocess
import tempfile
import time

import pytest

from mounts import MEMFS_BIN, is_mountpoint, umount
from pager.helpers import require_root_and_memfs, settle

pytestmark = [pytest.mark.timeout(120), pytest.mark.usefixtures("root_and_memfs")]


@pytest.fixture
def root_and_memfs():
    require_root_and_memfs()


@pytest.fixture
def faulty_mount():
    """mount(options): a memfs whose core panics mid-rename."""
    made = []

    def mount(options):
        path = tempfile.mkdtemp(prefix="memfs-fault-")
        env = dict(os.environ, MEMFS_FAULT="rename")
        subprocess.run([MEMFS_BIN, "-o", options, path], check=True, env=env, timeout=30, capture_output=True)
        made.append(path)
        return path

    yield mount
    for path in made:
        umount(path)
        os.rmdir(path)


def io_stats(mnt):
    with open(os.path.join(mnt, ".memfs", "stats", "io")) as f:
        return dict(line.rstrip("\n").split(": ") for line in f)


def mount_flags(mnt):
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            if fields[4] == os.path.realpath(mnt):
                return fields[5].split(",")
    raise AssertionError(f"{mnt} is not mounted")


def fail_a_rename(mnt, expect=(errno.EIO,)):
    """Two files in d/, then a rename that hits the fault; the directory."""
    d = os.path.join(mnt, "d")
    os.mkdir(d)
    for name, data in [("keep", b"kept bytes"), ("moving", b"moving bytes")]:
        with open(os.path.join(d, name), "wb") as f:
            f.write(data)
    with pytest.raises(OSError) as e:
        os.rename(os.path.join(d, "moving"), os.path.join(d, "moved"))
    assert e.value.errno in expect
    return d


def test_remount_ro_refuses_changes_after_an_internal_error_and_keeps_the_data(faulty_mount):
    mnt = faulty_mount("size=64M")
    d = fail_a_rename(mnt)
    stats = io_stats(mnt)
    assert (stats["errors_total"], stats["read_only_after_error"]) == ("1", "1")
    # Every change is refused now, by memfs and (once remounted) the kernel.
    for change in [lambda: open(os.path.join(d, "new"), "wb"),
                   lambda: os.mkdir(os.path.join(d, "sub")),
                   lambda: os.unlink(os.path.join(d, "keep")),
                   lambda: os.rename(os.path.join(d, "keep"), os.path.join(d, "k2")),
                   lambda: os.truncate(os.path.join(d, "keep"), 0),
                   lambda: os.chmod(os.path.join(d, "keep"), 0o600),
                   lambda: os.setxattr(os.path.join(d, "keep"), "user.x", b"1"),
                   lambda: open(os.path.join(d, "keep"), "r+b")]:
        with pytest.raises(OSError) as e:
            change()
        assert e.value.errno == errno.EROFS
    # What was stored is still there and readable.
    with open(os.path.join(d, "keep"), "rb") as f:
        assert f.read() == b"kept bytes"
    assert "keep" in os.listdir(d)
    # The daemon remounts from a thread of its own (the remount waits for
    # the kernel, which may need requests served meanwhile): on a busy
    # machine it can come after the reads above.
    flags = settle(lambda: mount_flags(mnt), lambda f: "ro" in f)
    assert "ro" in flags, "the kernel mount was made read-only too"
    out = subprocess.run([MEMFS_BIN, "stat", mnt], capture_output=True, text=True, timeout=30).stdout
    assert "INTERNAL ERRORS: 1" in out and "READ-ONLY" in out, out


def test_the_remount_read_only_waits_for_an_open_writer(faulty_mount):
    """The kernel refuses to remount read-only while a file is open for
    writing (EBUSY): the daemon tries again until the writer has closed."""
    mnt = faulty_mount("size=64M")
    w = os.path.join(mnt, "w")
    fd = os.open(w, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        os.write(fd, b"before")
        fail_a_rename(mnt)
        assert io_stats(mnt)["read_only_after_error"] == "1"
        time.sleep(0.2)
        assert "ro" not in mount_flags(mnt), "the kernel remounted with a writer open"
    finally:
        os.close(fd)
    flags = settle(lambda: mount_flags(mnt), lambda f: "ro" in f)
    assert "ro" in flags, "the remount came once the writer had closed"
    with open(w, "rb") as f:
        assert f.read() == b"before"


def test_continue_serves_on(faulty_mount):
    mnt = faulty_mount("size=64M,errors=continue")
    d = fail_a_rename(mnt)
    with open(os.path.join(d, "new"), "wb") as f:
        f.write(b"still writable")
    stats = io_stats(mnt)
    assert (stats["errors_total"], stats["read_only_after_error"]) == ("1", "0")
    assert "ro" not in mount_flags(mnt)


def test_panic_ends_the_daemon(faulty_mount):
    mnt = faulty_mount("size=64M,errors=panic")
    d = fail_a_rename(mnt, expect=(errno.EIO, errno.ENOTCONN, errno.ECONNABORTED))
    with pytest.raises(OSError) as e:
        os.listdir(d)
    # ECONNABORTED while the kernel is still ending the connection, ENOTCONN after.
    assert e.value.errno in (errno.ENOTCONN, errno.ECONNABORTED)
    assert is_mountpoint(mnt), "the mount stays until unmounted, as a dead FUSE mount does"


def test_a_bad_errors_value_is_refused():
    r = subprocess.run([MEMFS_BIN, "-o", "errors=sometimes", "/tmp"], capture_output=True, text=True, timeout=30)
    assert r.returncode != 0 and "errors" in r.stderr, r.stderr
