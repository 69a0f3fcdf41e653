"""Inode flags (lsattr/chattr: FS_IOC_GETFLAGS/SETFLAGS, FS_IOC_FSGETXATTR).

Covers: new files and directories start with no flags; no-dump (d) and
no-atime (A) set, read back, change ctime, and are inherited by new entries
of a directory; the same flags through the fsxattr interface; flags tmpfs
does not keep (no-CoW) are EOPNOTSUPP; only the owner may change flags;
immutable (i) and append-only (a): kept by tmpfs, EOPNOTSUPP on memfs (a
documented difference, docs/SEMANTICS.md: memfs cannot refuse open(2)).
"""
import errno
import fcntl
import os
import struct
import time

import pytest

from .helpers import as_nobody, write_file

FS_IOC_GETFLAGS = 0x80086601
FS_IOC_SETFLAGS = 0x40086602
FS_IOC_FSGETXATTR = 0x801C581F
FS_IOC_FSSETXATTR = 0x401C5820
IMMUTABLE, APPEND, NODUMP, NOATIME, NOCOW = 0x10, 0x20, 0x40, 0x80, 0x800000
XFLAG_NOATIME, XFLAG_NODUMP = 0x40, 0x80


def get_flags(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        return struct.unpack("i", fcntl.ioctl(fd, FS_IOC_GETFLAGS, b"\0" * 4))[0]
    finally:
        os.close(fd)


def set_flags(path, flags):
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.ioctl(fd, FS_IOC_SETFLAGS, struct.pack("i", flags))
    finally:
        os.close(fd)


def set_errno(path, flags):
    try:
        set_flags(path, flags)
    except OSError as e:
        return e.errno
    return 0


def get_xflags(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        return struct.unpack("5I8x", fcntl.ioctl(fd, FS_IOC_FSGETXATTR, b"\0" * 28))
    finally:
        os.close(fd)


def test_nodump_and_noatime_set_read_back_and_change_ctime(fs_dir):
    f = os.path.join(fs_dir, "f")
    write_file(f, b"data")
    d = os.path.join(fs_dir, "d")
    os.mkdir(d)
    for path in (f, d):
        assert get_flags(path) == 0
        before = os.stat(path).st_ctime_ns
        time.sleep(0.01)  # past one tick of the coarse clock tmpfs uses
        set_flags(path, NODUMP | NOATIME)
        assert get_flags(path) == NODUMP | NOATIME
        assert os.stat(path).st_ctime_ns > before
        assert get_xflags(path)[0] == XFLAG_NODUMP | XFLAG_NOATIME
        set_flags(path, NODUMP)
        assert get_flags(path) == NODUMP


def test_fsxattr_sets_the_same_flags(fs_dir):
    f = os.path.join(fs_dir, "f")
    write_file(f)
    fd = os.open(f, os.O_RDONLY)
    try:
        fcntl.ioctl(fd, FS_IOC_FSSETXATTR, struct.pack("5I8x", XFLAG_NOATIME, 0, 0, 0, 0))
    finally:
        os.close(fd)
    assert get_flags(f) == NOATIME


def test_new_entries_inherit_nodump_and_noatime(fs_dir):
    d = os.path.join(fs_dir, "d")
    os.mkdir(d)
    set_flags(d, NODUMP | NOATIME)
    write_file(os.path.join(d, "f"))
    os.mkdir(os.path.join(d, "sub"))
    assert get_flags(os.path.join(d, "f")) == NODUMP | NOATIME
    assert get_flags(os.path.join(d, "sub")) == NODUMP | NOATIME
    write_file(os.path.join(fs_dir, "outside"))
    assert get_flags(os.path.join(fs_dir, "outside")) == 0


def test_flags_tmpfs_does_not_keep_are_refused(fs_dir):
    f = os.path.join(fs_dir, "f")
    write_file(f)
    set_flags(f, NODUMP)
    assert set_errno(f, NOCOW) == errno.EOPNOTSUPP
    assert get_flags(f) == NODUMP


def test_only_the_owner_may_change_flags(fs_dir):
    f = os.path.join(fs_dir, "f")
    write_file(f, mode=0o644)
    os.chmod(fs_dir, 0o755)
    assert as_nobody(lambda: set_errno(f, NODUMP)) == errno.EPERM
    assert get_flags(f) == 0
    assert as_nobody(get_flags, f) == 0  # reading them is allowed


def memfs_answers_open(fs_root, path):
    """Whether this memfs answers OPEN (passthrough on, or cache=): only then
    can it refuse write-opens, and so keep i and a (docs/SEMANTICS.md). Seen
    from its counters: an open of a file beside `path` reaches it as OPEN."""
    def opens():
        with open(os.path.join(fs_root, ".memfs", "stats", "ops")) as f:
            return next(int(line.split()[1]) for line in f if line.split()[0] == "open")
    probe = os.path.join(os.path.dirname(path), ".open-probe")
    write_file(probe)
    before = opens()
    os.close(os.open(probe, os.O_RDONLY))
    answered = opens() > before
    os.unlink(probe)
    return answered


def keeps_i_and_a(fs_kind, fs_root, path, flag):
    """Set `flag`; False if this memfs refuses it (no OPEN answered), as documented."""
    if fs_kind == "memfs" and not memfs_answers_open(fs_root, path):
        assert set_errno(path, flag) == errno.EOPNOTSUPP
        assert get_flags(path) == 0
        if not os.path.isdir(path):
            write_file(path, b"still writable")
        return False
    set_flags(path, flag)
    assert get_flags(path) == flag
    return True


def outcome(fn):
    try:
        fn()
        return "ok"
    except OSError as e:
        return errno.errorcode[e.errno]


def test_immutable_file(fs_kind, fs_root, fs_dir):
    f = os.path.join(fs_dir, "f")
    write_file(f, b"data")
    src = os.path.join(fs_dir, "src")
    write_file(src, b"copied")

    def copy_into(fd):
        s = os.open(src, os.O_RDONLY)
        try:
            os.copy_file_range(s, fd, 6, 0, 0)
        finally:
            os.close(s)
    old = os.open(f, os.O_WRONLY)  # opened before the flag: still writes, as on tmpfs
    try:
        if not keeps_i_and_a(fs_kind, fs_root, f, IMMUTABLE):
            return
        try:
            got = {
                # ...but copy_file_range into it is refused (the VFS checks
                # the flag; xfstests generic/553).
                "copy_file_range through an older open": outcome(lambda: copy_into(old)),
                "open for writing": outcome(lambda: os.close(os.open(f, os.O_WRONLY))),
                "open O_RDONLY|O_TRUNC": outcome(lambda: os.close(os.open(f, os.O_RDONLY | os.O_TRUNC))),
                "read": outcome(lambda: open(f, "rb").read()),
                "write through an older open": outcome(lambda: os.pwrite(old, b"D", 0)),
                "touch (times to now)": outcome(lambda: os.utime(f)),
                "chmod": outcome(lambda: os.chmod(f, 0o600)),
                "chown": outcome(lambda: os.chown(f, 0, 0)),
                "truncate by path": outcome(lambda: os.truncate(f, 1)),
                "setxattr": outcome(lambda: os.setxattr(f, "user.a", b"1")),
                "link": outcome(lambda: os.link(f, os.path.join(fs_dir, "g"))),
                "rename": outcome(lambda: os.rename(f, os.path.join(fs_dir, "h"))),
                "unlink": outcome(lambda: os.unlink(f)),
                "fallocate": outcome(lambda: os.posix_fallocate(old, 0, 8192)),
                "nodump beside it": outcome(lambda: set_flags(f, IMMUTABLE | NODUMP)),
            }
        finally:
            set_flags(f, 0)
    finally:
        os.close(old)
    assert got == {
        "open for writing": "EPERM", "open O_RDONLY|O_TRUNC": "EPERM", "read": "ok",
        "write through an older open": "ok", "touch (times to now)": "EPERM", "chmod": "EPERM", "chown": "EPERM",
        "truncate by path": "EPERM", "setxattr": "EPERM", "link": "EPERM", "rename": "EPERM", "unlink": "EPERM",
        "fallocate": "EPERM", "nodump beside it": "ok", "copy_file_range through an older open": "EPERM",
    }
    assert open(f, "rb").read() == b"Data", "only the older open wrote"


def test_append_only_file(fs_kind, fs_root, fs_dir):
    f = os.path.join(fs_dir, "f")
    write_file(f, b"data")
    if not keeps_i_and_a(fs_kind, fs_root, f, APPEND):
        return
    try:
        def append():
            fd = os.open(f, os.O_WRONLY | os.O_APPEND)
            try:
                os.write(fd, b"+more")
                os.posix_fallocate(fd, 0, 8192)
            finally:
                os.close(fd)
        got = {
            "open for writing": outcome(lambda: os.close(os.open(f, os.O_WRONLY))),
            "append": outcome(append),
            "touch (times to now)": outcome(lambda: os.utime(f)),
            "set times": outcome(lambda: os.utime(f, (1, 1))),
            "chmod": outcome(lambda: os.chmod(f, 0o600)),
            "truncate": outcome(lambda: os.truncate(f, 0)),
            "setxattr": outcome(lambda: os.setxattr(f, "user.a", b"1")),
            "link": outcome(lambda: os.link(f, os.path.join(fs_dir, "g"))),
            "unlink": outcome(lambda: os.unlink(f)),
        }
    finally:
        set_flags(f, 0)
    assert got == {
        "open for writing": "EPERM", "append": "ok", "touch (times to now)": "ok", "set times": "EPERM",
        "chmod": "EPERM", "truncate": "EPERM", "setxattr": "EPERM", "link": "EPERM", "unlink": "EPERM",
    }
    assert open(f, "rb").read() == b"data+more".ljust(8192, b"\0"), "appended, then allocated to 8 KiB"


def test_immutable_and_append_only_directories(fs_kind, fs_root, fs_dir):
    d = os.path.join(fs_dir, "d")
    os.mkdir(d)
    write_file(os.path.join(d, "x"), b"x")
    got = {}
    for flag, name in [(IMMUTABLE, "immutable"), (APPEND, "append-only")]:
        if not keeps_i_and_a(fs_kind, fs_root, d, flag):
            return
        try:
            got[name] = {
                "create": outcome(lambda: write_file(os.path.join(d, f"new-{name}"))),
                "mkdir": outcome(lambda: os.mkdir(os.path.join(d, f"sub-{name}"))),
                "write a file in it": outcome(lambda: write_file(os.path.join(d, "x"), b"y")),
                "rename in it": outcome(lambda: os.rename(os.path.join(d, "x"), os.path.join(d, "x2"))),
                "unlink in it": outcome(lambda: os.unlink(os.path.join(d, "x"))),
            }
        finally:
            set_flags(d, 0)
    assert got == {
        "immutable": {"create": "EPERM", "mkdir": "EPERM", "write a file in it": "ok", "rename in it": "EPERM",
                      "unlink in it": "EPERM"},
        "append-only": {"create": "ok", "mkdir": "ok", "write a file in it": "ok", "rename in it": "EPERM",
                        "unlink in it": "EPERM"},
    }
