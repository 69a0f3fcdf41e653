"""Shared mappings and file locks.

Covers: MAP_SHARED stores + msync visible to read(2) through another
descriptor and in another process, write(2) visible in an existing mapping,
mappings of a file extended by ftruncate, MAP_PRIVATE copy-on-write not
reaching the file; POSIX record locks between two processes (F_SETLK
conflicts as EAGAIN/EACCES, F_GETLK reporting the holder's pid and range,
shared read locks, non-overlapping ranges, unlock, release on close of any
descriptor, F_SETLKW waiting for the holder), open file description locks
(F_OFD_SETLK) and flock (exclusive/shared, independent of POSIX locks).
"""
import errno
import fcntl
import mmap
import multiprocessing
import os
import struct

import pytest

from .helpers import in_child, read_file, write_file

PAGE = 4096
FLOCK_FMT = "hhqqixxxx"  # struct flock on x86-64


def _flock_struct(ltype, start=0, length=0, pid=0):
    return struct.pack(FLOCK_FMT, ltype, os.SEEK_SET, start, length, pid)


def setlk(fd, ltype, start=0, length=0, cmd=fcntl.F_SETLK):
    fcntl.fcntl(fd, cmd, _flock_struct(ltype, start, length))


def getlk(fd, ltype, start=0, length=0, cmd=fcntl.F_GETLK):
    """F_GETLK: (type, start, len, pid) of a conflicting lock, type F_UNLCK if none."""
    res = fcntl.fcntl(fd, cmd, _flock_struct(ltype, start, length))
    ltype, _, start, length, pid = struct.unpack(FLOCK_FMT, res)
    return ltype, start, length, pid


def _lock_errno(path, ltype, start=0, length=0, flags=os.O_RDWR):
    """In the calling process: open path and try F_SETLK; errno or 0."""
    fd = os.open(path, flags)
    try:
        setlk(fd, ltype, start, length)
        return 0
    except OSError as e:
        return e.errno
    finally:
        os.close(fd)


def _other_process_lock_errno(path, ltype, start=0, length=0):
    return in_child(_lock_errno, path, ltype, start, length)


@pytest.fixture
def data_file(fs_dir):
    path = os.path.join(fs_dir, "data")
    write_file(path, b"\0" * (4 * PAGE))
    return path


def write_file_at(path, data, offset):
    fd = os.open(path, os.O_WRONLY)
    try:
        os.pwrite(fd, data, offset)
    finally:
        os.close(fd)


# ------------------------------------------------------------------ mmap

def test_shared_mmap_store_visible_to_read(data_file):
    fd = os.open(data_file, os.O_RDWR)
    try:
        with mmap.mmap(fd, 4 * PAGE, mmap.MAP_SHARED) as m:
            m[PAGE - 3:PAGE + 3] = b"ACROSS"
            m.flush()  # msync(MS_SYNC)
            assert read_file(data_file)[PAGE - 3:PAGE + 3] == b"ACROSS"
            assert in_child(lambda: read_file(data_file)[PAGE - 3:PAGE + 3]) == b"ACROSS"
            m[0:5] = b"hello"  # visible through the shared page cache even before msync
            assert os.pread(fd, 5, 0) == b"hello"
    finally:
        os.close(fd)
    assert read_file(data_file)[:5] == b"hello"
    assert os.stat(data_file).st_size == 4 * PAGE


def test_write_visible_in_existing_mapping(data_file):
    fd = os.open(data_file, os.O_RDWR)
    try:
        with mmap.mmap(fd, 4 * PAGE, mmap.MAP_SHARED, mmap.PROT_READ) as m:
            assert m[0:4] == b"\0" * 4
            os.pwrite(fd, b"via write", 2 * PAGE)
            assert m[2 * PAGE:2 * PAGE + 9] == b"via write"
            in_child(write_file_at, data_file, b"from child", 3 * PAGE)
            assert m[3 * PAGE:3 * PAGE + 10] == b"from child"
    finally:
        os.close(fd)


def test_mmap_after_ftruncate_extend(fs_dir):
    path = os.path.join(fs_dir, "grow")
    fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o644)
    try:
        os.ftruncate(fd, 3 * PAGE)
        with mmap.mmap(fd, 3 * PAGE) as m:
            m[2 * PAGE + 100:2 * PAGE + 104] = b"grow"
            m.flush()
        assert os.pread(fd, 4, 2 * PAGE + 100) == b"grow"
        assert os.fstat(fd).st_size == 3 * PAGE
        assert os.fstat(fd).st_blocks == 8
    finally:
        os.close(fd)


def test_private_mapping_does_not_reach_file(data_file):
    fd = os.open(data_file, os.O_RDONLY)
    try:
        with mmap.mmap(fd, PAGE, mmap.MAP_PRIVATE, mmap.PROT_READ | mmap.PROT_WRITE) as m:
            m[0:7] = b"private"
            assert m[0:7] == b"private"
            assert os.pread(fd, 7, 0) == b"\0" * 7
    finally:
        os.close(fd)
    assert read_file(data_file)[:7] == b"\0" * 7


# ------------------------------------------------------------- POSIX locks

