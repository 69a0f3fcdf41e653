"""cache=all|metadata|none and the user.memfs.cache attribute (core/cache.rs).

memfs only. Whether the kernel's page cache holds a file's data is seen
from memfs's side: stats/io's read_bytes counts the bytes READ requests
returned, so reading a file twice under `metadata` must reach memfs twice,
while under `all` the second read is served by the kernel.
"""
import errno
import mmap
import os

import pytest

from .helpers import MIB, io_stats, memfs, require_root_and_memfs

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(autouse=True)
def _root_and_binary():
    require_root_and_memfs()


def reads_reaching_memfs(mnt, path, size):
    """Bytes memfs served while `path` (of `size` bytes) was read twice."""
    before = io_stats(mnt)["read_bytes"]
    for _ in range(2):
        with open(path, "rb") as f:
            assert len(f.read()) == size
    return io_stats(mnt)["read_bytes"] - before


def make(path, size):
    data = os.urandom(size)
    with open(path, "wb") as f:
        f.write(data)
    return data


@pytest.mark.parametrize("policy", ["metadata", "none"])
def test_uncached_policies_keep_data_out_of_the_kernel_page_cache(policy):
    with memfs(f"size=64M,cache={policy}") as mnt:
        path = os.path.join(mnt, "f")
        make(path, 4 * MIB)
        assert reads_reaching_memfs(mnt, path, 4 * MIB) >= 8 * MIB


def test_cache_all_serves_the_second_read_from_the_kernel():
    with memfs("size=64M,cache=all") as mnt:
        path = os.path.join(mnt, "f")
        make(path, 4 * MIB)
        with open(path, "rb") as f:
            f.read()  # fill the page cache
        assert reads_reaching_memfs(mnt, path, 4 * MIB) < MIB


def test_the_attribute_sets_a_tree_and_is_inherited():
    with memfs("size=64M,cache=all") as mnt:
        tree = os.path.join(mnt, "build")
        os.mkdir(tree)
        os.setxattr(tree, "user.memfs.cache", b"metadata")
        os.mkdir(os.path.join(tree, "sub"))
        inside = os.path.join(tree, "sub", "obj.o")
        outside = os.path.join(mnt, "src.c")
        make(inside, 2 * MIB)
        make(outside, 2 * MIB)
        assert os.getxattr(os.path.join(tree, "sub"), "user.memfs.cache") == b"metadata"
        assert os.getxattr(inside, "user.memfs.cache") == b"metadata"
        assert reads_reaching_memfs(mnt, inside, 2 * MIB) >= 4 * MIB
        with open(outside, "rb") as f:
            f.read()
        assert reads_reaching_memfs(mnt, outside, 2 * MIB) < MIB
        # A file's own attribute wins over the mount's cache=.
        os.setxattr(outside, "user.memfs.cache", b"none")
        assert reads_reaching_memfs(mnt, outside, 2 * MIB) >= 4 * MIB
        with pytest.raises(OSError) as e:
            os.setxattr(tree, "user.memfs.cache", b"sometimes")
        assert e.value.errno == errno.EINVAL
        assert os.getxattr(tree, "user.memfs.cache") == b"metadata"


def test_shared_mmap_works_without_the_page_cache():
    with memfs("size=64M,cache=metadata") as mnt:
        path = os.path.join(mnt, "db")
        make(path, 64 * 1024)
        fd = os.open(path, os.O_RDWR)
        try:
            with mmap.mmap(fd, 64 * 1024, mmap.MAP_SHARED) as m:
                m[100:105] = b"hello"
                m.flush()
        finally:
            os.close(fd)
        with open(path, "rb") as f:
            f.seek(100)
            assert f.read(5) == b"hello"


def test_without_a_cache_option_the_attribute_is_kept_but_opens_stay_unanswered():
    """The default mount answers OPEN with ENOSYS (no round trip per open):
    the attribute is stored and inherited, and the kernel caches as always."""
    with memfs("size=64M") as mnt:
        d = os.path.join(mnt, "d")
        os.mkdir(d)
        os.setxattr(d, "user.memfs.cache", b"metadata")
        path = os.path.join(d, "f")
        make(path, MIB)
        assert os.getxattr(path, "user.memfs.cache") == b"metadata"
        with open(path, "rb") as f:
            f.read()
        assert reads_reaching_memfs(mnt, path, MIB) < MIB


def tmpfile_reads_reaching_memfs(mnt, directory, size):
    """Bytes memfs served while an O_TMPFILE file made in `directory`,
    written with `size` bytes through its own descriptor, was read twice."""
    fd = os.open(directory, os.O_TMPFILE | os.O_RDWR, 0o600)
    try:
        data = os.urandom(size)
        assert os.write(fd, data) == size
        before = io_stats(mnt)["read_bytes"]
        for _ in range(2):
            assert os.pread(fd, size, 0) == data
        return io_stats(mnt)["read_bytes"] - before
    finally:
        os.close(fd)


def test_an_o_tmpfile_file_follows_its_directorys_policy():
    """An O_TMPFILE file is opened by the TMPFILE reply itself (no OPEN):
    under a directory whose user.memfs.cache is metadata it is opened with
    direct I/O, so its reads reach memfs; elsewhere on a cache=all mount
    the kernel's page cache serves them. Before, every O_TMPFILE open was
    cached whatever the policy."""
    with memfs("size=64M,cache=all") as mnt:
        tree = os.path.join(mnt, "build")
        os.mkdir(tree)
        os.setxattr(tree, "user.memfs.cache", b"metadata")
        assert tmpfile_reads_reaching_memfs(mnt, tree, 2 * MIB) >= 4 * MIB
        assert tmpfile_reads_reaching_memfs(mnt, mnt, 2 * MIB) < MIB
    with memfs("size=64M,cache=none") as mnt:
        assert tmpfile_reads_reaching_memfs(mnt, mnt, 2 * MIB) >= 4 * MIB
