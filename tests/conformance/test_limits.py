"""statfs numbers, mount options and the size=/nr_inodes= limits.

Every test here mounts its own small file system of the kind under test with
tmpfs option names. Covers: statvfs geometry for size= (bytes, k/m/g suffixes,
N%), nr_inodes= (with suffix) and the defaults (half of RAM pages for both,
as tmpfs), size=0 / nr_inodes=0 meaning unlimited, mode=/uid=/gid= of the root
directory, invalid options refused, mount flags; block accounting (writes,
sparse truncates, fallocate, long symlinks, deletion, unlinked-but-open files)
and inode accounting (every new inode and every extra hard link, root counted);
exact limits: writing past size= gives ENOSPC after exactly size bytes and the
space is reusable, 256 4 KiB files fit in size=1M, 99 new inodes in
nr_inodes=100, fallocate beyond the free space fails without leaving blocks.
"""
import errno
import os
import subprocess

import pytest

import mapped_writer
from mounts import MEMFS_EXTRA_OPTIONS

from .helpers import (FALLOC_FL_KEEP_SIZE, assert_errno, settle, errno_of, fallocate, read_file,
                      write_file)

PAGE = 4096
MIB = 1 << 20


def total_ram_pages():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024 // PAGE
    raise RuntimeError("no MemTotal in /proc/meminfo")


def _pct_blocks(pct):
    size = (pct << 12) * total_ram_pages() // 100  # bytes, as tmpfs computes them
    return -(-size // PAGE)


def _expected_geometry(options):
    """(f_blocks, f_files) tmpfs reports for a mount with these options."""
    half = total_ram_pages() // 2
    return {
        "": (half, half),
        "size=64M": (16384, half),
        "size=1001k": (251, half),
        "size=10%": (_pct_blocks(10), half),
        "size=1g,nr_inodes=5k": (262144, 5120),
        "nr_inodes=100": (half, 100),
        "size=0,nr_inodes=0": (0, 0),
    }[options]


GEOMETRY_OPTIONS = ["", "size=64M", "size=1001k", "size=10%", "size=1g,nr_inodes=5k",
                    "nr_inodes=100", "size=0,nr_inodes=0"]


def sync_statvfs(path):
    os.sync()
    return os.statvfs(path)


def fill(path, total, chunk=64 * 1024):
    """Write `total` bytes of a pattern in chunks until an error; fsync.
    Returns (bytes accepted, errno of the first failure or 0)."""
    pattern = bytes(range(256)) * (chunk // 256)
    written, err = 0, 0
    fd = os.open(path, os.O_CREAT | os.O_WRONLY, 0o644)
    try:
        while written < total:
            try:
                written += os.write(fd, pattern[:min(chunk, total - written)])
            except OSError as e:
                err = e.errno
                break
        err = err or errno_of(os.fsync, fd)
    finally:
        close_err = errno_of(os.close, fd)
    return written, err or close_err


@pytest.mark.parametrize("options", GEOMETRY_OPTIONS, ids=lambda o: o or "defaults")
def test_statvfs_geometry(make_mount, fs_kind, options):
    root = make_mount(options)
    st = os.statvfs(root)
    blocks, files = _expected_geometry(options)
    assert (st.f_bsize, st.f_frsize) == (PAGE, PAGE)
    assert (st.f_blocks, st.f_files) == (blocks, files)
    assert st.f_bfree == blocks
    if fs_kind == "memfs" and "ram=" in MEMFS_EXTRA_OPTIONS and "backing=" in MEMFS_EXTRA_OPTIONS:
        # Under a RAM ceiling with a backing store (the suite run again so),
        # what can still be written is at most the room under the ceiling
        # and what the store may hold: at most as many pages as half the
        # ceiling indexes (docs/PAGER.md), 8M: 235 MiB.
        assert st.f_bavail <= blocks and (st.f_bavail > 0 or blocks == 0)
    else:
        assert st.f_bavail == blocks
    assert st.f_ffree == st.f_favail == max(files - 1, 0)  # the root directory is an inode
    assert st.f_namemax == 255


def test_mount_flags(make_mount):
    root = make_mount("size=16M")
    flags = os.statvfs(root).f_flag
    forbidden = os.ST_RDONLY | os.ST_NOSUID | os.ST_NODEV | os.ST_NOEXEC | os.ST_SYNCHRONOUS
    assert flags & forbidden == 0
    assert flags & os.ST_RELATIME


def test_root_directory_options(make_mount):
    st = os.stat(make_mount("size=16M"))
    assert (st.st_mode, st.st_uid, st.st_gid, st.st_nlink) == (0o41777, 0, 0, 2)
    st = os.stat(make_mount("size=16M,mode=0710,uid=65534,gid=100"))
    assert (st.st_mode, st.st_uid, st.st_gid) == (0o40710, 65534, 100)


@pytest.mark.parametrize("options", ["size=abc", "size=1x", "size=-1", "nr_inodes=x",
                                     "mode=999", "uid=abc", "bogus=1"])
def test_invalid_options_refused(make_mount, options):
    with pytest.raises(subprocess.CalledProcessError):
        make_mount(options)


def test_size_zero_is_unlimited(make_mount):
    root = make_mount("size=0,nr_inodes=0")
    assert fill(os.path.join(root, "f"), 8 * MIB) == (8 * MIB, 0)
    for i in range(200):
        os.mknod(os.path.join(root, f"n{i}"))
    st = os.statvfs(root)
    assert (st.f_blocks, st.f_bfree, st.f_files, st.f_ffree) == (0, 0, 0, 0)


def test_block_accounting(make_mount):
    root = make_mount("size=64M")
    j = os.path.join
    st = os.statvfs(root)
    assert st.f_blocks * st.f_frsize == 64 * MIB
    free0 = st.f_bfree
    write_file(j(root, "data"), b"d" * MIB)
    assert sync_statvfs(root).f_bfree == free0 - 256
    write_file(j(root, "sparse"))
    os.truncate(j(root, "sparse"), 100 * MIB)  # sparse: no blocks
    assert sync_statvfs(root).f_bfree == free0 - 256
    fd = os.open(j(root, "sparse"), os.O_WRONLY)
    try:
        fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, MIB)
    finally:
        os.close(fd)
    assert sync_statvfs(root).f_bfree == free0 - 512
    os.symlink("s" * 20, j(root, "short-link"))
    assert os.statvfs(root).f_bfree == free0 - 512
    os.symlink("l" * 300, j(root, "long-link"))  # tmpfs keeps long targets in a page
    assert os.statvfs(root).f_bfree == free0 - 513
    for name in ("data", "sparse", "short-link", "long-link"):
        os.unlink(j(root, name))
    assert settle(lambda: os.statvfs(root).f_bfree, free0) == free0
    assert os.statvfs(root).f_bavail == free0


def test_unlinked_open_file_holds_space(make_mount):
    root = make_mount("size=1M")
    path = os.path.join(root, "held")
    fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o644)
    try:
        os.write(fd, b"h" * (512 * 1024))
        os.fsync(fd)
        os.unlink(path)
        assert os.statvfs(root).f_bfree == 128
        assert fill(os.path.join(root, "other"), MIB)[0] == 512 * 1024
        assert os.pread(fd, 4, 0) == b"hhhh"
        os.unlink(os.path.join(root, "other"))
    finally:
        os.close(fd)
    assert settle(lambda: sync_statvfs(root).f_bfree, 256) == 256


