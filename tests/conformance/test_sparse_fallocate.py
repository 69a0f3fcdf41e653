"""truncate, sparse files, fallocate and SEEK_DATA/SEEK_HOLE.

Covers: truncate/ftruncate up and down (data cut, re-extension reads zeros,
blocks freed), errors (EINVAL for negative sizes and read-only descriptors,
EISDIR), the maximum file size (2^63-1 is accepted like tmpfs; I/O whose end
would pass it gives EINVAL), RLIMIT_FSIZE (EFBIG), 1 TiB sparse files,
st_blocks of sparse files (page granular, 512-byte units), holes reading as
zeros, fallocate modes (plain, KEEP_SIZE, PUNCH_HOLE|KEEP_SIZE; ZERO_RANGE,
COLLAPSE/INSERT_RANGE and PUNCH_HOLE without KEEP_SIZE are EOPNOTSUPP as on
tmpfs), fallocate argument errors, posix_fallocate, and lseek SEEK_DATA /
SEEK_HOLE compared with tmpfs's page-granular answers (fallocated but unwritten
pages count as holes). Space limits (ENOSPC) are in test_limits.py.
"""
import errno
import os
import resource
import signal

import pytest

from .helpers import (FALLOC_FL_COLLAPSE_RANGE, FALLOC_FL_INSERT_RANGE, FALLOC_FL_KEEP_SIZE,
                      FALLOC_FL_PUNCH_HOLE, FALLOC_FL_ZERO_RANGE, assert_errno, errno_of,
                      fallocate, in_child, read_file, write_file)

PAGE = 4096
MAX_FILE_SIZE = 2**63 - 1
PUNCH = FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE


@pytest.fixture
def rwfile(fs_dir):
    """An empty file opened read-write: (path, fd)."""
    path = os.path.join(fs_dir, "f")
    fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o644)
    yield path, fd
    os.close(fd)


def blocks(fd):
    return os.fstat(fd).st_blocks


def test_truncate_down_and_up(rwfile):
    path, fd = rwfile
    os.write(fd, b"x" * (3 * PAGE))
    assert blocks(fd) == 24
    os.truncate(path, 5000)
    assert os.fstat(fd).st_size == 5000 and blocks(fd) == 16
    os.ftruncate(fd, 100)
    assert blocks(fd) == 8
    os.ftruncate(fd, 3 * PAGE)  # re-extended: old bytes must not come back
    assert os.pread(fd, 3 * PAGE, 0) == b"x" * 100 + b"\0" * (3 * PAGE - 100)
    assert blocks(fd) == 8
    os.ftruncate(fd, 0)
    assert (os.fstat(fd).st_size, blocks(fd)) == (0, 0)
    assert os.pread(fd, 10, 0) == b""


def test_truncate_errors(fs_dir, rwfile):
    path, _ = rwfile
    assert_errno(errno.EINVAL, os.truncate, path, -1)
    assert_errno(errno.EISDIR, os.truncate, fs_dir, 0)
    ro = os.open(path, os.O_RDONLY)
    try:
        assert_errno(errno.EINVAL, os.ftruncate, ro, 0)
    finally:
        os.close(ro)
    assert_errno(errno.ENOENT, os.truncate, os.path.join(fs_dir, "missing"), 0)


@pytest.mark.parametrize("size", [2**40, 10**15, MAX_FILE_SIZE])
def test_truncate_huge_is_sparse(fs_dir, rwfile, size):
    path, fd = rwfile
    free = os.statvfs(fs_dir).f_bfree
    os.truncate(path, size)
    st = os.fstat(fd)
    assert (st.st_size, st.st_blocks) == (size, 0)
    assert os.pread(fd, 10, size - 10) == b"\0" * 10
    assert os.pread(fd, 1, size - 1) == b"\0"
    # >=: on the shared mount the previous test's deleted files may still
    # be freed meanwhile (memfs: at the kernel's FORGET); a sparse truncate
    # that took blocks would show fewer.
    assert os.statvfs(fs_dir).f_bfree >= free
    os.truncate(path, 0)
    assert os.fstat(fd).st_size == 0


def test_io_at_the_maximum_file_size(rwfile):
    _, fd = rwfile
    assert os.pwrite(fd, b"z", MAX_FILE_SIZE - 1) == 1
    st = os.fstat(fd)
    assert (st.st_size, st.st_blocks) == (MAX_FILE_SIZE, 8)
    assert os.pread(fd, 1, MAX_FILE_SIZE - 1) == b"z"
    assert os.pread(fd, 5, MAX_FILE_SIZE - 5) == b"\0\0\0\0z"
    assert_errno(errno.EINVAL, os.pwrite, fd, b"zz", MAX_FILE_SIZE - 1)
    assert_errno(errno.EINVAL, os.pwrite, fd, b"z", MAX_FILE_SIZE)
    assert_errno(errno.EINVAL, os.pread, fd, 1, MAX_FILE_SIZE)
    assert_errno(errno.EFBIG, fallocate, fd, FALLOC_FL_KEEP_SIZE, MAX_FILE_SIZE - PAGE + 1, PAGE)
    assert os.pwrite(fd, b"head", 0) == 4
    assert os.fstat(fd).st_blocks == 16


