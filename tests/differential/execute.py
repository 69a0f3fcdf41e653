"""Applies generated ops to one mounted side and normalizes the outcome.

Owns: the Side (a mount root plus its open-fd slots) and one small function
per op kind. An outcome is ("ok", value) or ("err", "ENAME"); an op on an
empty fd slot gives ("noslot",) on both sides. Values never contain fd
numbers, inode numbers or times, so two sides compare with ==.
Ops with op.user run in a forked child with those credentials (run_as).
mmap ops touch the mapping in a forked child too, so that a SIGBUS (a fault
the file system cannot serve) is an outcome, not the end of the test.
"""
import ctypes
import os
import pickle
import signal
import stat

import mounts

from . import gen, libc
from .observe import err_name, norm_stat, listing, summarize

NONBLOCK = os.O_NONBLOCK  # every open: a FIFO must never block the test
_XATTR_FLAGS = {"0": 0, "XATTR_CREATE": os.XATTR_CREATE, "XATTR_REPLACE": os.XATTR_REPLACE}


def _time_spec(spec):
    return getattr(libc, spec) if isinstance(spec, str) else spec


def _with_fd(path, flags, fn, mode=0o644):
    fd = os.open(path, flags | NONBLOCK, mode)
    try:
        return fn(fd)
    finally:
        os.close(fd)


def _write(fd, offset, size, byte):
    data = bytes([byte]) * size
    return os.write(fd, data) if offset is None else os.pwrite(fd, data, offset)


def _lseek(fd, offset, whence):
    whence = getattr(os, whence)
    if whence not in (os.SEEK_SET, os.SEEK_CUR) and stat.S_ISDIR(os.fstat(fd).st_mode):
        # Not compared: for a FUSE directory the kernel itself answers lseek
        # (generic_file_llseek: SEEK_END/DATA/HOLE work) where tmpfs says EINVAL;
        # the FUSE server never sees the call, so memfs cannot match tmpfs.
        return "lseek on a directory: not compared"
    return os.lseek(fd, offset, whence)


def _read(fd, offset, size):
    return summarize(os.read(fd, size) if offset is None else os.pread(fd, size, offset))


# ---- path ops: fn(side, **args) -> value -------------------------------------------------

def _create(s, path, mode):
    os.close(os.open(s.abs(path), os.O_CREAT | os.O_WRONLY | NONBLOCK, mode))


def _write_path(s, path, offset, size, byte, trunc):
    flags = os.O_WRONLY | os.O_CREAT | (os.O_APPEND if offset is None else 0) | (os.O_TRUNC if trunc else 0)
    return _with_fd(s.abs(path), flags, lambda fd: _write(fd, offset, size, byte))


def _xattr_value(size, byte):
    return bytes([byte]) * size


def _getxattr(path, name, size, follow):
    value = libc.getxattr(path, name, size, follow)
    return value if isinstance(value, int) else summarize(value)


_MKNOD_TYPES = {"chr": stat.S_IFCHR, "blk": stat.S_IFBLK, "sock": stat.S_IFSOCK, "reg": stat.S_IFREG,
                "none": 0, "dir": stat.S_IFDIR}


def _mknod(s, path, type, mode, rdev):
    os.mknod(s.abs(path), _MKNOD_TYPES[type] | mode, rdev)


def _setacl(s, path, name, acl, follow):
    os.setxattr(s.abs(path), name, gen.ACL_BLOBS[acl], follow_symlinks=follow)


def _copy_path(s, src, dst, src_off, dst_off, count):
    """copy_file_range between two paths (src read-only, dst created if missing)."""
    def copy(fd_in):
        return _with_fd(s.abs(dst), os.O_WRONLY | os.O_CREAT,
                        lambda fd_out: os.copy_file_range(fd_in, fd_out, count, src_off, dst_off))
    return _with_fd(s.abs(src), os.O_RDONLY, copy)


def _dirseek(s, path, after):
    """Read `after` entries, seek back to the offset getdents64 gave for the
    last of them (telldir/seekdir), read on from there.

    Entry order and offset cookies are the file system's own, so the outcome
    is only: how many entries, and whether the read after the seek returned
    exactly the entries not yet read (none lost, none repeated).
    """
    def run(fd):
        entries = []
        while True:
            chunk = libc.getdents64(fd)
            if not chunk:
                break
            entries += chunk
        k = min(after, len(entries))
        os.lseek(fd, entries[k - 1][1] if k else 0, os.SEEK_SET)
        rest = []
        while True:
            chunk = libc.getdents64(fd)
            if not chunk:
                break
            rest += [name for name, _ in chunk]
        names = [name for name, _ in entries]
        return {"entries": len(names), "read_first": k, "rest_is_the_others": sorted(rest) == sorted(names[k:])}
    return _with_fd(s.abs(path), os.O_RDONLY | os.O_DIRECTORY, run)