def test_inode_accounting(make_mount):
    root = make_mount("size=16M,nr_inodes=100")
    j = os.path.join

    def ffree():
        return os.statvfs(root).f_ffree

    assert (os.statvfs(root).f_files, ffree()) == (100, 99)
    steps = [
        (lambda: os.mkdir(j(root, "d")), 98),
        (lambda: write_file(j(root, "f")), 97),
        (lambda: os.symlink("x", j(root, "s")), 96),
        (lambda: os.mkfifo(j(root, "p")), 95),
        (lambda: os.link(j(root, "f"), j(root, "h")), 94),  # tmpfs counts extra links
        (lambda: os.unlink(j(root, "h")), 95),
        (lambda: os.rename(j(root, "f"), j(root, "d", "f")), 95),
        (lambda: os.unlink(j(root, "d", "f")), 96),
        (lambda: os.rmdir(j(root, "d")), 97),
        (lambda: os.unlink(j(root, "s")), 98),
        (lambda: os.unlink(j(root, "p")), 99),
    ]
    for i, (step, expected) in enumerate(steps):
        step()
        assert settle(ffree, expected) == expected, f"step {i}"


def test_nr_inodes_limit_exact(make_mount):
    root = make_mount("size=16M,nr_inodes=100")
    j = os.path.join
    created = 0
    while created < 200:
        err = errno_of(os.mknod, j(root, f"i{created}"))
        if err:
            assert err == errno.ENOSPC
            break
        created += 1
    assert created == 99  # the root directory takes one of the 100
    assert os.statvfs(root).f_ffree == 0
    assert_errno(errno.ENOSPC, os.mkdir, j(root, "d"))
    assert_errno(errno.ENOSPC, os.symlink, "x", j(root, "s"))
    assert_errno(errno.ENOSPC, os.link, j(root, "i0"), j(root, "l"))
    assert_errno(errno.ENOSPC, os.open, j(root, "o"), os.O_CREAT | os.O_WRONLY, 0o644)
    assert len(os.listdir(root)) == 99
    os.unlink(j(root, "i0"))
    # memfs frees the inode at the kernel's FORGET, not before unlink returns.
    assert settle(lambda: os.statvfs(root).f_ffree, 1) == 1
    os.mkdir(j(root, "d"))
    assert_errno(errno.ENOSPC, os.mknod, j(root, "again"))


