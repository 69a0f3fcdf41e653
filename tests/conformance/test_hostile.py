"""Hostile inputs: the file system must give the right errors, not die.

After each test the mount must still work (a file can be created, written,
read back, listed and deleted). Covers: truncating to 10^15 bytes and doing
I/O out there, hundreds of random non-UTF-8 names, over-long names (256 bytes,
around the 1024-byte FUSE limit, beyond PATH_MAX), a 1,000-level deep
directory chain walked with openat (its full path is longer than PATH_MAX),
symlink chains (40 hops resolve, 41 are ELOOP), a million entries in one
directory (created, listed once each, looked up, partly removed), and renames
racing from several processes (RENAME_NOREPLACE and RENAME_EXCHANGE of files
and directories between two directories) leaving a consistent tree.
"""
import errno
import os
import random

import pytest

from .helpers import (RENAME_EXCHANGE, RENAME_NOREPLACE, assert_errno, assert_usable, parallel,
                      read_file, readdir_all, renameat2, write_file)


def test_truncate_to_a_petabyte(fs_root, fs_dir):
    path = os.path.join(fs_dir, "huge")
    write_file(path, b"start")
    os.truncate(path, 10**15)
    fd = os.open(path, os.O_RDWR)
    try:
        assert os.pwrite(fd, b"end", 10**15 - 3) == 3
        assert os.pread(fd, 10, 10**15 - 10) == b"\0" * 7 + b"end"
        assert os.pread(fd, 5, 0) == b"start"
        st = os.fstat(fd)
        assert (st.st_size, st.st_blocks) == (10**15, 16)
        os.ftruncate(fd, 10**15 + 4096)
        os.ftruncate(fd, 10)
        assert os.pread(fd, 100, 0) == b"start\0\0\0\0\0"
    finally:
        os.close(fd)
    assert_usable(fs_root)


def _random_name(rng):
    allowed = [b for b in range(1, 256) if b != ord("/")]
    while True:
        name = bytes(rng.choice(allowed) for _ in range(rng.randint(1, 255)))
        if name not in (b".", b".."):
            return name


def test_random_non_utf8_names(fs_root, fs_dir):
    rng = random.Random(1234)
    base = os.fsencode(fs_dir)
    names = {_random_name(rng) for _ in range(400)}
    assert any(not _is_utf8(n) for n in names)
    for name in names:
        write_file(base + b"/" + name, name[:16])
    assert set(os.listdir(base)) == names
    renamed = {}
    for i, name in enumerate(sorted(names)[:100]):
        assert read_file(base + b"/" + name) == name[:16]
        renamed[name] = b"\xff%03d" % i + name[::-1][:200]
        os.rename(base + b"/" + name, base + b"/" + renamed[name])
    assert set(os.listdir(base)) == (names - set(renamed)) | set(renamed.values())
    for old, new in renamed.items():
        assert read_file(base + b"/" + new) == old[:16]
    for name in os.listdir(base):
        os.unlink(base + b"/" + name)
    assert os.listdir(base) == []
    assert_usable(fs_root)


def _is_utf8(b):
    try:
        b.decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False


@pytest.mark.parametrize("length", [256, 1023, 1024, 1025, 4095, 5000])
def test_overlong_names(fs_root, fs_dir, length):
    name = os.path.join(fs_dir, "n" * length)
    expected = errno.ENAMETOOLONG
    assert_errno(expected, os.open, name, os.O_CREAT | os.O_WRONLY, 0o644)
    assert_errno(expected, os.mkdir, name)
    assert_errno(expected, os.stat, name)
    assert_errno(errno.ERANGE, os.setxattr, fs_dir, "user." + "x" * length, b"v")
    assert os.listdir(fs_dir) == []
    assert_usable(fs_root)


def test_deep_directory_chain(fs_root, fs_dir):
    depth, name = 1000, "level"
    fds = [os.open(fs_dir, os.O_RDONLY | os.O_DIRECTORY)]
    try:
        for _ in range(depth):
            os.mkdir(name, dir_fd=fds[-1])
            fds.append(os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fds[-1]))
        bottom = fds[-1]
        fd = os.open("leaf", os.O_CREAT | os.O_RDWR, 0o644, dir_fd=bottom)
        os.write(fd, b"at the bottom")
        os.close(fd)
        assert os.stat("leaf", dir_fd=bottom).st_size == 13
        assert len(fs_dir) + depth * (len(name) + 1) > 4096  # beyond PATH_MAX
        assert_errno(errno.ENAMETOOLONG, os.stat, fs_dir + ("/" + name) * depth + "/leaf")
        walk = os.open(fs_dir, os.O_RDONLY | os.O_DIRECTORY)  # walk down again by name
        for _ in range(depth):
            nxt = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=walk)
            os.close(walk)
            walk = nxt
        assert os.fstat(walk).st_ino == os.fstat(bottom).st_ino
        assert {n for n, _, _ in readdir_all(f"/proc/self/fd/{walk}")} == {b".", b"..", b"leaf"}
        os.close(walk)
        assert [os.fstat(f).st_nlink for f in fds[1:4]] == [3, 3, 3]
        os.unlink("leaf", dir_fd=bottom)
        for parent in reversed(fds[:-1]):
            os.rmdir(name, dir_fd=parent)
    finally:
        for f in fds:
            os.close(f)
    assert os.listdir(fs_dir) == []
    assert_usable(fs_root)


