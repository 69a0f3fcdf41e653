"""Idmapped mounts (issue 11, item 5), on memfs and kernel tmpfs alike.

A directory of the file system is mounted again idmapped (idmap.py), with
ids 0-999 of the file system shown as 10000-10999. Covers: ownership shown
through the mapping; what a mapped caller creates (file by open(O_CREAT),
mkdir, symlink, FIFO) is owned by the unmapped id underneath; permission
checks through the mapping (the owner writes a 0600 file, another id may
not); chown through the mapping; a caller outside the mapping cannot
create (EOVERFLOW), as the kernel refuses an owner it cannot map.
"""
import errno
import os

import pytest

from mounts import run_as

from .helpers import write_file
from .idmap import idmapped

INSIDE, OUTSIDE, COUNT = 0, 10000, 1000


def owner(path):
    st = os.lstat(path)
    return st.st_uid, st.st_gid


def test_idmapped_mount_maps_ownership_creation_and_permissions(fs_dir):
    d = os.path.join(fs_dir, "shared")
    os.mkdir(d, 0o777)
    os.chmod(d, 0o1777)
    write_file(os.path.join(d, "mine"), b"five's")
    os.chown(os.path.join(d, "mine"), 5, 5)
    os.chmod(os.path.join(d, "mine"), 0o600)
    with idmapped(d, INSIDE, OUTSIDE, COUNT) as m:
        assert owner(os.path.join(m, "mine")) == (10005, 10005)

        # The owner, through the mapping, may write its 0600 file; another id may not.
        run_as(10005, 10005, write_file, os.path.join(m, "mine"), b"written through the map")
        with pytest.raises(PermissionError):
            run_as(10006, 10006, write_file, os.path.join(m, "mine"), b"no")
        with open(os.path.join(d, "mine"), "rb") as f:
            assert f.read() == b"written through the map"

        # What a mapped caller creates belongs to the unmapped id underneath.
        def create_all():
            fd = os.open(os.path.join(m, "file"), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            os.close(fd)
            os.mkdir(os.path.join(m, "dir"))
            os.symlink("file", os.path.join(m, "link"))
            os.mkfifo(os.path.join(m, "fifo"))
        run_as(10007, 10007, create_all)
        for name in ["file", "dir", "link", "fifo"]:
            assert owner(os.path.join(d, name)) == (7, 7), name
            assert owner(os.path.join(m, name)) == (10007, 10007), name

        # chown through the mapping.
        os.chown(os.path.join(m, "file"), 10008, 10008)
        assert owner(os.path.join(d, "file")) == (8, 8)

        # A caller whose id the mapping cannot carry cannot own anything here.
        with pytest.raises(OSError) as e:
            write_file(os.path.join(m, "by-root"))
        assert e.value.errno == errno.EOVERFLOW
        assert not os.path.exists(os.path.join(d, "by-root"))
