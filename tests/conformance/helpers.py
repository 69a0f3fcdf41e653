"""Shared helpers for the conformance table.

Owns: thin ctypes wrappers for syscalls Python does not expose with all flags
(fallocate, renameat2, statx, utimensat, raw getxattr/listxattr, readdir with
telldir/seekdir), errno assertions, small file utilities, running code as
another user or in a child process, and the "mount still usable" check used
after hostile operations. Knows nothing about individual tests.
"""
import ctypes
import ctypes.util
import errno
import multiprocessing
import os
import time
import shutil

import pytest

from mounts import NOBODY_GID, NOBODY_UID, run_as  # tests/ is on sys.path (conftest)

libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)

# <linux/falloc.h>
FALLOC_FL_KEEP_SIZE = 0x01
FALLOC_FL_PUNCH_HOLE = 0x02
FALLOC_FL_COLLAPSE_RANGE = 0x08
FALLOC_FL_ZERO_RANGE = 0x10
FALLOC_FL_INSERT_RANGE = 0x20

# <linux/fs.h>
RENAME_NOREPLACE = 1 << 0
RENAME_EXCHANGE = 1 << 1

AT_FDCWD = -100
AT_SYMLINK_NOFOLLOW = 0x100
AT_SYMLINK_FOLLOW = 0x400

UTIME_NOW = (1 << 30) - 1
UTIME_OMIT = (1 << 30) - 2

STATX_BASIC_STATS = 0x7FF
STATX_BTIME = 0x800

OTHER_GID = 100  # "users": a group nobody is not a member of by default.


def _check(ret, *context):
    if ret < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err), *context)
    return ret


def _path(p):
    return os.fsencode(p)


# ---------------------------------------------------------------- errno checks

def errno_name(err):
    return errno.errorcode.get(err, str(err)) if err else "success"


def errno_of(fn, *args, **kwargs):
    """Run fn; return 0 on success or the errno of the OSError it raised."""
    try:
        fn(*args, **kwargs)
    except OSError as e:
        return e.errno
    return 0


def assert_errno(expected, fn, *args, **kwargs):
    """Assert that fn(*args) fails with exactly errno `expected`."""
    got = errno_of(fn, *args, **kwargs)
    if got != expected:
        call = f"{getattr(fn, '__name__', fn)}{args!r}"
        if len(call) > 300:
            call = call[:150] + "..." + call[-150:]
        raise AssertionError(f"{call}: expected {errno_name(expected)}, got {errno_name(got)}")


# ------------------------------------------------------------- other identities

def as_nobody(fn, *args, groups=None, **kwargs):
    """Run fn as nobody:nogroup in a forked child; return its result."""
    return run_as(NOBODY_UID, NOBODY_GID, fn, *args, groups=groups, **kwargs)


def errno_as_nobody(fn, *args, groups=None, **kwargs):
    """errno_of(fn, *args) evaluated as nobody:nogroup (0 on success)."""
    return as_nobody(errno_of, fn, *args, groups=groups, **kwargs)


def in_child(fn, *args, **kwargs):
    """Run fn in a forked child process (as root); return its result."""
    return run_as(0, 0, fn, *args, groups=[], **kwargs)


def parallel(fn, arg_tuples):
    """Run fn(*args) for every tuple at once, one forked process each;
    return the results in order (an exception in any worker is re-raised)."""
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(len(arg_tuples)) as pool:
        return pool.starmap(fn, arg_tuples)


# ---------------------------------------------------------------- file helpers

def write_file(path, data=b"", mode=0o644):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)


def read_file(path):
    with open(path, "rb") as f:
        return f.read()


def append_file(path, data):
    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def mode_of(path):
    return os.lstat(path).st_mode & 0o7777


def current_umask():
    old = os.umask(0)
    os.umask(old)
    return old


def make_world_dir(path, mode=0o777):
    """mkdir path and make it fully accessible to every user (umask-proof)."""
    os.mkdir(path)
    os.chmod(path, mode)
    return path


