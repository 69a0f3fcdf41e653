"""Permission checks, ownership and the set-id bits.

Covers: mode bits enforced for another user (owner/group/other classes, with
owner bits taking precedence), directory r/w/x semantics, root's bypass (but
exec needs some x bit), access(2) as another user, sticky directories,
setgid directories (group and setgid inheritance, sgid stripped for
non-members), suid/sgid cleared on write/truncate by an unprivileged writer
and on chown exactly as tmpfs does, chmod/chown/chgrp rules for non-root,
utimensat permission rules, umask, ownership of new files, renaming a foreign
directory to another parent. The other user is nobody:nogroup (65534).
"""
import errno
import os
import stat
import subprocess

import pytest

from mounts import NOBODY_GID, NOBODY_UID

from .helpers import (OTHER_GID, as_nobody, current_umask, errno_as_nobody, errno_of,
                      make_world_dir, mode_of, read_file, run_as, utimensat, write_file)

NOBODY = NOBODY_UID


def _file(d, name, mode, uid=0, gid=0, data=b"data"):
    path = os.path.join(d, name)
    write_file(path, data)
    os.chown(path, uid, gid)
    os.chmod(path, mode)
    return path


def _can_open(path, flags):
    os.close(os.open(path, flags))


@pytest.mark.parametrize("mode,uid,gid,read_ok,write_ok", [
    (0o600, 0, 0, False, False),
    (0o604, 0, 0, True, False),
    (0o602, 0, 0, False, True),
    (0o066, 0, NOBODY_GID, True, True),     # group class applies to nogroup
    (0o606, 0, NOBODY_GID, False, False),   # ... and shadows the other bits
    (0o077, NOBODY, 0, False, False),       # owner class shadows group/other
    (0o400, NOBODY, 0, True, False),
    (0o200, NOBODY, 0, False, True),
])
def test_file_mode_bits_for_other_user(fs_dir, mode, uid, gid, read_ok, write_ok):
    path = _file(fs_dir, "f", mode, uid, gid)
    assert (errno_as_nobody(_can_open, path, os.O_RDONLY) == 0) == read_ok
    assert (errno_as_nobody(_can_open, path, os.O_WRONLY) == 0) == write_ok
    assert errno_as_nobody(read_file, path) == (0 if read_ok else errno.EACCES)
    assert as_nobody(os.access, path, os.R_OK) == read_ok
    assert as_nobody(os.access, path, os.W_OK) == write_ok


def test_directory_mode_bits_for_other_user(fs_dir):
    j = os.path.join
    for name, mode in [("rwx", 0o777), ("x", 0o711), ("r", 0o744), ("wx", 0o733), ("none", 0o700)]:
        os.mkdir(j(fs_dir, name))
        write_file(j(fs_dir, name, "inside"), b"in")
        os.chmod(j(fs_dir, name, "inside"), 0o644)
        os.chmod(j(fs_dir, name), mode)

    def probe(name):
        d = j(fs_dir, name)
        return (errno_of(os.listdir, d), errno_of(read_file, j(d, "inside")),
                errno_of(write_file, j(d, "new")), errno_of(os.unlink, j(d, "inside")))

    E, OK = errno.EACCES, 0
    assert as_nobody(probe, "rwx") == (OK, OK, OK, OK)
    assert as_nobody(probe, "x") == (E, OK, E, E)
    assert as_nobody(probe, "r") == (OK, E, E, E)
    assert as_nobody(probe, "wx") == (E, OK, OK, OK)
    assert as_nobody(probe, "none") == (E, E, E, E)
    assert as_nobody(os.access, j(fs_dir, "none", "inside"), os.F_OK) is False


def test_root_bypasses_rw_but_exec_needs_an_x_bit(fs_dir):
    path = _file(fs_dir, "script", 0o000, NOBODY, NOBODY_GID, b"#!/bin/sh\necho ran\n")
    assert read_file(path) == b"#!/bin/sh\necho ran\n"
    write_file(path, b"#!/bin/sh\necho ran\n")
    assert os.access(path, os.R_OK | os.W_OK)
    assert not os.access(path, os.X_OK)
    os.chmod(path, 0o001)
    assert os.access(path, os.X_OK)
    out = subprocess.run([path], capture_output=True, timeout=30)
    assert out.stdout == b"ran\n"
    d = os.path.join(fs_dir, "d")
    os.mkdir(d, 0o000)
    assert os.listdir(d) == [] and os.access(d, os.X_OK)


