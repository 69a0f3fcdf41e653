"""Idmapped mounts (issue 11, item 5): a directory of the file system
mounted again through a user namespace's id map (`mount_setattr` with
MOUNT_ATTR_IDMAP), as rootless containers and systemd-homed use them.

Covers, on memfs and kernel tmpfs alike, with the map 0 -> 10000 for 2000
ids: owners seen through the mapping (stat, ls -n); files, directories,
symlinks and fifos made through it by mapped users, stored under the
unmapped ids; a caller outside the map cannot create (EOVERFLOW); access
checks through the mapping (the mapped owner may, the unmapped id may
not); chown through it maps both ways and refuses ids outside the map;
POSIX ACL entries map too; writes by a mapped user clear set-id bits, a
root write keeps them; trusted xattrs are listed for root only.
"""
import errno
import os
import stat
import subprocess

import pytest

from idmap import idmapped
from mounts import run_as

from .helpers import errno_of, read_file, write_file

BASE, COUNT = 10000, 2000


@pytest.fixture
def view(fs_dir):
    """(fs_dir, the same directory seen through the idmapped mount)."""
    os.chmod(fs_dir, 0o777)
    with idmapped(fs_dir, BASE, COUNT) as mapped:
        yield fs_dir, mapped


def owner(path):
    st = os.lstat(path)
    return st.st_uid, st.st_gid


def test_owners_are_seen_through_the_map(view):
    plain, mapped = view
    write_file(os.path.join(plain, "a"))
    write_file(os.path.join(plain, "b"))
    os.chown(os.path.join(plain, "b"), 1000, 1001)
    write_file(os.path.join(plain, "far"))
    os.chown(os.path.join(plain, "far"), 5000, 5000)  # outside the map
    assert owner(os.path.join(mapped, "a")) == (BASE, BASE)
    assert owner(os.path.join(mapped, "b")) == (BASE + 1000, BASE + 1001)
    assert owner(os.path.join(mapped, "far")) == (65534, 65534)  # the overflow ids
    assert owner(os.path.join(plain, "b")) == (1000, 1001)


def test_what_a_mapped_user_creates_is_stored_unmapped(view):
    plain, mapped = view

    def create(uid):
        d = os.path.join(mapped, f"u{uid}")
        os.mkdir(d)
        write_file(os.path.join(d, "f"), b"x")
        os.symlink("f", os.path.join(d, "l"))
        os.mkfifo(os.path.join(d, "p"))
        return sorted(os.listdir(d))

    for uid in (BASE, BASE + 1000):
        assert run_as(uid, uid, create, uid) == ["f", "l", "p"]
        want = uid - BASE
        for name in ("", "f", "l", "p"):
            assert owner(os.path.join(plain, f"u{uid}", name)) == (want, want), (uid, name)
            assert owner(os.path.join(mapped, f"u{uid}", name)) == (uid, uid), (uid, name)


def test_a_caller_outside_the_map_cannot_create(view):
    _, mapped = view
    outside = BASE + COUNT + 5
    assert run_as(outside, outside, errno_of, write_file, os.path.join(mapped, "nope")) == errno.EOVERFLOW
    assert run_as(outside, outside, errno_of, os.mkdir, os.path.join(mapped, "nope")) == errno.EOVERFLOW
    assert not os.path.exists(os.path.join(mapped, "nope"))


def test_access_is_checked_through_the_map(view):
    plain, mapped = view
    path = os.path.join(plain, "private")
    write_file(path, b"secret", mode=0o600)
    os.chown(path, 1000, 1000)
    through = os.path.join(mapped, "private")
    assert run_as(BASE + 1000, BASE + 1000, read_file, through) == b"secret"
    assert run_as(1000, 1000, errno_of, read_file, through) == errno.EACCES
    assert run_as(1000, 1000, read_file, path) == b"secret"
    # The mapped owner may chmod; the unmapped one, through the map, may not.
    assert run_as(BASE + 1000, BASE + 1000, errno_of, os.chmod, through, 0o640) == 0
    assert run_as(1000, 1000, errno_of, os.chmod, through, 0o600) == errno.EPERM
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o640


def test_chown_through_the_map(view):
    plain, mapped = view
    write_file(os.path.join(plain, "c"))
    os.chown(os.path.join(mapped, "c"), BASE + 5, BASE + 6)
    assert owner(os.path.join(plain, "c")) == (5, 6)
    assert errno_of(os.chown, os.path.join(mapped, "c"), 7, 7) == errno.EOVERFLOW
    assert owner(os.path.join(plain, "c")) == (5, 6)


def test_acl_entries_are_mapped(view):
    plain, mapped = view
    write_file(os.path.join(plain, "acl"))
    subprocess.run(["setfacl", "-m", f"u:{BASE + 7}:r,g:{BASE + 8}:w", os.path.join(mapped, "acl")], check=True)
    got = subprocess.run(["getfacl", "-n", "--omit-header", os.path.join(plain, "acl")],
                         check=True, capture_output=True, text=True).stdout.split()
    assert "user:7:r--" in got and "group:8:-w-" in got, got
    through = subprocess.run(["getfacl", "-n", "--omit-header", os.path.join(mapped, "acl")],
                             check=True, capture_output=True, text=True).stdout.split()
    assert f"user:{BASE + 7}:r--" in through, through


def test_writes_clear_set_id_bits_as_without_a_map(view):
    plain, mapped = view
    path = os.path.join(plain, "suid")
    write_file(path, b"0", mode=0o6777)
    os.chmod(path, 0o6777)
    os.chown(path, 1000, 1000)
    os.chmod(path, 0o6777)  # chown cleared them

    def append(p):
        with open(p, "ab") as f:
            f.write(b"1")

    append(os.path.join(mapped, "suid"))  # root: CAP_FSETID keeps them
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o6777
    run_as(BASE + 1000, BASE + 1000, append, os.path.join(mapped, "suid"))
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o777
    assert read_file(path) == b"011"


def test_trusted_xattrs_are_listed_for_root_only(view):
    plain, mapped = view
    path = os.path.join(plain, "x")
    write_file(path, mode=0o644)
    os.setxattr(path, "trusted.t", b"1")
    os.setxattr(path, "user.u", b"2")
    through = os.path.join(mapped, "x")
    assert sorted(os.listxattr(through)) == ["trusted.t", "user.u"]
    assert run_as(BASE, BASE, os.listxattr, through) == ["user.u"]
    assert run_as(BASE + 1000, BASE + 1000, os.listxattr, through) == ["user.u"]
