"""Extended attributes and POSIX ACLs.

Covers: user./trusted./security. set/get/list/remove on files and
directories, XATTR_CREATE (EEXIST) and XATTR_REPLACE (ENODATA), empty and
binary values, limits (64 KiB value, 255-byte name, list over 64 KiB gives
E2BIG, invalid names/namespaces), ERANGE for small buffers, user.* refused on
symlinks/FIFOs/devices (EPERM/ENODATA) while trusted.* works there, access
rules for another user (read/write permission, trusted.* hidden, security.*
read-only, sticky directories), xattr space limited by nr_inodes (ENOSPC,
reusable after removal), xattrs following renames and links. POSIX ACLs set
with setfacl: named user/group entries granting or denying what the mode bits
say, the mask (and chmod rewriting it), default ACLs inherited by new files
and directories (umask ignored), removal, and who may set an ACL.
"""
import errno
import os
import subprocess

import pytest

from mounts import NOBODY_GID, NOBODY_UID

from .helpers import (OTHER_GID, as_nobody, assert_errno, current_umask, errno_as_nobody,
                      errno_of, getxattr_raw, listxattr_raw, make_world_dir, mode_of, read_file,
                      require_tool, write_file)


def _file(fs_dir, name="f", mode=0o644, data=b"data"):
    path = os.path.join(fs_dir, name)
    write_file(path, data)
    os.chmod(path, mode)
    return path


@pytest.mark.parametrize("ns", ["user", "trusted", "security"])
def test_xattr_set_get_list_remove(fs_dir, ns):
    f = _file(fs_dir)
    d = os.path.join(fs_dir, "d")
    os.mkdir(d)
    for target in (f, d):
        os.setxattr(target, f"{ns}.one", b"1")
        os.setxattr(target, f"{ns}.two", b"\0binary\xff\0")
        os.setxattr(target, f"{ns}.empty", b"")
        assert os.getxattr(target, f"{ns}.one") == b"1"
        assert os.getxattr(target, f"{ns}.two") == b"\0binary\xff\0"
        assert os.getxattr(target, f"{ns}.empty") == b""
        assert set(os.listxattr(target)) == {f"{ns}.one", f"{ns}.two", f"{ns}.empty"}
        os.setxattr(target, f"{ns}.one", b"replaced")
        assert os.getxattr(target, f"{ns}.one") == b"replaced"
        os.removexattr(target, f"{ns}.two")
        assert set(os.listxattr(target)) == {f"{ns}.one", f"{ns}.empty"}
        assert_errno(errno.ENODATA, os.getxattr, target, f"{ns}.two")


def test_xattr_create_replace_flags(fs_dir):
    f = _file(fs_dir)
    os.setxattr(f, "user.a", b"1", os.XATTR_CREATE)
    assert_errno(errno.EEXIST, os.setxattr, f, "user.a", b"2", os.XATTR_CREATE)
    assert_errno(errno.ENODATA, os.setxattr, f, "user.b", b"2", os.XATTR_REPLACE)
    os.setxattr(f, "user.a", b"3", os.XATTR_REPLACE)
    assert os.getxattr(f, "user.a") == b"3"
    assert os.listxattr(f) == ["user.a"]
    assert_errno(errno.ENODATA, os.getxattr, f, "user.missing")
    assert_errno(errno.ENODATA, os.removexattr, f, "user.missing")


def test_xattr_size_and_name_limits(fs_dir):
    f = _file(fs_dir)
    big = bytes(range(256)) * 256  # 64 KiB
    os.setxattr(f, "user.big", big)
    assert os.getxattr(f, "user.big") == big
    assert_errno(errno.E2BIG, os.setxattr, f, "user.bigger", big + b"x")
    os.setxattr(f, "user." + "n" * 250, b"longest name")
    assert os.getxattr(f, "user." + "n" * 250) == b"longest name"
    assert_errno(errno.ERANGE, os.setxattr, f, "user." + "n" * 251, b"x")
    assert_errno(errno.ERANGE, os.getxattr, f, "user." + "n" * 251)
    assert_errno(errno.EOPNOTSUPP, os.setxattr, f, "foo.bar", b"x")
    assert_errno(errno.EOPNOTSUPP, os.setxattr, f, "system.foo", b"x")
    assert_errno(errno.EINVAL, os.setxattr, f, "user.", b"x")
    assert_errno(errno.ERANGE, os.setxattr, f, "", b"x")
    assert set(os.listxattr(f)) == {"user.big", "user." + "n" * 250}


