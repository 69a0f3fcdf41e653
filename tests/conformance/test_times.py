"""Timestamps: resolution, explicit setting, and which operations update them.

Covers: utimensat with exact nanosecond values (including pre-1970 and
beyond-2038/far-future times) read back exactly through stat and statx,
UTIME_NOW/UTIME_OMIT, a table of operations (create, mkdir, mknod, symlink,
unlink, rmdir, link, renames, exchange, write, truncate, O_TRUNC, chmod,
chown, setxattr, removexattr, fallocate, punch hole, mmap store, O_TMPFILE...)
recording for each affected inode whether mtime/ctime changed, matching what
tmpfs does; atime on read/readdir/readlink with relatime, and the birth time
(statx STATX_BTIME / stat -c %W) that tmpfs reports.
"""
import errno
import mmap
import os
import subprocess
import time

import pytest

from mounts import MEMFS_BIN  # tests/ is on sys.path (conftest)

from .helpers import (assert_errno, FALLOC_FL_KEEP_SIZE, FALLOC_FL_PUNCH_HOLE, RENAME_EXCHANGE, STATX_BTIME,
                      append_file, fallocate, read_file, renameat2, statx, utimensat, write_file)

SETTLE = 0.02  # longer than a clock tick, so any update is visible

EXACT_TIMES_NS = [
    1_234_567_890_123_456_789,
    987_654_321_000_000_001,
    -999_999_500,                       # 1969-12-31 23:59:59.0000005
    0,
    2**33 * 10**9 + 999_999_999,        # year 2242
    2**40 * 10**9 + 7,                  # far future
]


@pytest.mark.parametrize("t", EXACT_TIMES_NS)
def test_utimensat_exact_nanoseconds(fs_dir, t):
    path = os.path.join(fs_dir, "f")
    write_file(path)
    utimensat(path, t, t + 1)
    st = os.stat(path)
    assert (st.st_atime_ns, st.st_mtime_ns) == (t, t + 1)
    sx = statx(path)
    assert (sx.stx_atime.ns, sx.stx_mtime.ns) == (t, t + 1)


def test_utimensat_on_directory_and_symlink(fs_dir):
    d, link = os.path.join(fs_dir, "d"), os.path.join(fs_dir, "l")
    os.mkdir(d)
    os.symlink("d", link)
    utimensat(d, 111_000_000_001, 222_000_000_002)
    utimensat(link, 333_000_000_003, 444_000_000_004, follow=False)
    assert os.stat(d).st_mtime_ns == 222_000_000_002
    lst = os.lstat(link)
    assert (lst.st_atime_ns, lst.st_mtime_ns) == (333_000_000_003, 444_000_000_004)
    assert os.stat(d).st_atime_ns == 111_000_000_001


def test_utime_omit_and_now(fs_dir):
    path = os.path.join(fs_dir, "f")
    write_file(path)
    utimensat(path, 10**18 + 5, 10**18 + 6)
    ctime0 = os.stat(path).st_ctime_ns
    time.sleep(SETTLE)
    utimensat(path, "omit", 2 * 10**18 + 7)
    st = os.stat(path)
    assert (st.st_atime_ns, st.st_mtime_ns) == (10**18 + 5, 2 * 10**18 + 7)
    assert st.st_ctime_ns > ctime0
    before = time.time_ns()
    time.sleep(SETTLE)
    utimensat(path, "now", "omit")
    st = os.stat(path)
    assert st.st_mtime_ns == 2 * 10**18 + 7
    assert before < st.st_atime_ns <= time.time_ns()
    assert st.st_ctime_ns >= st.st_atime_ns
    ctime1 = st.st_ctime_ns
    time.sleep(SETTLE)
    utimensat(path, "omit", "omit")
    assert os.stat(path).st_ctime_ns == ctime1


def test_new_file_times_are_current_and_equal(fs_dir):
    before = time.time_ns()
    time.sleep(SETTLE)
    path = os.path.join(fs_dir, "f")
    write_file(path)
    sx = statx(path)
    assert before < sx.stx_mtime.ns <= time.time_ns()
    assert sx.stx_atime.ns == sx.stx_mtime.ns == sx.stx_ctime.ns