def test_access_for_other_user(fs_dir):
    path = _file(fs_dir, "f", 0o705)
    assert as_nobody(os.access, path, os.R_OK | os.X_OK) is True
    assert as_nobody(os.access, path, os.W_OK) is False
    assert as_nobody(os.access, path, os.F_OK) is True
    os.chmod(path, 0o750)
    assert as_nobody(os.access, path, os.R_OK) is False
    assert as_nobody(os.access, path, os.R_OK, groups=[0]) is True  # supplementary group
    assert as_nobody(os.access, path, os.F_OK) is True


def test_sticky_directory(fs_dir):
    j = os.path.join
    d = make_world_dir(j(fs_dir, "sticky"), 0o1777)
    root_file = _file(d, "roots", 0o666)
    write_file(j(d, "target"))
    own = j(d, "own")
    as_nobody(write_file, own, b"mine")
    assert errno_as_nobody(os.unlink, root_file) == errno.EPERM
    assert errno_as_nobody(os.rename, root_file, j(d, "stolen")) == errno.EPERM
    assert errno_as_nobody(os.rename, own, j(d, "roots")) == errno.EPERM  # cannot replace it
    assert errno_as_nobody(write_file, root_file, b"modified") == 0  # writing is still allowed
    assert as_nobody(os.rename, own, j(d, "own2")) is None
    assert as_nobody(os.unlink, j(d, "own2")) is None
    os.chown(d, NOBODY, NOBODY_GID)  # the directory's owner may delete anything
    assert as_nobody(os.unlink, root_file) is None
    assert sorted(os.listdir(d)) == ["target"]
    assert mode_of(d) == 0o1777


def test_setgid_directory_inheritance(fs_dir):
    j = os.path.join
    d = j(fs_dir, "sgid")
    os.mkdir(d)
    os.chown(d, 0, OTHER_GID)
    os.chmod(d, 0o2777)
    write_file(j(d, "file"))
    os.mkdir(j(d, "sub"), 0o755)
    as_nobody(write_file, j(d, "nobodys"))
    assert os.stat(j(d, "file")).st_gid == OTHER_GID
    assert os.stat(j(d, "nobodys")).st_gid == OTHER_GID
    assert os.stat(j(d, "nobodys")).st_uid == NOBODY
    sub = os.stat(j(d, "sub"))
    assert sub.st_gid == OTHER_GID and sub.st_mode & stat.S_ISGID
    write_file(j(d, "sub", "deeper"))
    assert os.stat(j(d, "sub", "deeper")).st_gid == OTHER_GID
    # A non-member creating a setgid executable there does not get the bit.
    as_nobody(lambda: os.close(os.open(j(d, "sg"), os.O_CREAT | os.O_WRONLY, 0o2755)))
    assert mode_of(j(d, "sg")) == 0o755 & ~current_umask()
    assert os.stat(j(d, "sg")).st_gid == OTHER_GID
    os.mkdir(j(fs_dir, "plain"))
    write_file(j(fs_dir, "plain", "f"))
    assert os.stat(j(fs_dir, "plain", "f")).st_gid == 0


# (initial mode, who writes) -> mode after a write, a truncate, a same-size truncate
# by nobody; "member" is nobody with the file's group (0) as supplementary group.
KILL_PRIV_CASES = [
    (0o6777, "nobody", 0o777), (0o6777, "member", 0o777),
    (0o2777, "nobody", 0o777), (0o2777, "member", 0o777),
    (0o4777, "nobody", 0o777),
    (0o2767, "nobody", 0o767), (0o2767, "member", 0o2767),
    (0o2666, "nobody", 0o666), (0o2666, "member", 0o2666),
    (0o6766, "nobody", 0o766), (0o6766, "member", 0o2766),
]


def _write_one(path):
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, b"x")
    finally:
        os.close(fd)


@pytest.mark.parametrize("op", [_write_one, lambda p: os.truncate(p, 1),
                                lambda p: os.truncate(p, 4)],
                         ids=["write", "truncate", "truncate-same-size"])
def test_setid_bits_cleared_by_unprivileged_modification(fs_dir, op):
    for i, (mode, who, expected) in enumerate(KILL_PRIV_CASES):
        path = _file(fs_dir, f"f{i}", mode)
        as_nobody(op, path, groups=[0] if who == "member" else [])
        assert mode_of(path) == expected, f"{mode:o} by {who}: got {mode_of(path):o}"
    path = _file(fs_dir, "root-writes", 0o6777)
    op(path)  # root has CAP_FSETID: nothing is cleared
    assert mode_of(path) == 0o6777


