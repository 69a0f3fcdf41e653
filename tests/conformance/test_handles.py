"""File handles (name_to_handle_at / open_by_handle_at), as an NFS server
or a fanotify tool uses them (issue 11, item 2).

Covers, on memfs and kernel tmpfs alike: a handle taken from a file opens
that file with its contents after the kernel has dropped its dentry and
inode caches (`echo 2 > /proc/sys/vm/drop_caches`); so does a directory's;
a handle of a deleted file gives ESTALE, also once a new file has been
created in its place (tmpfs may reuse the inode number, memfs never does);
a file renamed to another directory keeps its handle.
"""
import ctypes
import errno
import os

import pytest

from .helpers import _check, libc, read_file, write_file

AT_FDCWD = -100
MAX_HANDLE_SZ = 128


class FileHandle(ctypes.Structure):
    _fields_ = [("handle_bytes", ctypes.c_uint), ("handle_type", ctypes.c_int),
                ("f_handle", ctypes.c_ubyte * MAX_HANDLE_SZ)]


def name_to_handle(path):
    h = FileHandle(handle_bytes=MAX_HANDLE_SZ)
    mount_id = ctypes.c_int()
    _check(libc.name_to_handle_at(AT_FDCWD, os.fsencode(path), ctypes.byref(h), ctypes.byref(mount_id), 0), path)
    return h


def open_by_handle(mount_fd, h, flags=os.O_RDONLY):
    return _check(libc.open_by_handle_at(mount_fd, ctypes.byref(h), flags), "open_by_handle_at")


def drop_dentries_and_inodes():
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("2\n")


@pytest.fixture
def mount_fd(fs_root):
    fd = os.open(fs_root, os.O_RDONLY | os.O_DIRECTORY)
    yield fd
    os.close(fd)


def test_a_handle_opens_the_file_after_the_kernel_forgot_it(fs_dir, mount_fd):
    path = os.path.join(fs_dir, "f")
    write_file(path, b"contents by handle")
    h = name_to_handle(path)
    drop_dentries_and_inodes()
    fd = open_by_handle(mount_fd, h)
    try:
        assert os.pread(fd, 100, 0) == b"contents by handle"
        assert os.fstat(fd).st_ino == os.stat(path).st_ino
    finally:
        os.close(fd)
    # Written through the handle, read by name.
    fd = open_by_handle(mount_fd, h, os.O_WRONLY)
    try:
        os.pwrite(fd, b"CONTENTS", 0)
    finally:
        os.close(fd)
    assert read_file(path) == b"CONTENTS by handle"


def test_a_directory_handle_opens_the_directory(fs_dir, mount_fd):
    d = os.path.join(fs_dir, "sub", "deeper")
    os.makedirs(d)
    write_file(os.path.join(d, "x"))
    h = name_to_handle(d)
    drop_dentries_and_inodes()
    fd = open_by_handle(mount_fd, h, os.O_RDONLY | os.O_DIRECTORY)
    try:
        assert os.listdir(fd) == ["x"]
    finally:
        os.close(fd)


def test_a_deleted_file_handle_is_stale_even_after_reuse(fs_dir, mount_fd):
    path = os.path.join(fs_dir, "gone")
    write_file(path, b"old")
    h = name_to_handle(path)
    os.unlink(path)
    drop_dentries_and_inodes()
    with pytest.raises(OSError) as e:
        open_by_handle(mount_fd, h)
    assert e.value.errno == errno.ESTALE
    # New files, perhaps with the old inode number: the old handle still
    # names nothing.
    for i in range(20):
        write_file(os.path.join(fs_dir, f"new{i}"), b"new")
    drop_dentries_and_inodes()
    with pytest.raises(OSError) as e:
        open_by_handle(mount_fd, h)
    assert e.value.errno == errno.ESTALE


def test_a_renamed_file_keeps_its_handle(fs_dir, mount_fd):
    os.mkdir(os.path.join(fs_dir, "a"))
    os.mkdir(os.path.join(fs_dir, "b"))
    write_file(os.path.join(fs_dir, "a", "f"), b"moved")
    h = name_to_handle(os.path.join(fs_dir, "a", "f"))
    os.rename(os.path.join(fs_dir, "a", "f"), os.path.join(fs_dir, "b", "g"))
    drop_dentries_and_inodes()
    fd = open_by_handle(mount_fd, h)
    try:
        assert os.pread(fd, 10, 0) == b"moved"
    finally:
        os.close(fd)