# ----------------------------------------------------- which ops update what

def _mkf(d, name="f", data=b"abc"):
    write_file(os.path.join(d, name), data)


def _with_link(d):
    _mkf(d)
    os.link(os.path.join(d, "f"), os.path.join(d, "h"))


def _two_dirs(d):
    os.mkdir(os.path.join(d, "s"))
    os.mkdir(os.path.join(d, "t"))
    _mkf(os.path.join(d, "s"))
    os.mkdir(os.path.join(d, "s", "dd"))


def _on_fd(op, flags=os.O_WRONLY):
    def run(d):
        fd = os.open(os.path.join(d, "f"), flags)
        try:
            op(fd)
        finally:
            os.close(fd)
    return run


def _mmap_store(fd):
    m = mmap.mmap(fd, 4096)
    try:
        m[0:1] = b"y"
        m.flush()
    finally:
        m.close()


def _noop(d):
    pass


# name: (setup(d), op(d), {watched path [before>after]: fields among "mc" that change})
TIME_CASES = {
    "create": (_noop, lambda d: _mkf(d, "n"), {".": "mc"}),
    "mkdir": (_noop, lambda d: os.mkdir(os.path.join(d, "n")), {".": "mc"}),
    "mkfifo": (_noop, lambda d: os.mkfifo(os.path.join(d, "n")), {".": "mc"}),
    "symlink": (_noop, lambda d: os.symlink("x", os.path.join(d, "n")), {".": "mc"}),
    "unlink": (_with_link, lambda d: os.unlink(os.path.join(d, "h")), {".": "mc", "f": "c"}),
    "rmdir": (lambda d: os.mkdir(os.path.join(d, "x")), lambda d: os.rmdir(os.path.join(d, "x")),
              {".": "mc"}),
    "link": (_mkf, lambda d: os.link(os.path.join(d, "f"), os.path.join(d, "h")),
             {".": "mc", "f": "c"}),
    "rename": (_with_link, lambda d: os.rename(os.path.join(d, "h"), os.path.join(d, "g")),
               {".": "mc", "f": "c"}),
    "rename-over": (lambda d: (_mkf(d), _mkf(d, "g"), os.link(os.path.join(d, "g"),
                                                              os.path.join(d, "g2"))),
                    lambda d: os.rename(os.path.join(d, "f"), os.path.join(d, "g")),
                    {".": "mc", "f>g": "c", "g2": "c"}),
    "rename-file-across": (_two_dirs, lambda d: os.rename(os.path.join(d, "s", "f"),
                                                          os.path.join(d, "t", "f")),
                           {".": "", "s": "mc", "t": "mc", "s/f>t/f": "c"}),
    "rename-dir-across": (_two_dirs, lambda d: os.rename(os.path.join(d, "s", "dd"),
                                                         os.path.join(d, "t", "dd")),
                          {"s": "mc", "t": "mc", "s/dd>t/dd": "c"}),
    "exchange": (_two_dirs, lambda d: renameat2(os.path.join(d, "s", "f"), os.path.join(d, "t"),
                                                RENAME_EXCHANGE),
                 {".": "mc", "s": "mc", "s/f>t": "c", "t>s/f": "c"}),
    "write": (_mkf, lambda d: append_file(os.path.join(d, "f"), b"x"), {".": "", "f": "mc"}),
    "read": (_mkf, lambda d: read_file(os.path.join(d, "f")), {".": "", "f": ""}),
    "truncate-down": (_mkf, lambda d: os.truncate(os.path.join(d, "f"), 1), {"f": "mc"}),
    "truncate-up": (_mkf, lambda d: os.truncate(os.path.join(d, "f"), 10**6), {"f": "mc"}),
    "truncate-same-size": (_mkf, lambda d: os.truncate(os.path.join(d, "f"), 3), {"f": "mc"}),
    "ftruncate-same-size": (_mkf, _on_fd(lambda fd: os.ftruncate(fd, 3)), {"f": "mc"}),
    "o_trunc": (_mkf, _on_fd(lambda fd: None, os.O_WRONLY | os.O_TRUNC), {"f": "mc"}),
    "o_trunc-empty": (lambda d: _mkf(d, "f", b""),
                      _on_fd(lambda fd: None, os.O_WRONLY | os.O_TRUNC), {"f": "mc"}),
    "o_creat-existing": (_mkf, _on_fd(lambda fd: None, os.O_WRONLY | os.O_CREAT),
                         {".": "", "f": ""}),
    "chmod": (_mkf, lambda d: os.chmod(os.path.join(d, "f"), 0o600), {".": "", "f": "c"}),
    "chmod-same": (_mkf, lambda d: os.chmod(os.path.join(d, "f"), 0o644), {"f": "c"}),
    "chown": (_mkf, lambda d: os.chown(os.path.join(d, "f"), 1, 1), {".": "", "f": "c"}),
    "chown-noop": (_mkf, lambda d: os.chown(os.path.join(d, "f"), -1, -1), {"f": "c"}),
    "setxattr": (_mkf, lambda d: os.setxattr(os.path.join(d, "f"), "user.a", b"1"),
                 {".": "", "f": "c"}),
    "removexattr": (lambda d: (_mkf(d), os.setxattr(os.path.join(d, "f"), "user.a", b"1")),
                    lambda d: os.removexattr(os.path.join(d, "f"), "user.a"), {"f": "c"}),
    "fallocate": (_mkf, _on_fd(lambda fd: fallocate(fd, 0, 0, 8192)), {"f": "mc"}),
    "fallocate-keep-size": (_mkf, _on_fd(lambda fd: fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, 8192)),
                            {"f": "mc"}),
    "punch-hole": (lambda d: _mkf(d, "f", b"x" * 8192),
                   _on_fd(lambda fd: fallocate(fd, FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE,
                                               0, 4096)), {"f": "mc"}),
    "mmap-store": (lambda d: _mkf(d, "f", b"x" * 4096), _on_fd(_mmap_store, os.O_RDWR),
                   {"f": "mc"}),
    "readdir": (_mkf, lambda d: os.listdir(d), {".": "", "f": ""}),
    "o_tmpfile": (_noop, lambda d: os.close(os.open(d, os.O_TMPFILE | os.O_RDWR, 0o600)),
                  {".": ""}),
}


