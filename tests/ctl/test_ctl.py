"""Mounted tests of the control directory (/.memfs): tunables in opts/,
statistics in stats/, the hidden name, permissions, and `memfs stat`.

memfs only (kernel tmpfs has no control directory). Every test mounts its
own memfs and unmounts it, whatever happens; each has a time limit.
"""
import errno
import json
import os
import time
import subprocess

import pytest

from idmap import idmapped
from mounts import MEMFS_BIN, NOBODY_GID, NOBODY_UID, mounted, run_as

from .prom import parse_prometheus

pytestmark = pytest.mark.timeout(60)

CTL = ".memfs"


def ctl(mnt, *parts):
    return os.path.join(mnt, CTL, *parts)


def read(path):
    with open(path) as f:
        return f.read()


def keys(mnt, name):
    out = {}
    for line in read(ctl(mnt, "stats", name)).splitlines():
        k, v = line.split(": ")
        out[k] = int(v)
    return out


def ops(mnt):
    lines = read(ctl(mnt, "stats", "ops")).splitlines()
    assert lines[0].split() == ["op", "count", "total_ns", "mean_ns", "p50_ns", "p99_ns"]
    return {c[0]: int(c[1]) for c in (line.split() for line in lines[1:])}


def set_opt(mnt, name, value):
    """Write like `echo VALUE > opts/NAME`; returns the errno, 0 on success."""
    try:
        fd = os.open(ctl(mnt, "opts", name), os.O_WRONLY | os.O_TRUNC)
    except OSError as e:
        return e.errno
    try:
        os.write(fd, value)
        return 0
    except OSError as e:
        return e.errno
    finally:
        os.close(fd)


def fill(path, nbytes):
    """Write up to nbytes; returns (bytes written, errno that stopped it or 0)."""
    done = 0
    with open(path, "ab", buffering=0) as f:
        while done < nbytes:
            try:
                done += f.write(b"x" * min(4096, nbytes - done))
            except OSError as e:
                return done, e.errno
    return done, 0


def test_values_read_back_with_a_newline():
    with mounted("memfs", "size=1M,nr_inodes=100") as mnt:
        assert read(ctl(mnt, "opts", "size")) == "1048576\n"
        assert read(ctl(mnt, "opts", "nr_inodes")) == "100\n"
        assert read(ctl(mnt, "opts", "no_data")) == "0\n"
        readme = read(ctl(mnt, "opts", "README"))
        for name in ("size", "nr_inodes", "no_data"):
            assert f"\n  {name} " in readme
        usage = keys(mnt, "usage")
        assert usage["data_bytes_limit"] == 1 << 20
        assert usage["inodes_limit"] == 100
        assert usage["inodes_used"] == 1  # the root
        assert sorted(os.listdir(ctl(mnt))) == ["README", "opts", "stats"]
        assert read(ctl(mnt, "opts", "noatime")) == "0\n"
        assert sorted(os.listdir(ctl(mnt, "opts"))) == ["README", "compress", "huge", "meta", "migrate", "mpol",
                                                        "no_data", "noatime", "nodemask", "nr_inodes", "passthrough_create",
                                                        "poll_us", "ram", "readahead", "size", "strictatime"]
        assert sorted(os.listdir(ctl(mnt, "stats"))) == ["README", "io", "latency", "migrate", "ops", "options",
                                                          "pager", "pagestat", "passthrough", "prometheus", "transport",
                                                          "uid", "usage"]
        assert "size=1M,nr_inodes=100" in read(ctl(mnt, "stats", "options"))
        pager = keys(mnt, "pager")  # all zero without ram=
        assert pager["ram_limit_bytes"] == 0 and pager["resident_pages"] == 0 and pager["hits_total"] == 0


def test_sizes_in_stat_match_contents():
    """An open control file's st_size is the length of what it reads (one
    snapshot per lookup), and `ls -l` shows non-zero sizes."""
    with mounted("memfs", "size=1M") as mnt:
        for d in ("opts", "stats"):
            listing = subprocess.run(["ls", "-l", ctl(mnt, d)], capture_output=True, text=True, check=True).stdout
            sizes = {line.split()[-1]: int(line.split()[4]) for line in listing.splitlines()[1:]}
            assert sorted(sizes) == sorted(os.listdir(ctl(mnt, d)))
            for name, size in sizes.items():
                assert size > 0, name
                with open(ctl(mnt, d, name), "rb") as f:
                    st = os.fstat(f.fileno())
                    data = f.read()
                assert st.st_size == len(data), name
                assert data.endswith(b"\n"), name
        # Unchanging content: ls -l shows exactly what a read returns.
        assert sizes["README"] == len(read(ctl(mnt, "stats", "README")).encode())