def test_rlimit_fsize_gives_efbig(fs_dir):
    path = os.path.join(fs_dir, "limited")
    write_file(path)

    def limited():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))
        fd = os.open(path, os.O_WRONLY)
        try:
            return (errno_of(os.truncate, path, 2 << 20),
                    os.pwrite(fd, b"a" * 100, (1 << 20) - 10),
                    errno_of(os.pwrite, fd, b"a", 1 << 20),
                    errno_of(fallocate, fd, 0, 0, 2 << 20),
                    os.fstat(fd).st_size)
        finally:
            os.close(fd)

    assert in_child(limited) == (errno.EFBIG, 10, errno.EFBIG, errno.EFBIG, 1 << 20)


def test_sparse_file_blocks_and_zero_holes(rwfile):
    path, fd = rwfile
    os.ftruncate(fd, 1 << 20)
    assert blocks(fd) == 0
    os.pwrite(fd, b"y", 512 * 1024)
    assert blocks(fd) == 8
    os.pwrite(fd, b"w" * (PAGE + 2), 3 * PAGE - 1)  # touches pages 2, 3 and 4
    assert blocks(fd) == 32
    data = read_file(path)
    assert len(data) == 1 << 20
    assert data.count(0) == (1 << 20) - 1 - (PAGE + 2)
    assert data[512 * 1024] == ord("y")


def test_fallocate_plain_and_keep_size(rwfile):
    _, fd = rwfile
    os.write(fd, b"abc")
    fallocate(fd, 0, 0, 10000)
    st = os.fstat(fd)
    assert (st.st_size, st.st_blocks) == (10000, 24)
    assert os.pread(fd, 10000, 0) == b"abc" + b"\0" * 9997
    fallocate(fd, FALLOC_FL_KEEP_SIZE, 8192, 5 * PAGE)
    st = os.fstat(fd)
    assert (st.st_size, st.st_blocks) == (10000, 56)
    assert os.pread(fd, 100, 10000) == b""
    fallocate(fd, 0, 0, 100)  # inside the file: no change
    assert (os.fstat(fd).st_size, blocks(fd)) == (10000, 56)
    os.ftruncate(fd, 5000)  # blocks past the new size (even KEEP_SIZE ones) are freed
    assert blocks(fd) == 16


def test_punch_hole(rwfile):
    _, fd = rwfile
    os.write(fd, b"x" * (4 * PAGE))
    fallocate(fd, PUNCH, 100, 200)  # inside one page: zeroed, not freed
    assert os.pread(fd, 400, 0) == b"x" * 100 + b"\0" * 200 + b"x" * 100
    assert blocks(fd) == 32
    fallocate(fd, PUNCH, PAGE - 10, 2 * PAGE + 20)  # frees the 2 whole pages inside
    assert blocks(fd) == 16
    assert os.pread(fd, 4 * PAGE, 0) == (b"x" * 100 + b"\0" * 200 + b"x" * (PAGE - 310)
                                         + b"\0" * (2 * PAGE + 20) + b"x" * (PAGE - 10))
    assert os.fstat(fd).st_size == 4 * PAGE
    fallocate(fd, PUNCH, 10 * PAGE, PAGE)  # beyond EOF: nothing happens
    assert os.fstat(fd).st_size == 4 * PAGE


@pytest.mark.parametrize("mode,expected", [
    (FALLOC_FL_PUNCH_HOLE, errno.EOPNOTSUPP),
    (FALLOC_FL_COLLAPSE_RANGE, errno.EOPNOTSUPP),
    (FALLOC_FL_INSERT_RANGE, errno.EOPNOTSUPP),
], ids=["punch-without-keep-size", "collapse", "insert"])
def test_fallocate_unsupported_modes(rwfile, mode, expected):
    _, fd = rwfile
    os.write(fd, b"q" * (4 * PAGE))
    assert_errno(expected, fallocate, fd, mode, 0, PAGE)
    assert os.pread(fd, 4 * PAGE, 0) == b"q" * (4 * PAGE)
    assert blocks(fd) == 32


@pytest.mark.parametrize("mode", [FALLOC_FL_ZERO_RANGE, FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE],
                         ids=["zero-range", "zero-range-keep-size"])