def test_posix_lock_conflicts_between_processes(data_file):
    fd = os.open(data_file, os.O_RDWR)
    try:
        setlk(fd, fcntl.F_WRLCK, 100, 50)
        assert _other_process_lock_errno(data_file, fcntl.F_WRLCK, 120, 10) in (errno.EAGAIN,
                                                                                  errno.EACCES)
        assert _other_process_lock_errno(data_file, fcntl.F_RDLCK, 149, 1) in (errno.EAGAIN,
                                                                                 errno.EACCES)
        assert _other_process_lock_errno(data_file, fcntl.F_WRLCK, 150, 10) == 0
        assert _other_process_lock_errno(data_file, fcntl.F_WRLCK, 0, 100) == 0

        def probe():
            cfd = os.open(data_file, os.O_RDWR)
            try:
                return getlk(cfd, fcntl.F_WRLCK, 0, 0), getlk(cfd, fcntl.F_WRLCK, 200, 10)
            finally:
                os.close(cfd)

        conflict, free = in_child(probe)
        assert conflict == (fcntl.F_WRLCK, 100, 50, os.getpid())
        assert free[0] == fcntl.F_UNLCK
        assert getlk(fd, fcntl.F_WRLCK)[0] == fcntl.F_UNLCK  # own locks never conflict
        setlk(fd, fcntl.F_UNLCK, 100, 50)
        assert _other_process_lock_errno(data_file, fcntl.F_WRLCK, 120, 10) == 0
    finally:
        os.close(fd)


def test_posix_read_locks_are_shared(data_file):
    fd = os.open(data_file, os.O_RDONLY)
    try:
        setlk(fd, fcntl.F_RDLCK)
        assert _other_process_lock_errno(data_file, fcntl.F_RDLCK) == 0
        assert _other_process_lock_errno(data_file, fcntl.F_WRLCK) in (errno.EAGAIN, errno.EACCES)
        assert in_child(_lock_errno, data_file, fcntl.F_WRLCK, 0, 0, os.O_RDONLY) == errno.EBADF
    finally:
        os.close(fd)


def test_posix_locks_released_when_any_descriptor_closes(data_file):
    fd = os.open(data_file, os.O_RDWR)
    try:
        setlk(fd, fcntl.F_WRLCK)
        assert _other_process_lock_errno(data_file, fcntl.F_WRLCK) in (errno.EAGAIN, errno.EACCES)
        os.close(os.open(data_file, os.O_RDONLY))  # POSIX: drops all of this process's locks
        assert _other_process_lock_errno(data_file, fcntl.F_WRLCK) == 0
    finally:
        os.close(fd)


def _wait_for_lock(path, ready):
    fd = os.open(path, os.O_RDWR)
    setlk(fd, fcntl.F_WRLCK, cmd=fcntl.F_SETLKW)
    ready.set()
    os.close(fd)


def test_posix_setlkw_waits_for_holder(data_file):
    ctx = multiprocessing.get_context("fork")
    fd = os.open(data_file, os.O_RDWR)
    try:
        setlk(fd, fcntl.F_WRLCK)
        acquired = ctx.Event()
        child = ctx.Process(target=_wait_for_lock, args=(data_file, acquired))
        child.start()
        try:
            assert not acquired.wait(0.5), "F_SETLKW got the lock while it was held"
            setlk(fd, fcntl.F_UNLCK)
            assert acquired.wait(20), "F_SETLKW did not get the lock after release"
        finally:
            child.join(20)
            if child.is_alive():
                child.kill()
                child.join()
        assert child.exitcode == 0
    finally:
        os.close(fd)


def test_ofd_locks_conflict_between_descriptions(data_file):
    fd1 = os.open(data_file, os.O_RDWR)
    fd2 = os.open(data_file, os.O_RDWR)
    try:
        setlk(fd1, fcntl.F_WRLCK, 0, 10, cmd=fcntl.F_OFD_SETLK)
        with pytest.raises(OSError) as e:
            setlk(fd2, fcntl.F_WRLCK, 5, 10, cmd=fcntl.F_OFD_SETLK)
        assert e.value.errno in (errno.EAGAIN, errno.EACCES)
        ltype, start, length, pid = getlk(fd2, fcntl.F_WRLCK, 0, 0, cmd=fcntl.F_OFD_GETLK)
        assert (ltype, start, length, pid) == (fcntl.F_WRLCK, 0, 10, -1)
        setlk(fd2, fcntl.F_WRLCK, 10, 10, cmd=fcntl.F_OFD_SETLK)
    finally:
        os.close(fd1)
        os.close(fd2)


# ------------------------------------------------------------------ flock

def _flock_errno(path, op):
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, op | fcntl.LOCK_NB)
        return 0
    except OSError as e:
        return e.errno
    finally:
        os.close(fd)


def test_flock_exclusive_and_shared(data_file):
    fd = os.open(data_file, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        assert in_child(_flock_errno, data_file, fcntl.LOCK_EX) == errno.EWOULDBLOCK
        assert in_child(_flock_errno, data_file, fcntl.LOCK_SH) == errno.EWOULDBLOCK
        assert _flock_errno(data_file, fcntl.LOCK_EX) == errno.EWOULDBLOCK  # per description
        assert _other_process_lock_errno(data_file, fcntl.F_WRLCK) == 0  # independent of POSIX
        fcntl.flock(fd, fcntl.LOCK_SH)  # downgrade
        assert in_child(_flock_errno, data_file, fcntl.LOCK_SH) == 0
        assert in_child(_flock_errno, data_file, fcntl.LOCK_EX) == errno.EWOULDBLOCK
        fcntl.flock(fd, fcntl.LOCK_UN)
        assert in_child(_flock_errno, data_file, fcntl.LOCK_EX) == 0
    finally:
        os.close(fd)


def test_flock_released_on_close(data_file):
    fd = os.open(data_file, os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_EX)
    assert in_child(_flock_errno, data_file, fcntl.LOCK_EX) == errno.EWOULDBLOCK
    os.close(fd)
    assert in_child(_flock_errno, data_file, fcntl.LOCK_EX) == 0