def _close(s, fd, slot):
    del s.slots[slot]
    os.close(fd)


PATH_OPS = {
    "create": _create,
    "write": _write_path,
    "read": lambda s, path, offset, size: _with_fd(s.abs(path), os.O_RDONLY, lambda fd: _read(fd, offset, size)),
    "truncate": lambda s, path, size: os.truncate(s.abs(path), size),
    "mkdir": lambda s, path, mode: os.mkdir(s.abs(path), mode),
    "rmdir": lambda s, path: os.rmdir(s.abs(path)),
    "unlink": lambda s, path: os.unlink(s.abs(path)),
    "rename": lambda s, src, dst, flags: libc.renameat2(s.abs(src), s.abs(dst), flags),
    "link": lambda s, src, dst: os.link(s.abs(src), s.abs(dst), follow_symlinks=False),
    "symlink": lambda s, target, path: os.symlink(target, s.abs(path)),
    "readlink": lambda s, path: os.readlink(s.abs(path)),
    "chmod": lambda s, path, mode: os.chmod(s.abs(path), mode),
    "chown": lambda s, path, uid, gid, follow: os.chown(s.abs(path), uid, gid, follow_symlinks=follow),
    "utimens": lambda s, path, atime, mtime, follow: libc.utimensat(
        s.abs(path), _time_spec(atime), _time_spec(mtime), follow),
    "setxattr": lambda s, path, name, size, byte, flags, follow: os.setxattr(
        s.abs(path), name, _xattr_value(size, byte), _XATTR_FLAGS[flags], follow_symlinks=follow),
    "getxattr": lambda s, path, name, size, follow: _getxattr(s.abs(path), name, size, follow),
    "listxattr": lambda s, path, size, follow: libc.listxattr(s.abs(path), size, follow),
    "removexattr": lambda s, path, name, follow: os.removexattr(s.abs(path), name, follow_symlinks=follow),
    "mkfifo": lambda s, path, mode: os.mkfifo(s.abs(path), mode),
    "stat": lambda s, path, follow: norm_stat(os.stat(s.abs(path), follow_symlinks=follow)),
    "readdir": lambda s, path: listing(s.abs(path)),
    "statfs": lambda s: None,  # statfs is compared after every op anyway
    "access": lambda s, path, mode: libc.access(s.abs(path), mode),
    "fallocate": lambda s, path, mode, offset, length: _with_fd(
        s.abs(path), os.O_RDWR, lambda fd: libc.fallocate(fd, mode, offset, length)),
    "seek": lambda s, path, offset, whence: _with_fd(
        s.abs(path), os.O_RDONLY, lambda fd: _lseek(fd, offset, whence)),
    "mknod": _mknod,
    "setacl": _setacl,
    "copy": _copy_path,
    "dirseek": _dirseek,
}


# ---- fd-slot ops: fn(side, fd, **args) -> value -------------------------------------------

PAGE = 4096


