"""rename(2) and renameat2(2).

Covers: replacing a file (open descriptors keep the old inode), replacing an
empty directory, ENOTEMPTY/ENOTDIR/EISDIR/EINVAL (own subtree)/ENOENT errors,
moves across directories (parent nlink, '..' of a moved directory), renaming to
itself and onto another hard link of the same inode (a no-op that keeps both
names), symlinks renamed as links, RENAME_NOREPLACE (EEXIST) and
RENAME_EXCHANGE (file <-> directory across directories). Timestamp effects of
rename are in test_times.py, racing renames in test_hostile.py.
"""
import errno
import os

from .helpers import (RENAME_EXCHANGE, RENAME_NOREPLACE, assert_errno, read_file, readdir_all,
                      renameat2, write_file)


def _tree(fs_dir):
    j = os.path.join
    os.mkdir(j(fs_dir, "A"))
    os.mkdir(j(fs_dir, "B"))
    write_file(j(fs_dir, "A", "file"), b"file-data")
    os.mkdir(j(fs_dir, "B", "dir"))
    write_file(j(fs_dir, "B", "dir", "inner"), b"inner-data")
    return j(fs_dir, "A"), j(fs_dir, "B")


def _dotdot_ino(d):
    return {n: ino for n, _, ino in readdir_all(d)}[b".."]


def test_rename_over_file(fs_dir):
    a, b = os.path.join(fs_dir, "a"), os.path.join(fs_dir, "b")
    write_file(a, b"new")
    write_file(b, b"old")
    ino_a = os.stat(a).st_ino
    fd = os.open(b, os.O_RDONLY)
    try:
        os.rename(a, b)
        assert os.listdir(fs_dir) == ["b"]
        assert os.stat(b).st_ino == ino_a and read_file(b) == b"new"
        assert os.fstat(fd).st_nlink == 0
        assert os.read(fd, 10) == b"old"
    finally:
        os.close(fd)


def test_rename_dir_over_empty_dir(fs_dir):
    src, dst = os.path.join(fs_dir, "src"), os.path.join(fs_dir, "dst")
    os.mkdir(src)
    write_file(os.path.join(src, "x"), b"1")
    os.mkdir(dst)
    assert os.stat(fs_dir).st_nlink == 4
    os.rename(src, dst)
    assert os.listdir(fs_dir) == ["dst"]
    assert os.listdir(dst) == ["x"]
    assert os.stat(fs_dir).st_nlink == 3


def test_rename_errors(fs_dir):
    j = os.path.join
    os.mkdir(j(fs_dir, "d"))
    os.mkdir(j(fs_dir, "full"))
    write_file(j(fs_dir, "full", "x"))
    write_file(j(fs_dir, "f"))
    os.mkdir(j(fs_dir, "d", "sub"))
    assert_errno(errno.ENOTEMPTY, os.rename, j(fs_dir, "d"), j(fs_dir, "full"))
    assert_errno(errno.ENOTDIR, os.rename, j(fs_dir, "d"), j(fs_dir, "f"))
    assert_errno(errno.EISDIR, os.rename, j(fs_dir, "f"), j(fs_dir, "d"))
    assert_errno(errno.EINVAL, os.rename, j(fs_dir, "d"), j(fs_dir, "d", "sub", "deeper"))
    assert_errno(errno.EINVAL, os.rename, j(fs_dir, "d"), j(fs_dir, "d", "inside"))
    assert_errno(errno.ENOENT, os.rename, j(fs_dir, "missing"), j(fs_dir, "x"))
    assert_errno(errno.ENOENT, os.rename, j(fs_dir, "f"), j(fs_dir, "nodir", "x"))
    assert_errno(errno.ENOTDIR, os.rename, j(fs_dir, "f"), j(fs_dir, "f2") + "/")
    assert_errno(errno.ENOTDIR, os.rename, j(fs_dir, "f"), j(fs_dir, "f", "x"))
    assert sorted(os.listdir(fs_dir)) == ["d", "f", "full"]
    assert os.listdir(j(fs_dir, "d")) == ["sub"]


def test_rename_dir_across_directories(fs_dir):
    a, b = _tree(fs_dir)
    assert (os.stat(a).st_nlink, os.stat(b).st_nlink) == (2, 3)
    ino = os.stat(os.path.join(b, "dir")).st_ino
    os.rename(os.path.join(b, "dir"), os.path.join(a, "moved"))
    moved = os.path.join(a, "moved")
    assert (os.stat(a).st_nlink, os.stat(b).st_nlink) == (3, 2)
    assert os.stat(moved).st_ino == ino and os.stat(moved).st_nlink == 2
    assert os.stat(os.path.join(moved, "..")).st_ino == os.stat(a).st_ino
    assert _dotdot_ino(moved) == os.stat(a).st_ino
    assert read_file(os.path.join(moved, "inner")) == b"inner-data"
    assert os.listdir(b) == []