def _times(path):
    st = os.lstat(path)
    return {"m": st.st_mtime_ns, "c": st.st_ctime_ns}


@pytest.mark.parametrize("case", list(TIME_CASES))
def test_operation_updates_mtime_ctime(fs_dir, fs_kind, case):
    setup, op, expect = TIME_CASES[case]
    setup(fs_dir)

    def where(spec, side):
        rel = spec.split(">")[side]
        return fs_dir if rel == "." else os.path.join(fs_dir, rel)

    before = {spec: _times(where(spec, 0)) for spec in expect}
    time.sleep(SETTLE)
    op(fs_dir)
    changed = {}
    for spec in expect:
        after = _times(where(spec, -1))
        changed[spec] = "".join(f for f in "mc" if after[f] != before[spec][f])
    assert changed == expect


# ------------------------------------------------------------------- atime

ACCESSES = {
    "read": (lambda p: write_file(p, b"content"), read_file),
    "readdir": (os.mkdir, os.listdir),
    "readlink": (lambda p: os.symlink("somewhere", p), os.readlink),
}


@pytest.mark.parametrize("what", list(ACCESSES))
def test_atime_updated_on_access_relatime(fs_dir, what):
    create, access = ACCESSES[what]
    target = os.path.join(fs_dir, "t")
    create(target)
    utimensat(target, 10**18, "now", follow=False)  # atime older than mtime: relatime updates
    time.sleep(SETTLE)
    before = time.time_ns()
    access(target)
    first = os.lstat(target).st_atime_ns
    assert first > 10**18 and first >= before - 10**7  # now, to within a clock tick
    time.sleep(SETTLE)
    access(target)  # relatime: atime is already newer than mtime/ctime
    assert os.lstat(target).st_atime_ns == first


# Whole pages (and a file large enough to be a memory file on memfs): the
# kernel keeps what was written in its page cache, so a read right after
# the write would be served from there without memfs hearing of it.
CACHED_SIZES = [100, 8192, 3 << 20]


