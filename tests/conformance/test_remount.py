"""`mount -o remount,...`: changing a live file system, as tmpfs allows.

For tmpfs the test runs mount(8); for memfs, `memfs -o remount,... DIR`,
which like `mount -o remount,...` changes what it names and keeps the rest
(the form mount(8) itself uses, with the whole merged set, is in
tests/daemon), so no install is needed. Covers: size= and nr_inodes= growing live and
refused below what is in use (nothing changes), ro giving EROFS to every
change and refused while a file is open for writing, back to rw, VFS flags
(nosuid, noexec) set and kept across a later remount that does not name
them, mode= left alone (as tmpfs), unknown options refused with nothing
changed, and data surviving all of it.
"""
import errno
import os
import subprocess

import pytest

from mounts import MEMFS_BIN

from .helpers import assert_errno, read_file, write_file

PAGE = 4096
MIB = 1 << 20


def remount(kind, path, options):
    """True if the remount succeeded."""
    if kind == "tmpfs":
        args = ["mount", "-o", f"remount,{options}", path]
    else:
        args = [MEMFS_BIN, "-o", f"remount,{options}", path]
    r = subprocess.run(args, capture_output=True, text=True, timeout=30)
    if r.returncode != 0:
        assert r.stderr.strip(), "a refused remount must say why"
    return r.returncode == 0


def test_size_grows_live_and_cannot_shrink_below_use(fs_kind, make_mount):
    root = make_mount("size=4M")
    f = os.path.join(root, "f")
    write_file(f, b"x" * (3 * MIB))
    assert remount(fs_kind, root, "size=16M")
    assert os.statvfs(root).f_blocks == 16 * MIB // PAGE
    with open(f, "ab") as fh:
        fh.write(b"y" * (8 * MIB))  # past the old limit
    assert not remount(fs_kind, root, "size=2M")
    assert os.statvfs(root).f_blocks == 16 * MIB // PAGE
    assert os.path.getsize(f) == 11 * MIB
    assert remount(fs_kind, root, "size=12M")
    assert os.statvfs(root).f_blocks == 12 * MIB // PAGE


def test_nr_inodes_changes_live(fs_kind, make_mount):
    root = make_mount("size=4M,nr_inodes=100")
    for i in range(20):
        write_file(os.path.join(root, f"f{i}"))
    assert remount(fs_kind, root, "nr_inodes=1k")
    st = os.statvfs(root)
    assert (st.f_files, st.f_ffree) == (1024, 1024 - 21)
    assert not remount(fs_kind, root, "nr_inodes=10")
    assert os.statvfs(root).f_files == 1024


def test_read_only_and_back(fs_kind, make_mount):
    root = make_mount("size=4M")
    f = os.path.join(root, "f")
    write_file(f, b"kept")
    os.mkdir(os.path.join(root, "d"))
    assert remount(fs_kind, root, "ro")
    assert os.statvfs(root).f_flag & os.ST_RDONLY
    assert read_file(f) == b"kept"
    assert_errno(errno.EROFS, os.open, f, os.O_WRONLY)
    assert_errno(errno.EROFS, os.open, os.path.join(root, "new"), os.O_CREAT | os.O_WRONLY, 0o644)
    assert_errno(errno.EROFS, os.mkdir, os.path.join(root, "d2"))
    assert_errno(errno.EROFS, os.unlink, f)
    assert_errno(errno.EROFS, os.rename, f, os.path.join(root, "g"))
    assert_errno(errno.EROFS, os.chmod, f, 0o600)
    assert_errno(errno.EROFS, os.truncate, f, 0)
    assert_errno(errno.EROFS, os.rmdir, os.path.join(root, "d"))
    assert remount(fs_kind, root, "rw")
    assert not os.statvfs(root).f_flag & os.ST_RDONLY
    write_file(os.path.join(root, "new"), b"after")
    assert read_file(f) == b"kept"


def test_read_only_refused_while_open_for_writing(fs_kind, make_mount):
    root = make_mount("size=4M")
    fd = os.open(os.path.join(root, "f"), os.O_CREAT | os.O_WRONLY, 0o644)
    try:
        assert not remount(fs_kind, root, "ro")
        assert not os.statvfs(root).f_flag & os.ST_RDONLY
        assert os.write(fd, b"still writable") == 14
    finally:
        os.close(fd)
    assert remount(fs_kind, root, "ro")
    assert remount(fs_kind, root, "rw")


def test_vfs_flags_set_and_kept(fs_kind, make_mount):
    root = make_mount("size=4M")
    assert remount(fs_kind, root, "nosuid,noexec")
    flags = os.statvfs(root).f_flag
    assert flags & os.ST_NOSUID and flags & os.ST_NOEXEC
    assert remount(fs_kind, root, "size=8M")  # names no flag: flags stay
    flags = os.statvfs(root).f_flag
    assert flags & os.ST_NOSUID and flags & os.ST_NOEXEC and flags & os.ST_RELATIME
    assert remount(fs_kind, root, "suid,exec")
    assert not os.statvfs(root).f_flag & (os.ST_NOSUID | os.ST_NOEXEC)


def test_mode_is_left_alone(fs_kind, make_mount):
    root = make_mount("size=4M,mode=0755")
    assert remount(fs_kind, root, "mode=0700")
    assert os.stat(root).st_mode & 0o7777 == 0o755


@pytest.mark.parametrize("options", ["size=8M,bogus", "size=lots", "nr_inodes=x"])
def test_bad_options_change_nothing(fs_kind, make_mount, options):
    root = make_mount("size=4M")
    assert not remount(fs_kind, root, options)
    assert os.statvfs(root).f_blocks == 4 * MIB // PAGE
    write_file(os.path.join(root, "f"), b"usable")
