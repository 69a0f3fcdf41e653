"""FUSE requests per system call (issue 9, item 3): the cuts hold.

memfs only: what is counted is the requests the kernel sends, from the
control directory's operation counters (stats/ops), which is what
scripts/roundtrips.py tabulates for docs/TRANSPORT.md. Each test checks
which requests a create makes on a kind of mount, and that the open the
one-request create returns is the kind of open an OPEN would have given.
"""
import errno
import os
import subprocess
import time

import pytest

from conformance.helpers import utimensat
from pager.helpers import io_stats, memfs, require_root_and_memfs, settle

pytestmark = [pytest.mark.timeout(120), pytest.mark.usefixtures("root_and_memfs")]


@pytest.fixture
def root_and_memfs():
    require_root_and_memfs()


def stats(mnt, name):
    with open(os.path.join(mnt, ".memfs", "stats", name)) as f:
        return f.read()


def ops(mnt):
    lines = stats(mnt, "ops").splitlines()[1:]
    return {f[0]: int(f[1]) for f in (line.split() for line in lines)}


def requests_of(mnt, action):
    before = ops(mnt)
    action()
    after = ops(mnt)
    return {k: after[k] - before[k] for k in after if after[k] != before[k] and k not in ("getattr", "release")}


def passthrough_opens_total(mnt):
    for line in stats(mnt, "passthrough").splitlines():
        key, value = line.split(": ")
        if key == "passthrough_opens_total":
            return int(value)
    raise AssertionError("no passthrough_opens_total in stats/passthrough")


def create(path, data=b""):
    fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o640)
    try:
        if data:
            assert os.write(fd, data) == len(data)
        return os.fstat(fd)
    finally:
        os.close(fd)


def test_create_is_one_request_where_the_mount_answers_open():
    with memfs("size=64M,passthrough=on") as mnt:
        os.mkdir(os.path.join(mnt, "d"))
        seen = requests_of(mnt, lambda: create(os.path.join(mnt, "d", "a")))
        assert seen == {"lookup": 1, "create": 1}, seen
        st = os.stat(os.path.join(mnt, "d", "a"))
        assert (st.st_mode & 0o7777, st.st_size) == (0o640 & ~current_umask(), 0)


def test_a_created_file_is_opened_passthrough_like_an_opened_one():
    with memfs("size=64M,passthrough=on,passthrough_min=0") as mnt:
        path = os.path.join(mnt, "big")
        opens = passthrough_opens_total(mnt)
        written = io_stats(mnt)["write_bytes"]
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o644)
        try:
            assert os.write(fd, b"z" * 65536) == 65536
            assert os.pread(fd, 4, 65532) == b"zzzz"
        finally:
            os.close(fd)
        assert passthrough_opens_total(mnt) == opens + 1
        assert io_stats(mnt)["write_bytes"] == written, "the write went through the daemon"
        assert os.stat(path).st_size == 65536
        with open(path, "rb") as f:
            assert f.read() == b"z" * 65536


def test_a_created_file_gets_its_cache_policy_like_an_opened_one():
    with memfs("size=64M,passthrough=off,cache=metadata") as mnt:
        path = os.path.join(mnt, "f")
        seen = requests_of(mnt, lambda: create(path, b"hello"))
        assert seen.get("create") == 1 and "mknod" not in seen and "open" not in seen, seen
        # cache=metadata: direct I/O, so every read of the created file's
        # open reaches memfs (a cached open's would be served by the kernel).
        fd = os.open(path, os.O_RDONLY)
        try:
            for _ in range(3):
                seen = requests_of(mnt, lambda: os.pread(fd, 5, 0))
                assert seen.get("read") == 1, seen
        finally:
            os.close(fd)


def test_without_open_requests_create_stays_mknod_and_no_open():
    with memfs("size=64M,passthrough=off") as mnt:
        create(os.path.join(mnt, "first"))  # CREATE answered ENOSYS once: the kernel remembers
        seen = requests_of(mnt, lambda: create(os.path.join(mnt, "second"), b"x"))
        assert seen.get("mknod") == 1 and "create" not in seen and "open" not in seen, seen