@pytest.mark.parametrize("size", CACHED_SIZES)
def test_first_read_after_a_write_updates_atime_relatime(fs_dir, size):
    path = os.path.join(fs_dir, "f")
    write_file(path, b"w" * size)
    time.sleep(SETTLE)
    before = time.time_ns()
    assert len(read_file(path)) == size
    first = os.stat(path).st_atime_ns
    assert first >= before - 10**7, (first, before)  # atime was not after mtime: updated
    time.sleep(SETTLE)
    read_file(path)  # relatime: now newer than mtime and ctime, left alone
    assert os.stat(path).st_atime_ns == first
    os.chmod(path, 0o600)  # a new ctime makes it due again
    time.sleep(SETTLE)
    before = time.time_ns()
    read_file(path)
    assert os.stat(path).st_atime_ns >= before - 10**7


def _strict(options):
    return f"{options},strictatime"


@pytest.mark.parametrize("size", CACHED_SIZES)
def test_strictatime_every_read_updates_atime(make_mount, size):
    mnt = make_mount(_strict("size=64M"))
    assert not os.statvfs(mnt).f_flag & (os.ST_RELATIME | os.ST_NOATIME)  # shown as strictatime
    path = os.path.join(mnt, "f")
    write_file(path, b"s" * size)
    read_file(path)
    fd = os.open(path, os.O_RDONLY)
    try:
        last = os.fstat(fd).st_atime_ns
        for _ in range(3):  # the same open file, read again: the same data every time
            time.sleep(SETTLE)
            assert os.pread(fd, 4096, 0) == b"s" * min(size, 4096)
            now = os.stat(path).st_atime_ns
            assert now > last, (now, last)
            last = now
        time.sleep(SETTLE)
        read_file(path)  # a new open
        assert os.stat(path).st_atime_ns > last
    finally:
        os.close(fd)


def test_strictatime_every_listing_updates_a_directory_atime(make_mount):
    mnt = make_mount(_strict("size=16M"))
    d = os.path.join(mnt, "d")
    os.mkdir(d)
    write_file(os.path.join(d, "x"), b"x")
    os.listdir(d)
    last = os.stat(d).st_atime_ns
    for _ in range(3):
        time.sleep(SETTLE)
        assert os.listdir(d) == ["x"]
        now = os.stat(d).st_atime_ns
        assert now > last, (now, last)
        last = now


def _remount(kind, mnt, options):
    # mount(8) for tmpfs; memfs's own remount for memfs (mount(8) would
    # need the mount.memfs helper installed: test_remount.py).
    args = ["mount", "-o", f"remount,{options}", mnt] if kind == "tmpfs" else \
        [MEMFS_BIN, "-o", f"remount,{options}", mnt]
    subprocess.run(args, check=True, timeout=30, capture_output=True)


@pytest.mark.parametrize("size", [8192, 3 << 20])
def test_remount_to_strictatime_and_back(make_mount, fs_kind, size):
    mnt = make_mount("size=16M")
    path = os.path.join(mnt, "f")
    write_file(path, b"r" * size)
    read_file(path)
    _remount(fs_kind, mnt, "strictatime")
    assert not os.statvfs(mnt).f_flag & os.ST_RELATIME
    last = os.stat(path).st_atime_ns
    for _ in range(2):
        time.sleep(SETTLE)
        read_file(path)
        now = os.stat(path).st_atime_ns
        assert now > last, (now, last)
        last = now
    # A shared writable mapping still works (small files are opened with
    # direct I/O on memfs now) and shows what was written.
    fd = os.open(path, os.O_RDWR)
    try:
        with mmap.mmap(fd, 4096) as m:
            m[:4] = b"mmap"
            m.flush()
    finally:
        os.close(fd)
    assert read_file(path)[:5] == b"mmapr"
    _remount(fs_kind, mnt, "relatime")
    assert os.statvfs(mnt).f_flag & os.ST_RELATIME
    read_file(path)  # due after the store above
    last = os.stat(path).st_atime_ns
    time.sleep(SETTLE)
    read_file(path)  # relatime again: atime is newer than mtime and ctime
    assert os.stat(path).st_atime_ns == last