def test_xattr_list_larger_than_64k_is_e2big(fs_dir):
    f = _file(fs_dir)
    names = [f"user.{i:04d}" + "n" * 240 for i in range(270)]  # 270 * 250 bytes > 64 KiB
    for name in names[:250]:
        os.setxattr(f, name, b"v")
    assert set(os.listxattr(f)) == set(names[:250])  # 62,750 bytes: still fine
    for name in names[250:]:
        os.setxattr(f, name, b"v")
    assert_errno(errno.E2BIG, os.listxattr, f)
    assert os.getxattr(f, names[-1]) == b"v"


def test_xattr_erange_on_small_buffers(fs_dir):
    f = _file(fs_dir)
    os.setxattr(f, "user.k", b"twelve bytes")
    os.setxattr(f, "user.other", b"")
    assert getxattr_raw(f, "user.k", 0) == 12
    assert_errno(errno.ERANGE, getxattr_raw, f, "user.k", 11)
    assert getxattr_raw(f, "user.k", 12) == b"twelve bytes"
    assert getxattr_raw(f, "user.other", 0) == 0
    need = listxattr_raw(f, 0)
    assert need == len(b"user.k\0user.other\0")
    assert_errno(errno.ERANGE, listxattr_raw, f, need - 1)
    assert set(listxattr_raw(f, need).split(b"\0")[:-1]) == {b"user.k", b"user.other"}
    empty = _file(fs_dir, "empty")
    assert listxattr_raw(empty, 0) == 0


def test_user_xattr_refused_on_special_files(fs_dir):
    j = os.path.join
    os.symlink("target", j(fs_dir, "l"))
    os.mkfifo(j(fs_dir, "p"))
    os.mknod(j(fs_dir, "c"), 0o20600, os.makedev(1, 3))
    for name in ("l", "p", "c"):
        path = j(fs_dir, name)
        assert_errno(errno.EPERM, os.setxattr, path, "user.a", b"1", follow_symlinks=False)
        assert_errno(errno.ENODATA, os.getxattr, path, "user.a", follow_symlinks=False)
        os.setxattr(path, "trusted.a", b"t", follow_symlinks=False)
        assert os.getxattr(path, "trusted.a", follow_symlinks=False) == b"t"
        assert os.listxattr(path, follow_symlinks=False) == ["trusted.a"]
    _file(fs_dir, "target")
    os.setxattr(j(fs_dir, "l"), "user.via-link", b"x")  # follows to the target
    assert os.listxattr(j(fs_dir, "target")) == ["user.via-link"]


def test_xattr_access_for_other_user(fs_dir):
    f = _file(fs_dir, mode=0o644)
    for ns in ("user", "trusted", "security"):
        os.setxattr(f, f"{ns}.x", ns.encode())
    assert set(as_nobody(os.listxattr, f)) == {"user.x", "security.x"}
    assert as_nobody(os.getxattr, f, "user.x") == b"user"
    assert as_nobody(os.getxattr, f, "security.x") == b"security"
    assert errno_as_nobody(os.getxattr, f, "trusted.x") == errno.ENODATA
    for ns in ("user", "trusted", "security"):
        expect = errno.EACCES if ns == "user" else errno.EPERM
        assert errno_as_nobody(os.setxattr, f, f"{ns}.x", b"changed") == expect, ns
    assert errno_as_nobody(os.removexattr, f, "user.x") == errno.EACCES
    os.chmod(f, 0o600)
    assert errno_as_nobody(os.getxattr, f, "user.x") == errno.EACCES
    assert errno_as_nobody(os.listxattr, f) == 0  # listing needs no permission
    os.chmod(f, 0o666)
    assert errno_as_nobody(os.setxattr, f, "user.x", b"changed") == 0
    assert errno_as_nobody(os.removexattr, f, "user.x") == 0
    assert set(os.listxattr(f)) == {"trusted.x", "security.x"}


def test_user_xattr_in_sticky_directory(fs_dir):
    d = make_world_dir(os.path.join(fs_dir, "sticky"), 0o1777)
    assert errno_as_nobody(os.setxattr, d, "user.a", b"1") == errno.EPERM
    f = _file(d, "rootfile", 0o666)
    assert errno_as_nobody(os.setxattr, f, "user.a", b"1") == 0