def test_symlink_chain_limit(fs_root, fs_dir):
    j = os.path.join
    write_file(j(fs_dir, "l0"), b"end of chain")
    for i in range(1, 42):
        os.symlink(f"l{i - 1}", j(fs_dir, f"l{i}"))
    assert read_file(j(fs_dir, "l40")) == b"end of chain"
    assert_errno(errno.ELOOP, os.open, j(fs_dir, "l41"), os.O_RDONLY)
    assert os.readlink(j(fs_dir, "l41")) == "l40"
    assert_usable(fs_root)


MILLION = 1_000_000


@pytest.mark.timeout(900)
def test_a_million_entries_in_one_directory(make_mount):
    root = make_mount("size=1G,nr_inodes=2000000")
    dfd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for i in range(MILLION):
            os.mknod(f"f{i:07d}", dir_fd=dfd)
        assert os.statvfs(root).f_ffree == 2_000_000 - 1 - MILLION
        listed = os.listdir(root)
        assert len(listed) == MILLION
        expected = {f"f{i:07d}" for i in range(MILLION)}
        assert set(listed) == expected
        del listed
        rng = random.Random(99)
        sample = rng.sample(range(MILLION), 1000)
        for i in sample:
            assert os.stat(f"f{i:07d}", dir_fd=dfd, follow_symlinks=False).st_size == 0
        assert_errno(errno.EEXIST, os.mknod, f"f{sample[0]:07d}", dir_fd=dfd)
        for i in sample:
            os.unlink(f"f{i:07d}", dir_fd=dfd)
        assert_errno(errno.ENOENT, os.stat, f"f{sample[0]:07d}", dir_fd=dfd)
        count = sum(1 for _ in os.scandir(root))
        assert count == MILLION - 1000
    finally:
        os.close(dfd)
    assert_usable(root)


# ----------------------------------------------------------- racing renames

FILES, DIRS, SLOTS = 24, 6, 40


def _slot(top, side, i):
    return os.path.join(top, "AB"[side], f"s{i:02d}")


def _rename_worker(top, seed, iterations):
    rng = random.Random(seed)
    done = 0
    for _ in range(iterations):
        src = _slot(top, rng.randrange(2), rng.randrange(SLOTS))
        dst = _slot(top, rng.randrange(2), rng.randrange(SLOTS))
        flags = RENAME_NOREPLACE if rng.random() < 0.5 else RENAME_EXCHANGE
        try:
            renameat2(src, dst, flags)
            done += 1
        except OSError as e:
            if e.errno not in (errno.ENOENT, errno.EEXIST):
                raise
    return done


def _identity(path):
    if os.path.isdir(path):
        return read_file(os.path.join(path, "id")).decode()
    return read_file(path).decode()


def test_racing_renames_keep_tree_consistent(fs_root, fs_dir):
    for side in "AB":
        os.mkdir(os.path.join(fs_dir, side))
    items = []
    for i in range(FILES + DIRS):
        path = _slot(fs_dir, i % 2, i)
        if i < FILES:
            write_file(path, f"file-{i}".encode())
        else:
            os.mkdir(path)
            write_file(os.path.join(path, "id"), f"dir-{i}".encode())
        items.append(_identity(path))
    done = parallel(_rename_worker, [(fs_dir, seed, 2000) for seed in range(4)])
    assert all(n > 0 for n in done)
    seen, inodes, subdirs = [], set(), {"A": 0, "B": 0}
    for side in "AB":
        parent = os.path.join(fs_dir, side)
        for name in os.listdir(parent):
            path = os.path.join(parent, name)
            st = os.lstat(path)
            inodes.add(st.st_ino)
            seen.append(_identity(path))
            if os.path.isdir(path):
                subdirs[side] += 1
                assert st.st_nlink == 2
                assert os.stat(os.path.join(path, "..")).st_ino == os.stat(parent).st_ino
            else:
                assert st.st_nlink == 1
    assert sorted(seen) == sorted(items), "an item was lost or duplicated"
    assert len(inodes) == len(items)
    for side in "AB":
        assert os.stat(os.path.join(fs_dir, side)).st_nlink == 2 + subdirs[side]
    assert_usable(fs_root)
