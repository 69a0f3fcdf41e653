"""Idmapped mounts for the tests, as a container runtime makes them.

Owns: a user namespace with a given id map, held by a child process only
long enough to open it; `open_tree(OPEN_TREE_CLONE)` of a directory,
`mount_setattr(MOUNT_ATTR_IDMAP)` with that namespace, `move_mount` onto a
new directory; and undoing all of it. The map `0 BASE COUNT` (uids and
gids alike) shows a file owned by id N on the file system as BASE + N
through the idmapped mount, and stores a file created there by BASE + N as
owned by N.

Knows nothing about memfs or tmpfs: the same calls on either.
"""
import contextlib
import ctypes
import ctypes.util
import os
import tempfile

from mounts import umount

libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)

# x86_64 and the generic table agree on these (the new mount API, 5.2+).
SYS_OPEN_TREE = 428
SYS_MOVE_MOUNT = 429
SYS_MOUNT_SETATTR = 442
OPEN_TREE_CLONE = 1
OPEN_TREE_CLOEXEC = os.O_CLOEXEC
AT_FDCWD = -100
AT_EMPTY_PATH = 0x1000
MOVE_MOUNT_F_EMPTY_PATH = 0x4
MOUNT_ATTR_IDMAP = 0x00100000
CLONE_NEWUSER = 0x10000000


class MountAttr(ctypes.Structure):
    _fields_ = [("attr_set", ctypes.c_uint64), ("attr_clr", ctypes.c_uint64),
                ("propagation", ctypes.c_uint64), ("userns_fd", ctypes.c_uint64)]


def _check(ret, what):
    if ret < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")
    return ret


def userns_fd(base, count):
    """An fd of a new user namespace mapping 0..count to base..base+count."""
    r, w = os.pipe()
    go_r, go_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        os.close(go_w)
        ok = libc.unshare(CLONE_NEWUSER) == 0
        os.write(w, b"1" if ok else b"0")
        os.read(go_r, 1)  # wait until the parent has opened the namespace
        os._exit(0)
    os.close(w)
    os.close(go_r)
    try:
        if os.read(r, 1) != b"1":
            raise OSError("unshare(CLONE_NEWUSER) failed in the child")
        for name in ("uid_map", "gid_map"):
            with open(f"/proc/{pid}/{name}", "w") as f:
                f.write(f"0 {base} {count}\n")
        return os.open(f"/proc/{pid}/ns/user", os.O_RDONLY | os.O_CLOEXEC)
    finally:
        os.write(go_w, b"x")
        os.close(go_w)
        os.close(r)
        os.waitpid(pid, 0)


def make_idmapped(src, dst, base, count):
    """Mount an idmapped clone of directory `src` on directory `dst`."""
    ns = userns_fd(base, count)
    try:
        tree = _check(libc.syscall(SYS_OPEN_TREE, AT_FDCWD, os.fsencode(src),
                                   OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC), f"open_tree {src}")
        try:
            attr = MountAttr(attr_set=MOUNT_ATTR_IDMAP, userns_fd=ns)
            _check(libc.syscall(SYS_MOUNT_SETATTR, tree, b"", AT_EMPTY_PATH, ctypes.byref(attr),
                                ctypes.c_size_t(ctypes.sizeof(attr))), f"mount_setattr(MOUNT_ATTR_IDMAP) {src}")
            _check(libc.syscall(SYS_MOVE_MOUNT, tree, b"", AT_FDCWD, os.fsencode(dst), MOVE_MOUNT_F_EMPTY_PATH),
                   f"move_mount onto {dst}")
        finally:
            os.close(tree)
    finally:
        os.close(ns)


@contextlib.contextmanager
def idmapped(src, base, count):
    """An idmapped view of `src` (see the module comment); its path."""
    dst = tempfile.mkdtemp(prefix="idmapped-")
    try:
        make_idmapped(src, dst, base, count)
        try:
            yield dst
        finally:
            umount(dst)
    finally:
        with contextlib.suppress(OSError):
            os.rmdir(dst)
