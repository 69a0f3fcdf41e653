"""Applies generated ops to one mounted side and normalizes the outcome.

Owns: the Side (a mount root plus its open-fd slots) and one small function
per op kind. An outcome is ("ok", value) or ("err", "ENAME"); an op on an
empty fd slot gives ("noslot",) on both sides. Values never contain fd
numbers, inode numbers or times, so two sides compare with ==.
Ops with op.user run in a forked child with those credentials (run_as).
"""
import os
import stat

import mounts

from . import libc
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
}


# ---- fd-slot ops: fn(side, fd, **args) -> value -------------------------------------------

FD_OPS = {
    "close": _close,
    "fwrite": lambda s, fd, slot, offset, size, byte: _write(fd, offset, size, byte),
    "fread": lambda s, fd, slot, offset, size: _read(fd, offset, size),
    "ftruncate": lambda s, fd, slot, size: os.ftruncate(fd, size),
    "ffallocate": lambda s, fd, slot, mode, offset, length: libc.fallocate(fd, mode, offset, length),
    "lseek": lambda s, fd, slot, offset, whence: _lseek(fd, offset, whence),
    "fstat": lambda s, fd, slot: norm_stat(os.fstat(fd)),
    "flink": lambda s, fd, slot, path: libc.link_fd(fd, s.abs(path)),
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