def test_rename_file_across_directories(fs_dir):
    a, b = _tree(fs_dir)
    os.rename(os.path.join(a, "file"), os.path.join(b, "file2"))
    assert os.listdir(a) == [] and sorted(os.listdir(b)) == ["dir", "file2"]
    assert read_file(os.path.join(b, "file2")) == b"file-data"
    assert (os.stat(a).st_nlink, os.stat(b).st_nlink) == (2, 3)


def test_rename_to_itself_and_same_inode_is_noop(fs_dir):
    j = os.path.join
    write_file(j(fs_dir, "f"), b"data")
    os.rename(j(fs_dir, "f"), j(fs_dir, "f"))
    os.mkdir(j(fs_dir, "d"))
    os.rename(j(fs_dir, "d"), j(fs_dir, "d"))
    os.link(j(fs_dir, "f"), j(fs_dir, "hard"))
    os.rename(j(fs_dir, "f"), j(fs_dir, "hard"))
    assert sorted(os.listdir(fs_dir)) == ["d", "f", "hard"]
    assert os.stat(j(fs_dir, "f")).st_nlink == 2
    assert read_file(j(fs_dir, "hard")) == b"data"


def test_rename_symlink_moves_the_link(fs_dir):
    j = os.path.join
    write_file(j(fs_dir, "target"), b"t")
    os.symlink("target", j(fs_dir, "link"))
    os.rename(j(fs_dir, "link"), j(fs_dir, "link2"))
    assert os.readlink(j(fs_dir, "link2")) == "target"
    assert sorted(os.listdir(fs_dir)) == ["link2", "target"]


def test_rename_open_file_keeps_descriptor(fs_dir):
    j = os.path.join
    write_file(j(fs_dir, "f"), b"abc")
    fd = os.open(j(fs_dir, "f"), os.O_RDWR)
    try:
        os.rename(j(fs_dir, "f"), j(fs_dir, "g"))
        os.write(fd, b"XY")
        assert os.fstat(fd).st_nlink == 1
    finally:
        os.close(fd)
    assert read_file(j(fs_dir, "g")) == b"XYc"


def test_rename_noreplace(fs_dir):
    j = os.path.join
    write_file(j(fs_dir, "a"), b"a")
    write_file(j(fs_dir, "b"), b"b")
    assert_errno(errno.EEXIST, renameat2, j(fs_dir, "a"), j(fs_dir, "b"), RENAME_NOREPLACE)
    assert (read_file(j(fs_dir, "a")), read_file(j(fs_dir, "b"))) == (b"a", b"b")
    renameat2(j(fs_dir, "a"), j(fs_dir, "c"), RENAME_NOREPLACE)
    assert sorted(os.listdir(fs_dir)) == ["b", "c"]
    os.mkdir(j(fs_dir, "d"))
    assert_errno(errno.EEXIST, renameat2, j(fs_dir, "b"), j(fs_dir, "d"), RENAME_NOREPLACE)


def test_rename_exchange_file_and_dir_across_dirs(fs_dir):
    a, b = _tree(fs_dir)
    file_ino = os.stat(os.path.join(a, "file")).st_ino
    dir_ino = os.stat(os.path.join(b, "dir")).st_ino
    renameat2(os.path.join(a, "file"), os.path.join(b, "dir"), RENAME_EXCHANGE)
    assert os.stat(os.path.join(a, "file")).st_ino == dir_ino
    assert os.stat(os.path.join(b, "dir")).st_ino == file_ino
    assert read_file(os.path.join(b, "dir")) == b"file-data"
    assert os.listdir(os.path.join(a, "file")) == ["inner"]
    assert (os.stat(a).st_nlink, os.stat(b).st_nlink) == (3, 2)
    assert _dotdot_ino(os.path.join(a, "file")) == os.stat(a).st_ino
    assert os.stat(os.path.join(a, "file", "..")).st_ino == os.stat(a).st_ino


def test_rename_exchange_errors(fs_dir):
    j = os.path.join
    write_file(j(fs_dir, "a"), b"a")
    write_file(j(fs_dir, "b"), b"b")
    assert_errno(errno.ENOENT, renameat2, j(fs_dir, "a"), j(fs_dir, "missing"), RENAME_EXCHANGE)
    assert_errno(errno.EINVAL, renameat2, j(fs_dir, "a"), j(fs_dir, "b"),
                 RENAME_EXCHANGE | RENAME_NOREPLACE)
    renameat2(j(fs_dir, "a"), j(fs_dir, "b"), RENAME_EXCHANGE)
    assert (read_file(j(fs_dir, "a")), read_file(j(fs_dir, "b"))) == (b"b", b"a")
    os.mkdir(j(fs_dir, "d"))
    write_file(j(fs_dir, "d", "x"))
    assert_errno(errno.EINVAL, renameat2, j(fs_dir, "d"), j(fs_dir, "d", "x"), RENAME_EXCHANGE)
    assert_errno(errno.EINVAL, renameat2, j(fs_dir, "d", "x"), j(fs_dir, "d"), RENAME_EXCHANGE)