def test_create_out_of_inodes_is_enospc_and_leaves_nothing():
    with memfs("size=64M,nr_inodes=4,passthrough=on") as mnt:
        made = []
        with pytest.raises(OSError) as e:
            for i in range(10):
                create(os.path.join(mnt, f"f{i}"))
                made.append(f"f{i}")
        assert e.value.errno == errno.ENOSPC
        assert sorted(os.listdir(mnt)) == made
        os.unlink(os.path.join(mnt, made[0]))
        # Freed at the kernel's FORGET, which follows the creating open's
        # RELEASE: both come after the system calls returned.
        settle(lambda: os.statvfs(mnt).f_ffree, lambda n: n > 0)
        create(os.path.join(mnt, "again"))  # the freed inode is usable


def test_create_in_the_control_directory_is_refused_as_mknod_is():
    with memfs("size=64M,passthrough=on") as mnt:
        ctl = os.path.join(mnt, ".memfs")
        with pytest.raises(OSError) as by_mknod:
            os.mknod(os.path.join(ctl, "x"), 0o644)
        with pytest.raises(OSError) as by_create:
            create(os.path.join(ctl, "y"))
        assert by_create.value.errno == by_mknod.value.errno
        assert "x" not in os.listdir(ctl) and "y" not in os.listdir(ctl)


def current_umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_ls_l_asks_each_file_for_nothing_the_kernel_could_not_keep():
    # ls -l asks every file for its SELinux label; an unset one answered
    # "not supported" is remembered by ls for the device, so a listing of
    # 10 files asks once per run (13 GETXATTR per repeated ls -l before,
    # 3 after: the directory's label and its two ACLs).
    with memfs("size=64M") as mnt:
        d = os.path.join(mnt, "d")
        os.mkdir(d)
        for i in range(10):
            create(os.path.join(d, f"f{i}"))
        subprocess.run(["ls", "-l", d], check=True, capture_output=True)
        seen = requests_of(mnt, lambda: subprocess.run(["ls", "-l", d], check=True, capture_output=True))
        assert seen.get("getxattr", 0) <= 3, seen


def make_symlink(mnt):
    """A directory, a file in it, and a symlink to the directory."""
    os.makedirs(os.path.join(mnt, "real", "sub"))
    with open(os.path.join(mnt, "real", "sub", "f"), "w"):
        pass
    link = os.path.join(mnt, "link")
    os.symlink("real", link)
    return link


def test_a_symlink_target_is_asked_for_once_then_kept_by_the_kernel():
    # FUSE_CACHE_SYMLINKS: walks through a symlink and readlinks after the
    # first cost no READLINK round trip.
    with memfs("size=64M") as mnt:
        link = make_symlink(mnt)

        def use():
            for _ in range(20):
                assert os.readlink(link) == "real"
                assert os.stat(os.path.join(link, "sub", "f")).st_size == 0
        assert requests_of(mnt, use).get("readlink") == 1


def test_setting_a_kept_symlinks_times_lets_the_next_readlink_set_its_atime():
    # relatime, as tmpfs: an atime set older than the mtime is updated by
    # the next readlink. The target the kernel kept is dropped by the
    # setattr (a queued notification), so that readlink reaches memfs.
    with memfs("size=64M") as mnt:
        link = make_symlink(mnt)
        os.readlink(link)
        os.readlink(link)  # kept now
        utimensat(link, 10**18, "now", follow=False)
        before = time.time_ns()
        deadline = time.monotonic() + 5
        while os.lstat(link).st_atime_ns == 10**18 and time.monotonic() < deadline:
            assert os.readlink(link) == "real"
            time.sleep(0.001)
        assert os.lstat(link).st_atime_ns >= before - 10**7


def test_a_strictatime_mount_sees_every_readlink():
    # strictatime: every readlink sets the atime, so every one reaches memfs.
    with memfs("size=64M,strictatime") as mnt:
        link = make_symlink(mnt)
        seen = requests_of(mnt, lambda: [os.readlink(link) for _ in range(5)])
        assert seen.get("readlink") == 5, seen
        first = os.lstat(link).st_atime_ns
        time.sleep(0.02)
        os.readlink(link)
        assert os.lstat(link).st_atime_ns > first