def test_setid_bits_cleared_by_a_write_after_earlier_writes(fs_dir):
    """The kernel remembers that a written file had nothing to clear
    (S_NOSEC); a chmod that sets the bits again must make the next
    unprivileged write clear them."""
    path = _file(fs_dir, "f", 0o666)
    for _ in range(3):
        as_nobody(_write_one, path)
    os.chmod(path, 0o6777)
    as_nobody(_write_one, path)
    assert mode_of(path) == 0o777
    os.chmod(path, 0o6777)
    _write_one(path)  # root: kept
    assert mode_of(path) == 0o6777


@pytest.mark.parametrize("owner", [(0, 0), (-1, -1), (NOBODY, -1), (-1, OTHER_GID)])
def test_setid_bits_cleared_by_chown(fs_dir, owner):
    expected = {0o6777: 0o777, 0o2777: 0o777, 0o4755: 0o755, 0o2755: 0o755,
                0o2767: 0o2767, 0o6745: 0o2745}
    for mode, after in expected.items():
        path = _file(fs_dir, f"f{mode:o}", mode)
        os.chown(path, *owner)
        assert mode_of(path) == after, f"{mode:o} after chown{owner}: got {mode_of(path):o}"
    d = os.path.join(fs_dir, "dir")
    os.mkdir(d)
    os.chmod(d, 0o6777)
    os.chown(d, *owner)
    assert mode_of(d) == 0o6777  # directories keep them


def test_chmod_rules_for_non_root(fs_dir):
    mine = _file(fs_dir, "mine", 0o644, NOBODY, OTHER_GID)
    theirs = _file(fs_dir, "theirs", 0o666)
    assert errno_as_nobody(os.chmod, theirs, 0o777) == errno.EPERM
    as_nobody(os.chmod, mine, 0o4755)
    assert mode_of(mine) == 0o4755
    as_nobody(os.chmod, mine, 0o2755)  # not a member of the file's group: sgid dropped
    assert mode_of(mine) == 0o755
    as_nobody(os.chmod, mine, 0o2755, groups=[OTHER_GID])
    assert mode_of(mine) == 0o2755
    d = make_world_dir(os.path.join(fs_dir, "d"))
    assert errno_as_nobody(os.chmod, d, 0o700) == errno.EPERM


def test_chown_rules_for_non_root(fs_dir):
    mine = _file(fs_dir, "mine", 0o644, NOBODY, NOBODY_GID)
    theirs = _file(fs_dir, "theirs", 0o666)
    assert errno_as_nobody(os.chown, mine, 0, -1) == errno.EPERM
    assert errno_as_nobody(os.chown, mine, -1, 0) == errno.EPERM
    assert errno_as_nobody(os.chown, theirs, NOBODY, -1) == errno.EPERM
    assert errno_as_nobody(os.chown, theirs, -1, NOBODY_GID) == errno.EPERM
    assert errno_as_nobody(os.chown, mine, NOBODY, NOBODY_GID) == 0  # to itself: allowed
    assert errno_as_nobody(os.chown, mine, -1, OTHER_GID, groups=[OTHER_GID]) == 0
    st = os.stat(mine)
    assert (st.st_uid, st.st_gid) == (NOBODY, OTHER_GID)
    assert errno_as_nobody(os.chown, mine, -1, 0, groups=[OTHER_GID]) == errno.EPERM
    os.chown(mine, 12345, 54321)  # root gives away freely
    assert (os.stat(mine).st_uid, os.stat(mine).st_gid) == (12345, 54321)
    os.symlink("mine", os.path.join(fs_dir, "lnk"))
    os.lchown(os.path.join(fs_dir, "lnk"), 777, 888)
    lst = os.lstat(os.path.join(fs_dir, "lnk"))
    assert (lst.st_uid, lst.st_gid) == (777, 888)
    assert os.stat(mine).st_uid == 12345


