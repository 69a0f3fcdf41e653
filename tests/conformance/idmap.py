"""Make an idmapped mount (mount_setattr with MOUNT_ATTR_IDMAP), as rootless
container runtimes and systemd-homed do: a small program over the system
calls (open_tree, mount_setattr, move_mount; util-linux 2.38 has no
X-mount.idmap=). Used by test_idmapped.py.
"""
import contextlib
import ctypes
import os
import tempfile

from mounts import umount

libc = ctypes.CDLL(None, use_errno=True)

SYS_OPEN_TREE, SYS_MOVE_MOUNT, SYS_MOUNT_SETATTR = 428, 429, 442  # x86-64
OPEN_TREE_CLONE, OPEN_TREE_CLOEXEC = 1, 0o2000000
AT_FDCWD, AT_EMPTY_PATH = -100, 0x1000
MOUNT_ATTR_IDMAP = 0x00100000
MOVE_MOUNT_F_EMPTY_PATH = 0x4
CLONE_NEWUSER = 0x10000000


class MountAttr(ctypes.Structure):
    _fields_ = [("attr_set", ctypes.c_uint64), ("attr_clr", ctypes.c_uint64),
                ("propagation", ctypes.c_uint64), ("userns_fd", ctypes.c_uint64)]


def _check(ret, what):
    if ret < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")
    return ret


def user_namespace(inside, outside, count):
    """An fd of a new user namespace mapping ids [inside, inside+count) to
    [outside, outside+count) of this one (uids and gids alike)."""
    r, w = os.pipe()
    ready_r, ready_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(w)
        os.close(ready_r)
        try:
            _check(libc.unshare(CLONE_NEWUSER), "unshare(CLONE_NEWUSER)")
            os.write(ready_w, b"1")
            os.read(r, 1)  # wait while the parent maps ids and takes the namespace
        finally:
            os._exit(0)
    os.close(r)
    os.close(ready_w)
    try:
        if os.read(ready_r, 1) != b"1":
            raise OSError("the child could not make a user namespace")
        for name, text in [("uid_map", f"{inside} {outside} {count}\n"), ("setgroups", "deny"),
                           ("gid_map", f"{inside} {outside} {count}\n")]:
            with open(f"/proc/{pid}/{name}", "w") as f:
                f.write(text)
        return os.open(f"/proc/{pid}/ns/user", os.O_RDONLY | os.O_CLOEXEC)
    finally:
        os.write(w, b"x")
        os.close(w)
        os.close(ready_r)
        os.waitpid(pid, 0)


@contextlib.contextmanager
def idmapped(source, inside, outside, count):
    """`source` mounted again, idmapped: a file owned by id `inside + k`
    shows as `outside + k` there, and what a caller with id `outside + k`
    creates there is owned by `inside + k`. Yields the new mount's path."""
    ns = user_namespace(inside, outside, count)
    target = tempfile.mkdtemp(prefix="idmapped-")
    tree = -1
    try:
        tree = _check(libc.syscall(SYS_OPEN_TREE, AT_FDCWD, os.fsencode(source), OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC),
                      "open_tree")
        attr = MountAttr(attr_set=MOUNT_ATTR_IDMAP, userns_fd=ns)
        _check(libc.syscall(SYS_MOUNT_SETATTR, tree, b"", AT_EMPTY_PATH, ctypes.byref(attr), ctypes.sizeof(attr)),
               "mount_setattr(MOUNT_ATTR_IDMAP)")
        _check(libc.syscall(SYS_MOVE_MOUNT, tree, b"", AT_FDCWD, os.fsencode(target), MOVE_MOUNT_F_EMPTY_PATH),
               "move_mount")
        yield target
    finally:
        if tree >= 0:
            os.close(tree)
        os.close(ns)
        umount(target)
        os.rmdir(target)