def test_cp_copies_the_control_directory():
    """cp checks that the file it opened is the one it looked at (same
    inode number); each lookup used to give a control file a new one, and
    cp skipped every file ("replaced while being copied"). Where the mount
    answers OPEN a file keeps its number and each open reads its own
    snapshot."""
    with mounted("memfs", "size=1M") as mnt:
        dest = os.path.join(mnt, "copy")
        done = subprocess.run(["cp", "-r", ctl(mnt), dest], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        assert read(os.path.join(dest, "opts", "size")) == "1048576\n"
        assert sorted(os.listdir(os.path.join(dest, "stats"))) == sorted(os.listdir(ctl(mnt, "stats")))
        # Still fresh at every open, under the one inode number.
        ino = os.stat(ctl(mnt, "stats", "usage")).st_ino
        before = keys(mnt, "usage")["inodes_used"]
        os.mknod(os.path.join(mnt, "n"))
        assert keys(mnt, "usage")["inodes_used"] == before + 1
        assert os.stat(ctl(mnt, "stats", "usage")).st_ino == ino


def test_every_read_is_fresh():
    with mounted("memfs", "size=1M") as mnt:
        before = keys(mnt, "usage")
        fill(os.path.join(mnt, "f"), 3 * 4096)
        after = keys(mnt, "usage")
        assert after["data_bytes_used"] == before["data_bytes_used"] + 3 * 4096
        assert after["inodes_used"] == before["inodes_used"] + 1
        # Also through one long-lived directory handle and repeated opens.
        for i in range(3):
            os.mknod(os.path.join(mnt, f"n{i}"))
            assert keys(mnt, "usage")["inodes_used"] == after["inodes_used"] + i + 1


def test_live_resize_moves_enospc():
    with mounted("memfs", "size=64k") as mnt:
        f = os.path.join(mnt, "f")
        assert fill(f, 100 * 1024) == (64 * 1024, errno.ENOSPC)
        assert set_opt(mnt, "size", b"128k\n") == 0
        assert read(ctl(mnt, "opts", "size")) == "131072\n"
        assert os.statvfs(mnt).f_blocks * os.statvfs(mnt).f_frsize == 128 * 1024
        assert fill(f, 100 * 1024) == (64 * 1024, errno.ENOSPC)
        assert os.path.getsize(f) == 128 * 1024
        assert set_opt(mnt, "size", b"0") == 0  # unlimited
        assert fill(f, 64 * 1024) == (64 * 1024, 0)
        assert keys(mnt, "usage")["data_bytes_limit"] == 0


def test_inode_limit_moves_too():
    with mounted("memfs", "nr_inodes=4") as mnt:
        for i in range(3):
            os.mknod(os.path.join(mnt, f"f{i}"))
        with pytest.raises(OSError) as e:
            os.mknod(os.path.join(mnt, "f3"))
        assert e.value.errno == errno.ENOSPC
        assert set_opt(mnt, "nr_inodes", b"1k") == 0
        assert read(ctl(mnt, "opts", "nr_inodes")) == "1024\n"
        os.mknod(os.path.join(mnt, "f3"))


def test_refused_shrink_changes_nothing():
    with mounted("memfs", "size=1M,nr_inodes=100") as mnt:
        fill(os.path.join(mnt, "f"), 40 * 1024)
        for i in range(5):
            os.mknod(os.path.join(mnt, f"n{i}"))
        assert set_opt(mnt, "size", b"16k\n") == errno.EINVAL
        assert set_opt(mnt, "nr_inodes", b"3\n") == errno.EINVAL
        assert read(ctl(mnt, "opts", "size")) == "1048576\n"
        assert read(ctl(mnt, "opts", "nr_inodes")) == "100\n"
        assert fill(os.path.join(mnt, "f"), 8192) == (8192, 0)
        # Shrinking to exactly what is used works.
        assert set_opt(mnt, "size", b"48k") == 0
        assert fill(os.path.join(mnt, "f"), 1) == (0, errno.ENOSPC)


BAD_VALUES = [b"\n", b" \t\n", b"abc\n", b"-1\n", b"1x\n", b"1.5G\n", b"1GB\n", b"0%\n", b"101%\n", b"1 2\n",
              b"\xff\xfe\n", b"1" * 5000, b"99999999999999999999999\n", b"16e\n"]


@pytest.mark.parametrize("name", ["size", "nr_inodes", "no_data", "poll_us"])
def test_invalid_writes_give_einval_and_change_nothing(name):
    with mounted("memfs", "size=1M,nr_inodes=100") as mnt:
        before = read(ctl(mnt, "opts", name))
        for bad in BAD_VALUES + ([b"2\n", b"yes\n", b"-0\n"] if name == "no_data" else []):
            assert set_opt(mnt, name, bad) == errno.EINVAL, bad
            assert read(ctl(mnt, "opts", name)) == before, bad
        # An empty write never reaches the daemon: the truncation alone changes nothing.
        assert set_opt(mnt, name, b"") == 0
        assert read(ctl(mnt, "opts", name)) == before
        # A write not at offset 0 is refused as well.
        fd = os.open(ctl(mnt, "opts", name), os.O_WRONLY)
        try:
            with pytest.raises(OSError) as e:
                os.pwrite(fd, b"1\n", 3)
            assert e.value.errno == errno.EINVAL
        finally:
            os.close(fd)
        assert read(ctl(mnt, "opts", name)) == before


def daemon_device_flags(mnt):
    """The open flags of the /dev/fuse descriptor of the memfs serving mnt."""
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
            if os.path.basename(argv[0]) != b"memfs" or mnt.encode() not in argv:
                continue
            for fd in os.listdir(f"/proc/{pid}/fd"):
                if os.readlink(f"/proc/{pid}/fd/{fd}") == "/dev/fuse":
                    with open(f"/proc/{pid}/fdinfo/{fd}") as f:
                        return int(f.read().split("flags:")[1].split()[0], 8)
        except OSError:
            continue
    raise AssertionError(f"no memfs daemon with /dev/fuse open for {mnt}")


def test_poll_us_from_the_option_and_live():
    with mounted("memfs", "size=1M,poll_us=0") as mnt:
        assert read(ctl(mnt, "opts", "poll_us")) == "0\n"
        # Polling off: a burst of requests leaves the device blocking.
        for _ in range(2000):
            os.stat(ctl(mnt, "stats", "usage"))  # a LOOKUP each time (TTL 0)
        assert daemon_device_flags(mnt) & os.O_NONBLOCK == 0
        assert set_opt(mnt, "poll_us", b"250\n") == 0
        assert read(ctl(mnt, "opts", "poll_us")) == "250\n"
        assert set_opt(mnt, "poll_us", b"1000001\n") == errno.EINVAL
        assert read(ctl(mnt, "opts", "poll_us")) == "250\n"
    with mounted("memfs", "size=1M") as mnt:
        assert read(ctl(mnt, "opts", "poll_us")) == "200\n"
        # Idle for far longer than the window: back to blocking reads.
        for _ in range(2000):
            os.stat(ctl(mnt, "stats", "usage"))
        # The controller thread switches back after a window with no
        # request: wait for it (it may not get a CPU at once), up to 5 s.
        deadline = time.monotonic() + 5
        while daemon_device_flags(mnt) & os.O_NONBLOCK and time.monotonic() < deadline:
            time.sleep(0.01)
        assert daemon_device_flags(mnt) & os.O_NONBLOCK == 0


def test_non_owner_cannot_write_but_can_read():
    with mounted("memfs", "size=1M") as mnt:
        st = os.stat(ctl(mnt, "opts", "size"))
        assert (st.st_uid, st.st_mode & 0o7777) == (0, 0o644)
        assert os.stat(ctl(mnt, "stats", "usage")).st_mode & 0o7777 == 0o444
        assert os.stat(ctl(mnt)).st_mode & 0o7777 == 0o555

        def attempt(value):
            return set_opt(mnt, "size", value)

        assert run_as(NOBODY_UID, NOBODY_GID, attempt, b"2M\n") == errno.EACCES
        assert run_as(NOBODY_UID, NOBODY_GID, read, ctl(mnt, "opts", "size")) == "1048576\n"
        assert "data_bytes_used" in run_as(NOBODY_UID, NOBODY_GID, read, ctl(mnt, "stats", "usage"))
        assert read(ctl(mnt, "opts", "size")) == "1048576\n"


def test_through_an_idmapped_mount_only_real_root_may_write():
    # A container's root (10000 on the host) sees the control files as its
    # own through an idmapped view of the mount (the kernel lets it open
    # them for writing), but may not change the host's mount: the kernel
    # withholds the caller's ids from such requests, so memfs reads them
    # from /proc (src/core/types.rs).
    with mounted("memfs", "size=1M") as mnt, idmapped(mnt, 10000, 1000) as view:
        assert os.stat(ctl(view, "opts", "size")).st_uid == 10000
        assert run_as(10000, 10000, set_opt, view, "size", b"2M\n") == errno.EACCES
        assert read(ctl(mnt, "opts", "size")) == "1048576\n"
        assert set_opt(view, "size", b"2M\n") == 0
        assert read(ctl(mnt, "opts", "size")) == "2097152\n"


def test_read_only_files_and_the_tree_refuse_even_root():
    with mounted("memfs", "size=1M") as mnt:
        with pytest.raises(PermissionError):
            with open(ctl(mnt, "stats", "usage"), "w") as f:
                f.write("1\n")
        cases = [
            lambda: os.chmod(ctl(mnt, "opts", "size"), 0o666),
            lambda: os.chown(ctl(mnt, "opts", "size"), 1, 1),
            lambda: os.unlink(ctl(mnt, "opts", "size")),
            lambda: os.mkdir(ctl(mnt, "opts", "x")),
            lambda: os.mknod(ctl(mnt, "stats", "x")),
            lambda: os.symlink("x", ctl(mnt, "stats", "x")),
            lambda: os.rename(ctl(mnt, "opts", "size"), os.path.join(mnt, "size")),
            lambda: os.link(ctl(mnt, "opts", "size"), os.path.join(mnt, "size")),
            lambda: os.rmdir(ctl(mnt, "stats")),
            lambda: os.rmdir(ctl(mnt)),
            lambda: os.setxattr(ctl(mnt, "opts", "size"), "user.x", b"1"),
        ]
        for case in cases:
            with pytest.raises(OSError) as e:
                case()
            assert e.value.errno in (errno.EPERM, errno.EACCES), case
        assert read(ctl(mnt, "opts", "size")) == "1048576\n"
        assert sorted(os.listdir(mnt)) == []


def test_hidden_from_readdir_but_reachable():
    with mounted("memfs", "size=1M") as mnt:
        os.mkdir(os.path.join(mnt, "sub"))
        assert os.listdir(mnt) == ["sub"]
        out = subprocess.run(["ls", "-a", mnt], capture_output=True, text=True, check=True).stdout.split()
        assert CTL not in out
        assert os.path.isdir(ctl(mnt))
        assert os.path.isfile(ctl(mnt, "stats", "usage"))
        # Only in the root: in a subdirectory the name is an ordinary one.
        os.mkdir(os.path.join(mnt, "sub", CTL))


def test_the_name_cannot_be_taken_while_enabled():
    with mounted("memfs", "size=1M") as mnt:
        with pytest.raises(FileExistsError):
            os.mkdir(ctl(mnt))
        with pytest.raises(FileExistsError):
            os.close(os.open(ctl(mnt), os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        with pytest.raises(FileExistsError):
            os.symlink("x", ctl(mnt))
        os.mknod(os.path.join(mnt, "f"))
        with pytest.raises(OSError) as e:
            os.rename(os.path.join(mnt, "f"), ctl(mnt))
        assert e.value.errno in (errno.EEXIST, errno.ENOTDIR, errno.EISDIR, errno.EPERM)
        with pytest.raises(FileExistsError):
            os.link(os.path.join(mnt, "f"), ctl(mnt))
        os.mkdir(os.path.join(mnt, "d"))
        with pytest.raises(OSError) as e:
            os.rename(os.path.join(mnt, "d"), ctl(mnt))
        assert e.value.errno in (errno.EEXIST, errno.ENOTEMPTY, errno.EPERM)
        assert sorted(os.listdir(mnt)) == ["d", "f"]
        assert os.path.isdir(ctl(mnt, "stats"))


def remount(mnt, options):
    """`memfs -o remount,OPTIONS MNT`: changes what it names."""
    return subprocess.run([MEMFS_BIN, "-o", f"remount,{options}", mnt],
                          capture_output=True, text=True, timeout=30)


def test_remount_changes_tunables_through_the_control_directory():
    with mounted("memfs", "size=1M,noatime") as mnt:
        assert read(ctl(mnt, "opts", "noatime")) == "1\n"
        assert remount(mnt, "relatime,size=2M,poll_us=0").returncode == 0
        assert read(ctl(mnt, "opts", "noatime")) == "0\n"
        assert read(ctl(mnt, "opts", "size")) == "2097152\n"
        assert read(ctl(mnt, "opts", "poll_us")) == "0\n"
        assert remount(mnt, "noatime").returncode == 0
        assert read(ctl(mnt, "opts", "noatime")) == "1\n"
        # Going read-only takes the new limits first; a read-only mount takes
        # flags but no new limits (the control files cannot be written).
        assert remount(mnt, "ro,size=3M").returncode == 0
        assert read(ctl(mnt, "opts", "size")) == "3145728\n"
        r = remount(mnt, "ro,size=4M")
        assert r.returncode != 0 and "rw" in r.stderr
        assert read(ctl(mnt, "opts", "size")) == "3145728\n"
        assert remount(mnt, "rw,size=4M").returncode == 0
        assert read(ctl(mnt, "opts", "size")) == "4194304\n"
        assert not os.statvfs(mnt).f_flag & os.ST_RDONLY
    with mounted("memfs", "size=1M,ctldir=.ctl") as mnt:
        assert remount(mnt, "size=2M").returncode != 0  # which control directory? say so
        assert remount(mnt, "size=2M,ctldir=.ctl").returncode == 0
        assert read(os.path.join(mnt, ".ctl", "opts", "size")) == "2097152\n"
    with mounted("memfs", "size=1M,ctldir=off") as mnt:
        assert remount(mnt, "ro").returncode == 0  # flags need no control directory
        assert remount(mnt, "rw").returncode == 0
        assert "ctldir" in remount(mnt, "size=2M").stderr
        assert os.statvfs(mnt).f_blocks == 256


def test_ctldir_option_renames_or_disables():
    with mounted("memfs", "size=1M,ctldir=.ctl") as mnt:
        assert not os.path.exists(ctl(mnt))
        assert read(os.path.join(mnt, ".ctl", "opts", "size")) == "1048576\n"
        os.mkdir(ctl(mnt))  # .memfs is an ordinary name now
        assert sorted(os.listdir(mnt)) == [CTL]
    with mounted("memfs", "size=1M,ctldir=off") as mnt:
        assert not os.path.exists(ctl(mnt))
        with open(ctl(mnt), "w") as f:
            f.write("just a file\n")
        assert os.listdir(mnt) == [CTL]
        assert read(ctl(mnt)) == "just a file\n"


def test_counters_move_when_operations_happen():
    with mounted("memfs", "size=1M") as mnt:
        before = ops(mnt)
        io_before = keys(mnt, "io")
        for i in range(10):
            os.mknod(os.path.join(mnt, f"f{i}"))
        os.mkdir(os.path.join(mnt, "d"))
        fill(os.path.join(mnt, "f0"), 10000)
        os.unlink(os.path.join(mnt, "f1"))
        after = ops(mnt)
        assert after["mknod"] - before["mknod"] == 10
        assert after["mkdir"] - before["mkdir"] == 1
        assert after["unlink"] - before["unlink"] == 1
        assert after["write"] > before["write"]
        assert keys(mnt, "io")["write_bytes"] - io_before["write_bytes"] == 10000
        # Every FUSE operation has a row, used or not.
        for op in ("lookup", "forget", "getattr", "setattr", "read", "readdirplus", "statfs", "fallocate",
                   "lseek", "copy_file_range", "ioctl", "getlk", "setlk", "create", "flush", "release"):
            assert op in after
        lat = read(ctl(mnt, "stats", "latency")).splitlines()
        header = lat[0].split()
        assert header[0] == "op" and header[-1] == "inf"
        row = next(r.split() for r in lat if r.startswith("mknod "))
        assert len(row) == len(header)
        assert sum(int(n) for n in row[1:]) >= 10


def test_reading_the_statistics_is_kept_out_of_the_operation_counts():
    """`memfs stat --watch` on an idle mount shows zero rates: requests for
    the control directory are counted apart, in io's control_requests."""
    with mounted("memfs", "size=1M") as mnt:
        before, io_before = ops(mnt), keys(mnt, "io")
        for _ in range(20):
            read(ctl(mnt, "stats", "usage"))
            os.listdir(ctl(mnt, "opts"))
            os.stat(ctl(mnt, "opts", "size"))
        after, io_after = ops(mnt), keys(mnt, "io")
        assert after == before
        assert io_after["control_requests"] - io_before["control_requests"] >= 60
        assert io_after["read_bytes"] == io_before["read_bytes"]
        # Work on the file system itself is still counted.
        os.mkdir(os.path.join(mnt, "d"))
        assert ops(mnt)["mkdir"] == before["mkdir"] + 1


def test_uid_usage_says_who_uses_the_memory():
    with mounted("memfs", "size=1M") as mnt:
        def write_as_nobody():
            with open(os.path.join(mnt, "mine"), "wb") as f:
                f.write(b"y" * 10000)
        run_as(NOBODY_UID, NOBODY_GID, write_as_nobody)
        rows = [line.split() for line in read(ctl(mnt, "stats", "uid")).splitlines()]
        assert rows[0] == ["uid", "data_bytes", "inodes"]
        by_uid = {int(r[0]): (int(r[1]), int(r[2])) for r in rows[1:]}
        assert by_uid[NOBODY_UID] == (3 * 4096, 1)
        assert by_uid[0][1] == 1  # the root directory


def test_no_data_discards_bytes_but_keeps_sizes():
    with mounted("memfs", "size=64k") as mnt:
        assert set_opt(mnt, "no_data", b"1\n") == 0
        assert read(ctl(mnt, "opts", "no_data")) == "1\n"
        f = os.path.join(mnt, "big")
        assert fill(f, 1 << 20) == (1 << 20, 0)  # far more than size=64k
        assert os.path.getsize(f) == 1 << 20
        assert keys(mnt, "usage")["data_bytes_used"] == 0
        fd = os.open(f, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)  # drop the kernel's copy
            assert os.pread(fd, 8192, 4096) == bytes(8192)
        finally:
            os.close(fd)
        assert set_opt(mnt, "no_data", b"0\n") == 0
        g = os.path.join(mnt, "kept")
        fill(g, 100)
        assert read(g) == "x" * 100


@pytest.mark.timeout(30)
def test_no_data_reads_zeros_without_dropping_the_page_cache():
    """Full pages written with no_data=1 would stay in the kernel's page cache
    (memfs keeps it across opens); memfs asks the kernel to drop them, so a
    reader sees zeros without any fadvise. The drop is asynchronous (a
    background thread, src/fuse/invalidate.rs): allow ten seconds on a
    loaded machine (docs/CONTROL.md)."""
    with mounted("memfs", "size=64k") as mnt:
        assert set_opt(mnt, "no_data", b"1\n") == 0
        f = os.path.join(mnt, "pages")
        fd = os.open(f, os.O_CREAT | os.O_RDWR, 0o644)
        try:
            assert os.write(fd, b"A" * 16384) == 16384
            deadline = time.monotonic() + 10.0
            while os.pread(fd, 16384, 0) != bytes(16384) and time.monotonic() < deadline:
                time.sleep(0.01)
            assert os.pread(fd, 16384, 0) == bytes(16384)
            assert os.fstat(fd).st_size == 16384
        finally:
            os.close(fd)


def test_prometheus_file_parses():
    with mounted("memfs", "size=1M") as mnt:
        fill(os.path.join(mnt, "f"), 5000)
        text = read(ctl(mnt, "stats", "prometheus"))
        families = parse_prometheus(text)
        real = os.path.realpath(mnt)
        assert families["memfs_data_used_bytes"]["type"] == "gauge"
        assert families["memfs_data_used_bytes"]["samples"] == [
            ("memfs_data_used_bytes", {"mountpoint": real}, 8192.0)]
        assert families["memfs_write_bytes_total"]["type"] == "counter"
        hist = families["memfs_op_duration_seconds"]
        assert hist["type"] == "histogram"
        writes = [s for s in hist["samples"] if s[1].get("op") == "write"]
        count = next(v for n, lbl, v in writes if n.endswith("_count"))
        assert count >= 2
        for family in families.values():
            assert family["help"], family
        try:
            from prometheus_client.parser import text_string_to_metric_families
        except ImportError:
            return
        names = {f.name for f in text_string_to_metric_families(text)}
        assert "memfs_op_duration_seconds" in names


def test_memfs_stat_output_parses():
    with mounted("memfs", "size=1M") as mnt:
        fill(os.path.join(mnt, "f"), 5000)
        table = subprocess.run([MEMFS_BIN, "stat", mnt], capture_output=True, text=True, check=True).stdout
        data = next(line.split() for line in table.splitlines() if line.startswith("data "))
        assert data[1:] == ["1.0M", "8.0K", "1016K", "1%"]
        assert any(line.split()[0] == "write" for line in table.splitlines() if line.strip())

        out = subprocess.run([MEMFS_BIN, "stat", "--json", mnt], capture_output=True, text=True, check=True).stdout
        doc = json.loads(out)
        assert doc["usage"]["data_bytes_used"] == 8192
        assert doc["usage"]["data_bytes_limit"] == 1 << 20
        assert doc["ops"]["write"]["count"] >= 2
        assert {"uid": 0, "data_bytes": 8192, "inodes": 2} in doc["uid"]

        out = subprocess.run([MEMFS_BIN, "stat", mnt, "--watch", "0.2", "--count", "3"],
                             capture_output=True, text=True, check=True, timeout=20).stdout
        lines = out.splitlines()
        assert len(lines) == 4
        header = lines[0].split()
        assert header[:5] == ["time", "used", "avail", "inodes", "ops/s"]
        for line in lines[1:]:
            assert len(line.split()) == len(header)
            assert line.split()[1] == "8.0K"

        r = subprocess.run([MEMFS_BIN, "stat", "/proc"], capture_output=True, text=True)
        assert r.returncode == 1 and "control directory" in r.stderr
        r = subprocess.run([MEMFS_BIN, "stat", mnt, "--watch", "0"], capture_output=True, text=True)
        assert r.returncode != 0


def test_dirindex_options_both_work():
    for index in ("hash", "btree"):
        with mounted("memfs", f"size=1M,dirindex={index}") as mnt:
            names = [f"n{i:04d}" for i in range(300)]
            for n in names:
                os.mknod(os.path.join(mnt, n))
            assert sorted(os.listdir(mnt)) == names
            for n in names[::7]:
                os.unlink(os.path.join(mnt, n))
            assert sorted(os.listdir(mnt)) == [n for i, n in enumerate(names) if i % 7]
    r = subprocess.run([MEMFS_BIN, "-o", "dirindex=list", "/nonexistent"], capture_output=True, text=True)
    assert r.returncode == 1 and "dirindex" in r.stderr


def test_snapshots_do_not_accumulate():
    """Each lookup makes a snapshot; the kernel's FORGETs must free them."""
    with mounted("memfs", "size=1M") as mnt:
        for _ in range(300):
            read(ctl(mnt, "stats", "usage"))
        # The FORGETs come asynchronously (over io_uring on another
        # thread than the lookups): wait for them, up to 5 s.
        deadline = time.monotonic() + 5
        held = keys(mnt, "io")["ctl_snapshots"]
        while held >= 100 and time.monotonic() < deadline:
            time.sleep(0.01)
            held = keys(mnt, "io")["ctl_snapshots"]
        assert held < 100, held


def test_strictatime_keeps_working_after_the_control_directory_is_used():
    # A mount made strictatime answers OPEN and OPENDIR so that reads and
    # listings reach memfs; one ENOSYS, even for a control file, would stop
    # them for the connection's life. passthrough=off: no other reason to
    # answer OPEN.
    with mounted("memfs", "size=16M,strictatime,passthrough=off") as mnt:
        assert read(ctl(mnt, "opts", "strictatime")) == "1\n"
        assert "strictatime" in os.listdir(ctl(mnt, "opts"))
        d = os.path.join(mnt, "d")
        os.mkdir(d)
        path = os.path.join(d, "f")
        with open(path, "wb") as f:
            f.write(b"x" * 8192)
        last_file, last_dir = os.stat(path).st_atime_ns, os.stat(d).st_atime_ns
        for _ in range(3):
            time.sleep(0.02)
            with open(path, "rb") as f:
                assert f.read() == b"x" * 8192
            assert os.listdir(d) == ["f"]
            now_file, now_dir = os.stat(path).st_atime_ns, os.stat(d).st_atime_ns
            assert now_file > last_file and now_dir > last_dir, (now_file, last_file, now_dir, last_dir)
            last_file, last_dir = now_file, now_dir
        # The tunable turns it off live: relatime from here.
        assert set_opt(mnt, "strictatime", b"0") == 0
        time.sleep(0.02)
        with open(path, "rb") as f:
            f.read()
        assert os.stat(path).st_atime_ns == last_file
