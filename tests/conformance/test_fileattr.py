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


@pytest.mark.parametrize("flag", [IMMUTABLE, APPEND], ids=["immutable", "append-only"])
def test_immutable_and_append_only(fs_kind, fs_dir, flag):
    f = os.path.join(fs_dir, "f")
    write_file(f, b"data")
    if fs_kind == "memfs":  # docs/SEMANTICS.md: refused, changes nothing
        assert set_errno(f, flag) == errno.EOPNOTSUPP
        assert get_flags(f) == 0
        write_file(f, b"still writable")
        return
    set_flags(f, flag)
    try:
        assert get_flags(f) == flag
        try:
            os.open(f, os.O_WRONLY)
            raise AssertionError("opened for writing")
        except OSError as e:
            assert e.errno == errno.EPERM
    finally:
        set_flags(f, 0)