def test_utimensat_permission_rules(fs_dir):
    writable = _file(fs_dir, "w", 0o666)
    readonly = _file(fs_dir, "r", 0o644)
    assert errno_as_nobody(utimensat, writable, "now", "now") == 0
    assert errno_as_nobody(utimensat, writable, None, None) == 0
    assert errno_as_nobody(utimensat, writable, 10**9, 10**9) == errno.EPERM
    assert errno_as_nobody(utimensat, writable, "now", "omit") == errno.EPERM
    assert errno_as_nobody(utimensat, readonly, "now", "now") == errno.EACCES
    assert errno_as_nobody(utimensat, readonly, 10**9, 10**9) == errno.EPERM
    assert errno_as_nobody(utimensat, readonly, "omit", "omit") == 0
    mine = _file(fs_dir, "mine", 0o400, NOBODY, NOBODY_GID)
    as_nobody(utimensat, mine, 5 * 10**9 + 7, 6 * 10**9 + 8)
    assert os.stat(mine).st_mtime_ns == 6 * 10**9 + 8


def test_umask_applied(fs_dir):
    j = os.path.join
    old = os.umask(0o027)
    try:
        os.close(os.open(j(fs_dir, "f"), os.O_CREAT | os.O_WRONLY, 0o777))
        os.mkdir(j(fs_dir, "d"), 0o777)
        os.mkfifo(j(fs_dir, "p"), 0o666)
        os.mknod(j(fs_dir, "n"), stat.S_IFREG | 0o666)
        os.symlink("f", j(fs_dir, "s"))
        os.umask(0)
        os.mkdir(j(fs_dir, "all"), 0o1777)
    finally:
        os.umask(old)
    assert [mode_of(j(fs_dir, n)) for n in ("f", "d", "p", "n", "s", "all")] == \
        [0o750, 0o750, 0o640, 0o640, 0o777, 0o1777]


def test_new_files_owned_by_creator(fs_dir):
    d = make_world_dir(os.path.join(fs_dir, "pub"))
    j = os.path.join
    as_nobody(write_file, j(d, "f"))
    as_nobody(os.mkdir, j(d, "d"))
    as_nobody(os.symlink, "f", j(d, "s"))
    as_nobody(os.mkfifo, j(d, "p"))
    for name in ("f", "d", "s", "p"):
        st = os.lstat(j(d, name))
        assert (st.st_uid, st.st_gid) == (NOBODY, NOBODY_GID), name
    run_as(4242, 4343, write_file, j(d, "g"))
    assert (os.stat(j(d, "g")).st_uid, os.stat(j(d, "g")).st_gid) == (4242, 4343)


def test_moving_foreign_directory_needs_write_on_it(fs_dir):
    j = os.path.join
    a = make_world_dir(j(fs_dir, "a"))
    b = make_world_dir(j(fs_dir, "b"))
    os.mkdir(j(a, "rootdir"), 0o755)
    write_file(j(a, "rootfile"))
    assert errno_as_nobody(os.rename, j(a, "rootdir"), j(b, "moved")) == errno.EACCES
    assert errno_as_nobody(os.rename, j(a, "rootdir"), j(a, "renamed")) == 0  # same parent
    assert errno_as_nobody(os.rename, j(a, "rootfile"), j(b, "moved-file")) == 0
    assert os.listdir(a) == ["renamed"] and os.listdir(b) == ["moved-file"]


def test_unlink_depends_on_directory_not_file(fs_dir):
    d = make_world_dir(os.path.join(fs_dir, "open"))
    locked = _file(d, "locked", 0o000)
    assert errno_as_nobody(read_file, locked) == errno.EACCES
    as_nobody(os.unlink, locked)
    assert os.listdir(d) == []
    closed = os.path.join(fs_dir, "closed")
    os.mkdir(closed, 0o755)
    _file(closed, "free", 0o777)
    assert errno_as_nobody(os.unlink, os.path.join(closed, "free")) == errno.EACCES


def test_open_flags_need_matching_permission(fs_dir):
    d = make_world_dir(os.path.join(fs_dir, "pub"))
    path = _file(d, "f", 0o644)
    assert errno_as_nobody(_can_open, path, os.O_RDONLY | os.O_TRUNC) == errno.EACCES
    assert errno_as_nobody(_can_open, path, os.O_WRONLY | os.O_APPEND) == errno.EACCES
    assert errno_as_nobody(_can_open, path, os.O_RDONLY | os.O_CREAT) == 0  # exists: no write
    assert errno_as_nobody(_can_open, path, os.O_RDONLY | os.O_CREAT | os.O_EXCL) == errno.EEXIST
    assert read_file(path) == b"data"