def test_xattrs_follow_rename_and_links(fs_dir):
    f = _file(fs_dir)
    os.setxattr(f, "user.k", b"v")
    os.link(f, os.path.join(fs_dir, "hard"))
    os.rename(f, os.path.join(fs_dir, "moved"))
    assert os.getxattr(os.path.join(fs_dir, "moved"), "user.k") == b"v"
    os.setxattr(os.path.join(fs_dir, "hard"), "user.k2", b"v2")
    assert set(os.listxattr(os.path.join(fs_dir, "moved"))) == {"user.k", "user.k2"}
    fd = os.open(os.path.join(fs_dir, "moved"), os.O_RDONLY)
    try:
        os.setxattr(fd, "user.fd", b"via fd")
        assert os.getxattr(fd, "user.k") == b"v"
    finally:
        os.close(fd)
    assert os.getxattr(os.path.join(fs_dir, "hard"), "user.fd") == b"via fd"


def test_xattr_space_limited_by_nr_inodes(make_mount):
    root = make_mount("size=16M,nr_inodes=100")
    f = _file(root)
    free0 = os.statvfs(root).f_ffree
    count = 0
    while count < 1000:
        err = errno_of(os.setxattr, f, f"user.k{count}", b"v" * 4000)
        if err:
            assert err == errno.ENOSPC
            break
        count += 1
    assert 20 <= count <= 25, f"{count} xattrs of 4000 bytes fit in nr_inodes=100 (tmpfs: 24)"
    assert os.statvfs(root).f_ffree <= 5
    for i in range(count):
        os.removexattr(f, f"user.k{i}")
    assert os.statvfs(root).f_ffree == free0
    os.setxattr(f, "user.big", b"b" * 65536)
    assert len(os.getxattr(f, "user.big")) == 65536


# ------------------------------------------------------------------ ACLs

def _setfacl(*args):
    require_tool("setfacl")
    subprocess.run(["setfacl", *args], check=True, capture_output=True, timeout=30)


def _getfacl(path, default=False):
    require_tool("getfacl")
    args = ["getfacl", "-c", "-n", "-p", "-E"] + (["-d"] if default else []) + [path]
    out = subprocess.run(args, check=True, capture_output=True, text=True, timeout=30).stdout
    return {line for line in out.splitlines() if line and not line.startswith("#")}


def test_acl_named_user_grants_and_denies(fs_dir):
    granted = _file(fs_dir, "granted", 0o600, b"secret")
    _setfacl("-m", f"u:{NOBODY_UID}:r", granted)
    assert mode_of(granted) == 0o640  # the group bits now show the mask
    assert as_nobody(read_file, granted) == b"secret"
    assert errno_as_nobody(write_file, granted, b"x") == errno.EACCES
    denied = _file(fs_dir, "denied", 0o644)
    _setfacl("-m", f"u:{NOBODY_UID}:---", denied)
    assert errno_as_nobody(read_file, denied) == errno.EACCES
    assert as_nobody(os.access, denied, os.R_OK) is False
    assert "system.posix_acl_access" in os.listxattr(denied)


def test_acl_named_group_entry(fs_dir):
    f = _file(fs_dir, "f", 0o600, b"group data")
    _setfacl("-m", f"g:{OTHER_GID}:rw", f)
    assert as_nobody(read_file, f, groups=[OTHER_GID]) == b"group data"
    assert as_nobody(write_file, f, b"written", groups=[OTHER_GID]) is None
    assert errno_as_nobody(read_file, f) == errno.EACCES
    assert read_file(f) == b"written"


def test_acl_mask_and_chmod(fs_dir):
    f = _file(fs_dir, "f", 0o640)
    _setfacl("-m", f"u:{NOBODY_UID}:rw", f)
    assert "mask::rw-" in _getfacl(f)
    assert as_nobody(read_file, f) == b"data"
    _setfacl("-m", "m::---", f)
    assert mode_of(f) == 0o600
    assert errno_as_nobody(read_file, f) == errno.EACCES
    os.chmod(f, 0o640)  # chmod sets the mask from the group bits
    assert "mask::r--" in _getfacl(f)
    assert f"user:{NOBODY_UID}:rw-" in _getfacl(f)
    assert as_nobody(read_file, f) == b"data"
    assert errno_as_nobody(write_file, f, b"x") == errno.EACCES
    os.chmod(f, 0o600)
    assert "mask::---" in _getfacl(f)
    assert errno_as_nobody(read_file, f) == errno.EACCES


