"""ctypes wrappers for the syscalls the op executor needs beyond `os`.

Owns: renameat2 (RENAME_NOREPLACE / RENAME_EXCHANGE / RENAME_WHITEOUT),
fallocate with a mode, utimensat and futimens with per-field UTIME_NOW /
UTIME_OMIT, getxattr / listxattr with a caller-chosen buffer size (so size 0
and ERANGE are reachable), raw mmap / msync / munmap (Python's mmap module
refuses lengths past EOF and empty files before the kernel sees them) and
getdents64 (directory offsets, which os.scandir hides). Every wrapper raises
OSError with the C errno on failure, like `os` does.
"""
import ctypes
import ctypes.util
import os

_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)

AT_FDCWD = -100
AT_SYMLINK_NOFOLLOW = 0x100

RENAME_NOREPLACE = 1
RENAME_EXCHANGE = 2
RENAME_WHITEOUT = 4

FALLOC_FL_KEEP_SIZE = 0x01
FALLOC_FL_PUNCH_HOLE = 0x02
FALLOC_FL_COLLAPSE_RANGE = 0x08
FALLOC_FL_ZERO_RANGE = 0x10
FALLOC_FL_INSERT_RANGE = 0x20

UTIME_NOW = (1 << 30) - 1
UTIME_OMIT = (1 << 30) - 2


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


_libc.renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
_libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
_libc.utimensat.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.POINTER(_Timespec), ctypes.c_int]
for _fn in ("getxattr", "lgetxattr"):
    getattr(_libc, _fn).argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_size_t]
    getattr(_libc, _fn).restype = ctypes.c_ssize_t
_libc.futimens.argtypes = [ctypes.c_int, ctypes.POINTER(_Timespec)]
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
_libc.mmap.restype = ctypes.c_void_p
_libc.msync.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
_libc.syscall.restype = ctypes.c_long
_libc.access.argtypes = [ctypes.c_char_p, ctypes.c_int]
for _fn in ("listxattr", "llistxattr"):
    getattr(_libc, _fn).argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_size_t]
    getattr(_libc, _fn).restype = ctypes.c_ssize_t


def _check(ret, what):
    if ret < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")
    return ret


def renameat2(src, dst, flags):
    _check(_libc.renameat2(AT_FDCWD, os.fsencode(src), AT_FDCWD, os.fsencode(dst), flags), "renameat2")


AT_SYMLINK_FOLLOW = 0x400


def link_fd(fd, dst):
    """Give the file open as fd another name (how an O_TMPFILE gets one)."""
    src = os.fsencode(f"/proc/self/fd/{fd}")
    _check(_libc.linkat(AT_FDCWD, src, AT_FDCWD, os.fsencode(dst), AT_SYMLINK_FOLLOW), "linkat")


def access(path, mode):
    """access(2) with its errno (os.access only returns a bool)."""
    _check(_libc.access(os.fsencode(path), mode), "access")


def fallocate(fd, mode, offset, length):
    _check(_libc.fallocate(fd, mode, offset, length), "fallocate")


def _timespecs(atime, mtime):
    ts = (_Timespec * 2)()
    for i, spec in enumerate((atime, mtime)):
        ts[i] = _Timespec(0, spec) if isinstance(spec, int) else _Timespec(*spec)
    return ts


def utimensat(path, atime, mtime, follow):
    """atime/mtime: (sec, nsec), or UTIME_NOW / UTIME_OMIT."""
    flags = 0 if follow else AT_SYMLINK_NOFOLLOW
    _check(_libc.utimensat(AT_FDCWD, os.fsencode(path), _timespecs(atime, mtime), flags), "utimensat")


def futimens(fd, atime, mtime):
    """utimensat on an open fd (as utimensat above)."""
    _check(_libc.futimens(fd, _timespecs(atime, mtime)), "futimens")


PROT_READ, PROT_WRITE = 1, 2
MAP_SHARED = 1
MS_SYNC = 4
_MAP_FAILED = ctypes.c_void_p(-1).value


def mmap(fd, offset, length, prot):
    """Address of a MAP_SHARED mapping of fd (offset page aligned)."""
    addr = _libc.mmap(None, length, prot, MAP_SHARED, fd, offset)
    if addr == _MAP_FAILED:
        err = ctypes.get_errno()
        raise OSError(err, f"mmap: {os.strerror(err)}")
    return addr


def msync(addr, length):
    _check(_libc.msync(addr, length, MS_SYNC), "msync")


def munmap(addr, length):
    _check(_libc.munmap(addr, length), "munmap")


_SYS_GETDENTS64 = 217  # x86_64


def getdents64(fd, bufsize=4096):
    """One getdents64 call: [(name, d_off)] (empty at the end of the directory)."""
    buf = ctypes.create_string_buffer(bufsize)
    n = _check(_libc.syscall(_SYS_GETDENTS64, ctypes.c_int(fd), buf, ctypes.c_size_t(bufsize)), "getdents64")
    out, pos, raw = [], 0, buf.raw[:n]
    while pos < n:
        d_off = int.from_bytes(raw[pos + 8:pos + 16], "little", signed=True)
        reclen = int.from_bytes(raw[pos + 16:pos + 18], "little")
        name = raw[pos + 19:pos + reclen].split(b"\0", 1)[0]
        out.append((os.fsdecode(name), d_off))
        pos += reclen
    return out


def getxattr(path, name, size, follow):
    """Returns the syscall's result: the length for size 0, else the bytes."""
    fn = _libc.getxattr if follow else _libc.lgetxattr
    buf = ctypes.create_string_buffer(max(size, 1))
    n = _check(fn(os.fsencode(path), os.fsencode(name), buf if size else None, size), "getxattr")
    return n if size == 0 else buf.raw[:n]


def listxattr(path, size, follow):
    """Returns the length for size 0, else the sorted list of names."""
    fn = _libc.listxattr if follow else _libc.llistxattr
    buf = ctypes.create_string_buffer(max(size, 1))
    n = _check(fn(os.fsencode(path), buf if size else None, size), "listxattr")
    if size == 0:
        return n
    return sorted(x.decode() for x in buf.raw[:n].split(b"\0") if x)