def assert_usable(root):
    """The mount still works: create, write, read back, list, stat, delete."""
    probe = os.path.join(root, f"usable-probe-{os.getpid()}")
    payload = b"still alive\n" * 100
    write_file(probe, payload)
    assert read_file(probe) == payload
    assert os.path.basename(probe) in os.listdir(root)
    assert os.stat(probe).st_size == len(payload)
    os.unlink(probe)
    assert not os.path.exists(probe)


# ------------------------------------------------------------ syscall wrappers

libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]


def fallocate(fd, mode, offset, length):
    _check(libc.fallocate(fd, mode, offset, length))


libc.renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p,
                           ctypes.c_uint]


def renameat2(old, new, flags, olddirfd=AT_FDCWD, newdirfd=AT_FDCWD):
    _check(libc.renameat2(olddirfd, _path(old), newdirfd, _path(new), flags), old, new)


libc.linkat.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p,
                        ctypes.c_int]


def link_fd(fd, newpath):
    """Give an open file (e.g. an O_TMPFILE) a name: linkat via /proc/self/fd."""
    _check(libc.linkat(AT_FDCWD, f"/proc/self/fd/{fd}".encode(), AT_FDCWD, _path(newpath),
                       AT_SYMLINK_FOLLOW), newpath)


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


libc.utimensat.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.POINTER(_Timespec),
                           ctypes.c_int]


def _timespec(t):
    if t == "now":
        return _Timespec(0, UTIME_NOW)
    if t == "omit":
        return _Timespec(0, UTIME_OMIT)
    return _Timespec(*divmod(t, 10**9))


def utimensat(path, atime, mtime, follow=True):
    """utimensat(2); each time is an int of nanoseconds, "now" or "omit";
    atime=mtime=None passes a NULL times pointer."""
    times = None
    if atime is not None or mtime is not None:
        times = (_Timespec * 2)(_timespec(atime), _timespec(mtime))
    flags = 0 if follow else AT_SYMLINK_NOFOLLOW
    _check(libc.utimensat(AT_FDCWD, _path(path), times, flags), path)


class _StatxTimestamp(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_int64), ("tv_nsec", ctypes.c_uint32),
                ("_reserved", ctypes.c_int32)]

    @property
    def ns(self):
        return self.tv_sec * 10**9 + self.tv_nsec


class Statx(ctypes.Structure):
    _fields_ = [
        ("stx_mask", ctypes.c_uint32), ("stx_blksize", ctypes.c_uint32),
        ("stx_attributes", ctypes.c_uint64), ("stx_nlink", ctypes.c_uint32),
        ("stx_uid", ctypes.c_uint32), ("stx_gid", ctypes.c_uint32),
        ("stx_mode", ctypes.c_uint16), ("_spare0", ctypes.c_uint16),
        ("stx_ino", ctypes.c_uint64), ("stx_size", ctypes.c_uint64),
        ("stx_blocks", ctypes.c_uint64), ("stx_attributes_mask", ctypes.c_uint64),
        ("stx_atime", _StatxTimestamp), ("stx_btime", _StatxTimestamp),
        ("stx_ctime", _StatxTimestamp), ("stx_mtime", _StatxTimestamp),
        ("stx_rdev_major", ctypes.c_uint32), ("stx_rdev_minor", ctypes.c_uint32),
        ("stx_dev_major", ctypes.c_uint32), ("stx_dev_minor", ctypes.c_uint32),
        ("_spare", ctypes.c_uint64 * 14),
    ]


libc.statx.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_uint,
                       ctypes.POINTER(Statx)]


def statx(path, mask=STATX_BASIC_STATS | STATX_BTIME, follow=True):
    buf = Statx()
    flags = 0 if follow else AT_SYMLINK_NOFOLLOW
    _check(libc.statx(AT_FDCWD, _path(path), flags, mask, ctypes.byref(buf)), path)
    return buf