def test_acl_directory_search_entry(fs_dir):
    d = os.path.join(fs_dir, "private")
    os.mkdir(d, 0o700)
    _file(d, "inside", 0o644, b"reachable")
    assert errno_as_nobody(read_file, os.path.join(d, "inside")) == errno.EACCES
    _setfacl("-m", f"u:{NOBODY_UID}:x", d)
    assert as_nobody(read_file, os.path.join(d, "inside")) == b"reachable"
    assert errno_as_nobody(os.listdir, d) == errno.EACCES


def test_default_acl_inherited(fs_dir):
    d = os.path.join(fs_dir, "inherit")
    os.mkdir(d, 0o755)
    _setfacl("-d", "-m", f"u:{NOBODY_UID}:rwx,g::r-x,o::---,m::rwx", d)
    old = os.umask(0o077)  # ignored when the parent has a default ACL
    try:
        write_file(os.path.join(d, "file"), b"f", mode=0o666)
        os.mkdir(os.path.join(d, "sub"), 0o777)
    finally:
        os.umask(old)
    f, sub = os.path.join(d, "file"), os.path.join(d, "sub")
    assert mode_of(f) == 0o660 and mode_of(sub) == 0o770
    assert {f"user:{NOBODY_UID}:rwx", "mask::rw-", "other::---"} <= _getfacl(f)
    assert {f"user:{NOBODY_UID}:rwx", "mask::rwx"} <= _getfacl(sub)
    assert f"user:{NOBODY_UID}:rwx" in _getfacl(sub, default=True)
    assert set(os.listxattr(sub)) == {"system.posix_acl_access", "system.posix_acl_default"}
    assert os.listxattr(f) == ["system.posix_acl_access"]
    assert as_nobody(write_file, f, b"by nobody") is None
    assert errno_as_nobody(os.listdir, d) == 0  # the default ACL does not govern d itself
    write_file(os.path.join(sub, "deeper"), b"d", mode=0o644)
    assert f"user:{NOBODY_UID}:rwx" in _getfacl(os.path.join(sub, "deeper"))
    assert mode_of(os.path.join(sub, "deeper")) == 0o640
    assert current_umask() == old


def test_acl_removal_and_who_may_set(fs_dir):
    f = _file(fs_dir, "f", 0o600)
    assert errno_as_nobody(os.setxattr, f, "system.posix_acl_access",
                           os.getxattr(_aclsource(fs_dir), "system.posix_acl_access")) == errno.EPERM
    _setfacl("-m", f"u:{NOBODY_UID}:r", f)
    assert as_nobody(read_file, f) == b"data"
    _setfacl("-b", f)
    assert "system.posix_acl_access" not in os.listxattr(f)
    assert mode_of(f) == 0o600
    assert errno_as_nobody(read_file, f) == errno.EACCES
    mine = _file(fs_dir, "mine", 0o600)
    os.chown(mine, NOBODY_UID, NOBODY_GID)
    as_nobody(os.setxattr, mine, "system.posix_acl_access",
              os.getxattr(_aclsource(fs_dir), "system.posix_acl_access"))
    assert f"user:{NOBODY_UID}:r--" in _getfacl(mine)


def _aclsource(fs_dir):
    """A file carrying the ACL u::rw,u:nobody:r,g::---,m::r,o::--- to copy from."""
    src = os.path.join(fs_dir, "aclsource")
    if not os.path.exists(src):
        _file(fs_dir, "aclsource", 0o600)
        _setfacl("-m", f"u:{NOBODY_UID}:r", src)
    return src


def test_an_unset_selinux_label_and_a_set_one(fs_kind, fs_dir):
    # docs/SEMANTICS.md: memfs answers an unset security.selinux with
    # EOPNOTSUPP (ls remembers it per device and stops asking), tmpfs
    # with ENODATA; a label that is set reads back alike on both.
    path = _file(fs_dir)
    want = errno.EOPNOTSUPP if fs_kind == "memfs" else errno.ENODATA
    assert errno_of(os.getxattr, path, "security.selinux") == want
    assert errno_of(os.getxattr, path, "security.other") == errno.ENODATA
    os.setxattr(path, "security.selinux", b"system_u:object_r:tmp_t:s0\0")
    assert os.getxattr(path, "security.selinux") == b"system_u:object_r:tmp_t:s0\0"
    assert "security.selinux" in os.listxattr(path)
    os.removexattr(path, "security.selinux")
    assert errno_of(os.getxattr, path, "security.selinux") == want