def test_fallocate_zero_range(rwfile, fs_kind, mode):
    _, fd = rwfile
    os.write(fd, b"q" * (4 * PAGE))
    if fs_kind == "tmpfs":
        assert_errno(errno.EOPNOTSUPP, fallocate, fd, mode, 100, PAGE)
        assert os.pread(fd, 4 * PAGE, 0) == b"q" * (4 * PAGE)
    else:
        # docs/SEMANTICS.md: memfs supports ZERO_RANGE; the range reads as zeros.
        fallocate(fd, mode, 100, PAGE)
        assert os.pread(fd, 4 * PAGE, 0) == b"q" * 100 + bytes(PAGE) + b"q" * (3 * PAGE - 100)
        fallocate(fd, mode, 4 * PAGE, 2 * PAGE)  # past EOF: allocated, size per KEEP_SIZE
        want = 4 * PAGE if mode & FALLOC_FL_KEEP_SIZE else 6 * PAGE
        assert os.fstat(fd).st_size == want
        assert blocks(fd) == 48
        return
    assert os.pread(fd, 4 * PAGE, 0) == b"q" * (4 * PAGE)
    assert blocks(fd) == 32


def test_fallocate_argument_errors(fs_dir, rwfile):
    path, fd = rwfile
    assert_errno(errno.EINVAL, fallocate, fd, 0, -1, PAGE)
    assert_errno(errno.EINVAL, fallocate, fd, 0, 0, 0)
    ro = os.open(path, os.O_RDONLY)
    dfd = os.open(fs_dir, os.O_RDONLY | os.O_DIRECTORY)
    try:
        assert_errno(errno.EBADF, fallocate, ro, 0, 0, PAGE)
        assert_errno(errno.EBADF, fallocate, dfd, 0, 0, PAGE)
    finally:
        os.close(ro)
        os.close(dfd)
    fifo = os.path.join(fs_dir, "fifo")
    os.mkfifo(fifo)
    pfd = os.open(fifo, os.O_RDWR)
    try:
        assert_errno(errno.ESPIPE, fallocate, pfd, 0, 0, PAGE)
    finally:
        os.close(pfd)
    assert (os.fstat(fd).st_size, blocks(fd)) == (0, 0)


def test_posix_fallocate(rwfile):
    _, fd = rwfile
    os.posix_fallocate(fd, 0, 3 * PAGE + 1)
    st = os.fstat(fd)
    assert (st.st_size, st.st_blocks) == (3 * PAGE + 1, 32)
    assert os.pread(fd, 4 * PAGE, 0) == b"\0" * (3 * PAGE + 1)


# ------------------------------------------------------------ SEEK_DATA/HOLE

def _model_seek(data_pages, size, offset, whence):
    """tmpfs's answer for a file whose data lives in `data_pages` (page
    numbers); everything else below `size` is a hole, and EOF is a hole."""
    if offset >= size:
        return errno.ENXIO
    page = offset // PAGE
    last = (size - 1) // PAGE
    if whence == os.SEEK_DATA:
        for p in range(page, last + 1):
            if p in data_pages:
                return max(offset, p * PAGE)
        return errno.ENXIO
    for p in range(page, last + 1):
        if p not in data_pages:
            return max(offset, p * PAGE)
    return size


def _seek(fd, offset, whence):
    try:
        return os.lseek(fd, offset, whence)
    except OSError as e:
        return e.errno


def _check_seeks(fd, data_pages):
    size = os.fstat(fd).st_size
    offsets = sorted({o for p in range(size // PAGE + 2)
                      for o in (p * PAGE, p * PAGE + 1, p * PAGE + PAGE - 1)} | {size, size - 1})
    for off in (o for o in offsets if o >= 0):
        for whence, name in ((os.SEEK_DATA, "SEEK_DATA"), (os.SEEK_HOLE, "SEEK_HOLE")):
            expected = _model_seek(data_pages, size, off, whence)
            assert _seek(fd, off, whence) == expected, f"{name} from {off} (size {size})"


def test_seek_data_hole_sparse_layout(rwfile):
    _, fd = rwfile
    assert _seek(fd, 0, os.SEEK_DATA) == errno.ENXIO  # empty file
    assert _seek(fd, 0, os.SEEK_HOLE) == errno.ENXIO
    os.ftruncate(fd, 10 * PAGE)
    os.pwrite(fd, b"d" * 5, 2 * PAGE + 10)
    os.pwrite(fd, b"D" * PAGE, 3 * PAGE)
    os.pwrite(fd, b"e", 7 * PAGE + 100)
    _check_seeks(fd, {2, 3, 7})
    os.pwrite(fd, b"t", 10 * PAGE + 50)  # data up to EOF: the only hole is EOF
    _check_seeks(fd, {2, 3, 7, 10})


def test_seek_data_hole_after_punch(rwfile):
    _, fd = rwfile
    os.write(fd, b"x" * (6 * PAGE))
    _check_seeks(fd, set(range(6)))
    fallocate(fd, PUNCH, 2 * PAGE, 2 * PAGE)
    _check_seeks(fd, {0, 1, 4, 5})


def test_seek_fallocated_unwritten_is_hole(rwfile):
    _, fd = rwfile
    fallocate(fd, 0, 0, 8 * PAGE)
    _check_seeks(fd, set())
    os.pwrite(fd, b"w", 5 * PAGE + 7)
    _check_seeks(fd, {5})
    assert os.pread(fd, 8 * PAGE, 0) == b"\0" * (5 * PAGE + 7) + b"w" + b"\0" * (3 * PAGE - 8)