libc.getxattr.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_size_t]
libc.getxattr.restype = ctypes.c_ssize_t
libc.listxattr.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_size_t]
libc.listxattr.restype = ctypes.c_ssize_t


def getxattr_raw(path, name, size):
    """getxattr(2) with a caller-chosen buffer size; returns the value bytes
    (size 0 returns the length the value needs, as an int)."""
    buf = ctypes.create_string_buffer(max(size, 1))
    n = _check(libc.getxattr(_path(path), name.encode(), buf if size else None, size), path)
    return buf.raw[:n] if size else n


def listxattr_raw(path, size):
    """listxattr(2) with a caller-chosen buffer size (0 asks for the length)."""
    buf = ctypes.create_string_buffer(max(size, 1))
    n = _check(libc.listxattr(_path(path), buf if size else None, size), path)
    return buf.raw[:n] if size else n


# ------------------------------------------------------------------- readdir

class _Dirent(ctypes.Structure):
    _fields_ = [("d_ino", ctypes.c_uint64), ("d_off", ctypes.c_int64),
                ("d_reclen", ctypes.c_ushort), ("d_type", ctypes.c_ubyte),
                ("d_name", ctypes.c_char * 256)]


libc.opendir.argtypes = [ctypes.c_char_p]
libc.opendir.restype = ctypes.c_void_p
libc.readdir64.argtypes = [ctypes.c_void_p]
libc.readdir64.restype = ctypes.POINTER(_Dirent)
libc.telldir.argtypes = [ctypes.c_void_p]
libc.telldir.restype = ctypes.c_long
libc.seekdir.argtypes = [ctypes.c_void_p, ctypes.c_long]
libc.rewinddir.argtypes = [ctypes.c_void_p]
libc.closedir.argtypes = [ctypes.c_void_p]

DT_DIR, DT_REG, DT_LNK, DT_FIFO, DT_SOCK, DT_CHR, DT_BLK = 4, 8, 10, 1, 12, 2, 6


class Dir:
    """libc DIR stream: readdir (including '.' and '..'), telldir, seekdir."""

    def __init__(self, path):
        self._d = libc.opendir(_path(path))
        if not self._d:
            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err), path)

    def read(self):
        """Next entry as (name bytes, d_type, d_ino), or None at the end."""
        ctypes.set_errno(0)
        ent = libc.readdir64(self._d)
        if not ent:
            err = ctypes.get_errno()
            if err:
                raise OSError(err, os.strerror(err))
            return None
        e = ent.contents
        return e.d_name, e.d_type, e.d_ino

    def read_n(self, n):
        out = []
        for _ in range(n):
            ent = self.read()
            if ent is None:
                break
            out.append(ent)
        return out

    def read_all(self):
        out = []
        while (ent := self.read()) is not None:
            out.append(ent)
        return out

    def tell(self):
        return libc.telldir(self._d)

    def seek(self, pos):
        libc.seekdir(self._d, pos)

    def rewind(self):
        libc.rewinddir(self._d)

    def close(self):
        if self._d:
            libc.closedir(self._d)
            self._d = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def readdir_all(path):
    """Every entry of a directory, '.' and '..' included: [(name, d_type, ino)]."""
    with Dir(path) as d:
        return d.read_all()


# ------------------------------------------------------------------- tools

def require_tool(name):
    if shutil.which(name) is None:
        pytest.fail(f"required tool {name!r} is not installed (Debian: apt-get install acl)")


def settle(fn, expected, timeout=10.0):
    """fn() once it equals `expected`, else its value after `timeout` seconds.

    memfs gives a deleted inode's space back when the kernel's FORGET for it
    arrives, which the kernel queues asynchronously (docs/SEMANTICS.md);
    tmpfs does it before unlink returns. Callers still assert the value, so
    space that never comes back fails the test.
    """
    deadline = time.monotonic() + timeout
    value = fn()
    while value != expected and time.monotonic() < deadline:
        time.sleep(0.005)
        value = fn()
    return value