@pytest.mark.parametrize("size", CACHED_SIZES)
def test_an_open_that_never_reads_leaves_a_due_atime_alone(fs_dir, size):
    # go-fuse's posixtest FstatDeleted: write, stat, open O_RDONLY, unlink,
    # fstat: the same stat (atime included), though atime was due.
    path = os.path.join(fs_dir, "f")
    write_file(path, b"o" * size)
    before = os.stat(path)
    time.sleep(SETTLE)
    fd = os.open(path, os.O_RDONLY)
    try:
        os.unlink(path)
        after = os.fstat(fd)
    finally:
        os.close(fd)
    assert (after.st_atime_ns, after.st_mtime_ns, after.st_size) == \
        (before.st_atime_ns, before.st_mtime_ns, before.st_size)


def test_a_write_only_open_leaves_a_due_atime_alone(fs_dir):
    path = os.path.join(fs_dir, "f")
    write_file(path, b"w" * 8192)
    utimensat(path, 10**18, "omit")  # long ago: due
    fd = os.open(path, os.O_WRONLY)
    os.close(fd)
    append_file(path, b"more")
    assert os.stat(path).st_atime_ns == 10**18


def test_write_does_not_touch_atime(fs_dir):
    path = os.path.join(fs_dir, "f")
    write_file(path, b"abc")
    utimensat(path, 10**18, "omit")
    append_file(path, b"more")
    assert os.stat(path).st_atime_ns == 10**18


# -------------------------------------------------------------- birth time

def test_birth_time_reported_and_stable(fs_dir):
    before = time.time_ns()
    time.sleep(SETTLE)
    path = os.path.join(fs_dir, "f")
    write_file(path, b"x")
    sx = statx(path)
    assert sx.stx_mask & STATX_BTIME, "no birth time reported (tmpfs reports one)"
    btime = sx.stx_btime.ns
    assert before < btime <= time.time_ns()
    # Set at creation; the write that follows may move ctime/mtime a little
    # (tmpfs's multigrain timestamps can give it a finer, later value).
    assert btime <= sx.stx_ctime.ns and btime <= sx.stx_mtime.ns
    time.sleep(SETTLE)
    append_file(path, b"y")
    os.chmod(path, 0o600)
    utimensat(path, 5, 5)
    os.rename(path, path + "2")
    sx2 = statx(path + "2")
    assert sx2.stx_mask & STATX_BTIME and sx2.stx_btime.ns == btime
    out = subprocess.run(["stat", "-c", "%W", path + "2"], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert int(out) == btime // 10**9


def test_birth_time_on_dirs_and_symlinks(fs_dir):
    d, link = os.path.join(fs_dir, "d"), os.path.join(fs_dir, "l")
    os.mkdir(d)
    os.symlink("d", link)
    for path, follow in ((d, True), (link, False)):
        sx = statx(path, follow=follow)
        assert sx.stx_mask & STATX_BTIME, path
        assert sx.stx_btime.ns == sx.stx_ctime.ns


@pytest.mark.parametrize("size", [3, 2 * 1024 * 1024])
def test_times_set_through_the_descriptor_after_writes_stay(fs_dir, size):
    """cp -p: create, write, futimens(fd) to an old time, close. The time set
    stays, through a statfs, a dropped cache and a later xattr change of
    another attribute. Found 2026-11-27: where the written bytes were in a
    kernel memory file (passthrough), memfs took the writes' mtime in after
    the futimens and replaced the time set with the time of the next look
    (a df, a drop of the kernel's caches)."""
    path = os.path.join(fs_dir, "copied")
    old = (978307200, 123456789)  # 2001-01-01
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, os.urandom(size))
        os.utime(fd, ns=(old[0] * 10**9 + old[1], old[0] * 10**9 + old[1]))
    finally:
        os.close(fd)
    os.statvfs(fs_dir)
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("2")
    st = os.stat(path)
    assert (st.st_mtime_ns, st.st_size) == (old[0] * 10**9 + old[1], size)
    os.setxattr(path, "user.later", b"1")
    assert os.stat(path).st_mtime_ns == old[0] * 10**9 + old[1]