def test_size_limit_exact_and_reusable(make_mount):
    root = make_mount("size=1M")
    path = os.path.join(root, "big")
    written, err = fill(path, 2 * MIB)
    assert (written, errno.errorcode.get(err)) == (MIB, "ENOSPC")
    assert os.stat(path).st_size == MIB
    data = read_file(path)
    assert data == (bytes(range(256)) * 4096)[:MIB]
    assert sync_statvfs(root).f_bfree == 0
    assert fill(os.path.join(root, "more"), 10)[1] == errno.ENOSPC
    os.unlink(path)
    os.unlink(os.path.join(root, "more"))
    assert settle(lambda: sync_statvfs(root).f_bfree, 256) == 256
    assert fill(os.path.join(root, "again"), MIB) == (MIB, 0)


def test_how_many_4k_files_fit_in_1m(make_mount):
    root = make_mount("size=1M")
    count = 0
    while count < 1000:
        written, err = fill(os.path.join(root, f"f{count}"), PAGE)
        if err:
            assert err == errno.ENOSPC and written == 0
            break
        count += 1
    assert count == 256
    assert os.stat(os.path.join(root, f"f{count}")).st_size == 0
    os.unlink(os.path.join(root, "f0"))
    assert settle(lambda: os.statvfs(root).f_bfree, 1) == 1
    assert fill(os.path.join(root, f"f{count}"), PAGE) == (PAGE, 0)


def test_fallocate_beyond_free_space(make_mount):
    root = make_mount("size=1M")
    path = os.path.join(root, "f")
    fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o644)
    try:
        assert_errno(errno.ENOSPC, fallocate, fd, 0, 0, 2 * MIB)
        assert (os.fstat(fd).st_size, os.fstat(fd).st_blocks) == (0, 0)
        os.write(fd, b"y" * (512 * 1024))
        assert_errno(errno.ENOSPC, fallocate, fd, 0, 512 * 1024, 600 * 1024)
        st = os.fstat(fd)
        assert (st.st_size, st.st_blocks) == (512 * 1024, 1024)  # nothing left behind
        assert sync_statvfs(root).f_bfree == 128
        fallocate(fd, 0, 512 * 1024, 512 * 1024)  # exactly what is left
        assert os.statvfs(root).f_bfree == 0
        os.ftruncate(fd, 1 << 40)  # a sparse size is not space
        assert os.fstat(fd).st_size == 1 << 40
    finally:
        os.close(fd)



@pytest.mark.parametrize("free_kib,pages", [(400, 200), (16 * 1024, 17 * 256)])
def test_mapped_writes_past_the_limit_are_never_lost_silently(make_mount, free_kib, pages):
    """Pages stored through a shared mapping into a file system without room
    for them: the writer is told (SIGBUS, or an error from msync or fsync),
    or every page reads back. Found 2026-11-27: memfs answered the kernel's
    writeback of such pages with a short count, which the kernel ignores,
    so the pages past the limit read back as zeros with no error anywhere."""
    root = make_mount("size=64M")
    free = os.statvfs(root).f_bfree * PAGE - free_kib * 1024
    assert fill(os.path.join(root, "filler"), free, chunk=MIB) == (free, 0)
    path = os.path.join(root, "mapped")
    told = mapped_writer.run(path, pages)
    assert told in ("ok", "sigbus", errno.ENOSPC), told
    if told == "ok":
        fd = os.open(path, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
        lost = mapped_writer.lost_pages(path, pages)
        assert not lost, f"{len(lost)} of {pages} pages lost with no error, first {lost[0]}"