def _in_child(fn, *args):
    """fn(*args) in a forked child: its value, its OSError, or ("signal", name) if it died."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            result = ("ok", fn(*args))
        except OSError as e:
            result = ("err", e)
        except BaseException as e:  # noqa: BLE001 - any other failure is reported, not lost
            result = ("err", OSError(0, repr(e)))
        with os.fdopen(w, "wb") as f:
            f.write(pickle.dumps(result))
        os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        data = f.read()
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        return ("signal", signal.Signals(os.WTERMSIG(status)).name)
    kind, value = pickle.loads(data)
    if kind == "err":
        raise value
    return value


def _mmap_window(fd, offset, size):
    """[start, end) to touch through the mapping, or None when there is nothing to touch.

    Within EOF (past it a fault is SIGBUS) and within the data extent found
    from offset by SEEK_DATA/SEEK_HOLE: a fault on a hole makes tmpfs allocate
    the page (on a read too, and SIGBUS when the mount is full), while a FUSE
    file system only sees READ/WRITE requests for page cache pages and cannot
    tell a fault from read(2). The fd's offset is restored afterwards.
    """
    fsize = os.fstat(fd).st_size
    if offset >= fsize:
        return None
    saved = os.lseek(fd, 0, os.SEEK_CUR)
    try:
        start = os.lseek(fd, offset, os.SEEK_DATA)
        hole = os.lseek(fd, start, os.SEEK_HOLE)
    except OSError:  # ENXIO: no data from offset on
        return None
    finally:
        os.lseek(fd, saved, os.SEEK_SET)
    end = min(start + size, hole, fsize)
    return (start, end) if start < end else None


def _mmap_touch(fd, offset, size, byte, write):
    """Map a MAP_SHARED window of fd, write a fill (or read) through it, msync, unmap."""
    prot = libc.PROT_READ | (libc.PROT_WRITE if write else 0)
    window = _mmap_window(fd, offset, size) if stat.S_ISREG(os.fstat(fd).st_mode) else None
    if window is None:  # map (the kernel checks fd, prot, type) but touch nothing
        libc.munmap(libc.mmap(fd, offset - offset % PAGE, PAGE, prot), PAGE)
        return "mapped, nothing touched"
    start, end = window
    base = start - start % PAGE
    length = end - base
    addr = libc.mmap(fd, base, length, prot)
    try:
        if write:
            ctypes.memmove(addr + start - base, bytes([byte]) * (end - start), end - start)
            libc.msync(addr, length)
            return {"wrote": (start, end)}
        return {"read": (start, end), "data": summarize(ctypes.string_at(addr + start - base, end - start))}
    finally:
        libc.munmap(addr, length)


def _mmap(s, fd, slot, offset, size, byte, write):
    return _in_child(_mmap_touch, fd, offset, size, byte, write)


def _fcopy(s, fd, slot, src_slot, src_off, dst_off, count):
    """copy_file_range from src_slot's file into slot's (None offsets: the fds' own)."""
    src = s.slots.get(src_slot)
    if src is None:
        return "no source slot"
    return os.copy_file_range(src, fd, count, src_off, dst_off)


def _fstatfs(fd):
    """fstatfs fields that do not depend on asynchronous FORGET/RELEASE (the
    free counts are compared after every op, with settling, by the harness)."""
    v = os.fstatvfs(fd)
    return {k: getattr(v, "f_" + k) for k in ("bsize", "frsize", "blocks", "files", "namemax")}


FD_OPS = {
    "close": _close,
    "fwrite": lambda s, fd, slot, offset, size, byte: _write(fd, offset, size, byte),
    "fread": lambda s, fd, slot, offset, size: _read(fd, offset, size),
    "ftruncate": lambda s, fd, slot, size: os.ftruncate(fd, size),
    "ffallocate": lambda s, fd, slot, mode, offset, length: libc.fallocate(fd, mode, offset, length),
    "lseek": lambda s, fd, slot, offset, whence: _lseek(fd, offset, whence),
    "fstat": lambda s, fd, slot: norm_stat(os.fstat(fd)),
    "flink": lambda s, fd, slot, path: libc.link_fd(fd, s.abs(path)),
    "fchmod": lambda s, fd, slot, mode: os.fchmod(fd, mode),
    "fchown": lambda s, fd, slot, uid, gid: os.fchown(fd, uid, gid),
    "futimens": lambda s, fd, slot, atime, mtime: libc.futimens(fd, _time_spec(atime), _time_spec(mtime)),
    "fsync": lambda s, fd, slot, data_only: (os.fdatasync if data_only else os.fsync)(fd),
    "fstatfs": lambda s, fd, slot: _fstatfs(fd),
    "mmap": _mmap,
    "fcopy": _fcopy,
}


def _open_slot(s, slot, path, flags, mode):
    """Open into slot; the slot's previous fd is closed only if the open succeeds."""
    bits = 0
    for name in flags:
        bits |= getattr(os, name)
    fd = os.open(s.abs(path), bits | NONBLOCK, mode)
    s.close_slot(slot)
    s.slots[slot] = fd


def _tmpfile_slot(s, slot, path, excl, mode):
    """An unnamed file in directory path, into slot (as _open_slot)."""
    fd = os.open(s.abs(path), os.O_TMPFILE | os.O_RDWR | (os.O_EXCL if excl else 0), mode)
    s.close_slot(slot)
    s.slots[slot] = fd


def _run(side, op):
    """Outcome of op on side, in this process. Never raises OSError."""
    try:
        if op.kind == "open":
            return ("ok", _open_slot(side, **op.args))
        if op.kind == "tmpfile":
            return ("ok", _tmpfile_slot(side, **op.args))
        if op.kind in FD_OPS:
            fd = side.slots.get(op.args["slot"])
            if fd is None:
                return ("noslot",)
            return ("ok", FD_OPS[op.kind](side, fd, **op.args))
        return ("ok", PATH_OPS[op.kind](side, **op.args))
    except OSError as e:
        return ("err", err_name(e))


class Side:
    """One mounted file system under test and its open-fd slots."""

    def __init__(self, name, root):
        self.name, self.root, self.slots = name, root, {}

    def abs(self, rel):
        return self.root + "/" + rel

    def apply(self, op):
        if op.user:
            uid, gid = op.user
            return mounts.run_as(uid, gid, _run, self, op)
        return _run(self, op)

    def close_slot(self, slot):
        fd = self.slots.pop(slot, None)
        if fd is not None:
            os.close(fd)

    def close_all(self):
        for slot in list(self.slots):
            self.close_slot(slot)
