"""Directories, names and directory listing.

Covers: mkdir/rmdir/unlink errors, directory nlink and st_size accounting (tmpfs
counts 20 bytes per entry), '.' and '..' (as entries with the right inode
numbers, and as operands: EEXIST/EINVAL/ENOTEMPTY/EISDIR/EBUSY), removed
directories still open or used as cwd, file names (any byte but '/' and NUL,
non-UTF-8, 255 bytes fine, 256 bytes ENAMETOOLONG for every operation), d_type
in readdir, large listings, deleting while listing (rm -rf pattern) and
telldir/seekdir stability (also across deletions of other entries).
Concurrent listing while another process changes the directory is in
test_concurrency.py.
"""
import errno
import os
import stat

from .helpers import (DT_DIR, DT_LNK, DT_REG, Dir, assert_errno, errno_of, in_child, read_file,
                      readdir_all, write_file)

BOGO_DIRENT_SIZE = 20  # tmpfs: a directory's st_size grows by 20 per entry


def test_mkdir_rmdir_nlink(fs_dir):
    d = os.path.join(fs_dir, "d")
    os.mkdir(d, 0o750)
    st = os.stat(d)
    assert stat.S_ISDIR(st.st_mode) and st.st_nlink == 2
    base = os.stat(fs_dir).st_nlink
    assert base == 3
    for i in range(3):
        os.mkdir(os.path.join(d, f"sub{i}"))
    write_file(os.path.join(d, "file"))  # files do not count
    assert os.stat(d).st_nlink == 5
    os.rmdir(os.path.join(d, "sub0"))
    assert os.stat(d).st_nlink == 4


def test_directory_errors(fs_dir):
    d, f = os.path.join(fs_dir, "d"), os.path.join(fs_dir, "f")
    os.mkdir(d)
    write_file(os.path.join(d, "inside"))
    write_file(f)
    assert_errno(errno.EEXIST, os.mkdir, d)
    assert_errno(errno.EEXIST, os.mkdir, f)
    assert_errno(errno.ENOTEMPTY, os.rmdir, d)
    assert_errno(errno.ENOTDIR, os.rmdir, f)
    assert_errno(errno.EISDIR, os.unlink, d)
    assert_errno(errno.ENOTDIR, os.mkdir, os.path.join(f, "sub"))
    assert_errno(errno.ENOENT, os.mkdir, os.path.join(fs_dir, "missing", "sub"))
    assert_errno(errno.ENOENT, os.rmdir, os.path.join(fs_dir, "missing"))
    assert_errno(errno.ENOENT, os.unlink, os.path.join(fs_dir, "missing"))


def test_directory_size_counts_entries(fs_dir):
    d = os.path.join(fs_dir, "d")
    os.mkdir(d)
    sizes = [os.stat(d).st_size]
    write_file(os.path.join(d, "a"))
    sizes.append(os.stat(d).st_size)
    os.mkdir(os.path.join(d, "b"))
    os.symlink("x", os.path.join(d, "c"))
    sizes.append(os.stat(d).st_size)
    os.unlink(os.path.join(d, "a"))
    sizes.append(os.stat(d).st_size)
    b = BOGO_DIRENT_SIZE
    assert sizes == [2 * b, 3 * b, 5 * b, 4 * b]
    assert os.stat(d).st_blocks == 0


def test_dot_and_dotdot_entries(fs_dir):
    d = os.path.join(fs_dir, "d")
    os.mkdir(d)
    entries = {name: (dtype, ino) for name, dtype, ino in readdir_all(d)}
    assert set(entries) == {b".", b".."}
    assert entries[b"."] == (DT_DIR, os.stat(d).st_ino)
    assert entries[b".."] == (DT_DIR, os.stat(fs_dir).st_ino)
    assert os.stat(os.path.join(d, "..")).st_ino == os.stat(fs_dir).st_ino
    assert os.stat(os.path.join(d, ".")).st_ino == os.stat(d).st_ino


def test_dot_and_dotdot_as_operands(fs_dir):
    d = os.path.join(fs_dir, "d")
    os.mkdir(d)
    os.mkdir(os.path.join(d, "sub"))
    write_file(os.path.join(d, "f"))
    j = os.path.join
    assert_errno(errno.EEXIST, os.mkdir, j(d, "."))
    assert_errno(errno.EEXIST, os.mkdir, j(d, ".."))
    assert_errno(errno.EINVAL, os.rmdir, j(d, "sub", "."))
    assert_errno(errno.ENOTEMPTY, os.rmdir, j(d, "sub", ".."))
    assert_errno(errno.EISDIR, os.unlink, j(d, "."))
    assert_errno(errno.EISDIR, os.unlink, j(d, ".."))
    assert_errno(errno.EBUSY, os.rename, j(d, "sub", "."), j(d, "x"))
    assert_errno(errno.EBUSY, os.rename, j(d, "sub"), j(d, "."))
    assert_errno(errno.EBUSY, os.rename, j(d, "sub", ".."), j(d, "y"))
    assert_errno(errno.EEXIST, os.link, j(d, "f"), j(d, "."))
    os.mkdir(j(d, "sub", "..", "via-dotdot"))
    assert os.path.isdir(j(d, "via-dotdot"))
    os.mkdir(j(d, "trailing") + "/")
    os.rmdir(j(d, "trailing") + "//")
    assert sorted(os.listdir(d)) == ["f", "sub", "via-dotdot"]


def test_removed_directory_still_open(fs_dir):
    d = os.path.join(fs_dir, "gone")
    os.mkdir(d)
    fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.rmdir(d)
        assert os.fstat(fd).st_nlink == 0
        assert os.listdir(fd) == []
        assert_errno(errno.ENOENT, os.open, "x", os.O_CREAT | os.O_WRONLY, 0o644, dir_fd=fd)
        assert_errno(errno.ENOENT, os.mkdir, "x", dir_fd=fd)
    finally:
        os.close(fd)
    assert os.listdir(fs_dir) == []


def test_removed_cwd(fs_dir):
    d = os.path.join(fs_dir, "cwd")
    os.mkdir(d)

    def inside():
        os.chdir(d)
        os.rmdir(d)
        return (os.listdir("."), errno_of(os.open, "new", os.O_CREAT | os.O_WRONLY, 0o644),
                os.stat(".").st_nlink)

    assert in_child(inside) == ([], errno.ENOENT, 0)


def test_any_byte_but_slash_and_nul_in_names(fs_dir):
    base = os.fsencode(fs_dir)
    names = {b"n" + bytes([i]) for i in range(1, 256) if i != ord("/")}
    names |= {bytes(i for i in range(1, 256) if i != ord("/")),  # 254 bytes
              b"\xff\xfe\xfd", b"\x80", b"caf\xe9", b" leading space", b"-", b"...", b"\n"}
    for name in names:
        write_file(base + b"/" + name, name)
    assert set(os.listdir(base)) == names
    assert {n for n, _, _ in readdir_all(base)} == names | {b".", b".."}
    for name in names:
        assert read_file(base + b"/" + name) == name
    assert_errno(errno.ENOENT, os.stat, base + b"/\xff\xfe")  # prefix is a different name
    os.rename(base + b"/\xff\xfe\xfd", base + b"/\xc3(")
    assert b"\xc3(" in os.listdir(base) and b"\xff\xfe\xfd" not in os.listdir(base)


def test_name_length_limit(fs_dir):
    j = os.path.join
    ok, bad = "a" * 255, "b" * 256
    utf8_ok = "\u00e9" * 127 + "x"  # 255 bytes of UTF-8
    for name in (ok, utf8_ok):
        write_file(j(fs_dir, name), b"x")
        assert name in os.listdir(fs_dir)
        assert read_file(j(fs_dir, name)) == b"x"
    os.mkdir(j(fs_dir, "c" * 255))
    os.symlink("t", j(fs_dir, "d" * 255))
    assert os.statvfs(fs_dir).f_namemax == 255
    src = j(fs_dir, "src")
    write_file(src)
    for op, args in [
        (os.stat, (j(fs_dir, bad),)),
        (os.open, (j(fs_dir, bad), os.O_CREAT | os.O_WRONLY, 0o644)),
        (os.mkdir, (j(fs_dir, bad),)),
        (os.symlink, ("t", j(fs_dir, bad))),
        (os.mknod, (j(fs_dir, bad),)),
        (os.link, (src, j(fs_dir, bad))),
        (os.rename, (src, j(fs_dir, bad))),
        (os.unlink, (j(fs_dir, bad),)),
        (os.rmdir, (j(fs_dir, bad),)),
        (os.stat, (j(fs_dir, "\u00e9" * 128),)),
    ]:
        assert_errno(errno.ENAMETOOLONG, op, *args)
    assert sorted(os.listdir(fs_dir)) == sorted([ok, utf8_ok, "c" * 255, "d" * 255, "src"])


def test_readdir_d_type_and_inodes(fs_dir):
    j = os.path.join
    write_file(j(fs_dir, "reg"))
    os.mkdir(j(fs_dir, "dir"))
    os.symlink("reg", j(fs_dir, "lnk"))
    entries = {n: (t, ino) for n, t, ino in readdir_all(fs_dir)}
    for name, dtype in [(b"reg", DT_REG), (b"dir", DT_DIR), (b"lnk", DT_LNK)]:
        assert entries[name] == (dtype, os.lstat(j(fs_dir, name.decode())).st_ino), name
    for entry in os.scandir(fs_dir):
        assert entry.inode() == os.lstat(entry.path).st_ino


def test_large_listing_each_entry_once(fs_dir):
    names = {f"entry-{i:05d}-{'x' * (i % 200)}" for i in range(5000)}
    for name in names:
        os.mknod(os.path.join(fs_dir, name))
    listed = os.listdir(fs_dir)
    assert len(listed) == len(names) and set(listed) == names
    inodes = [e.inode() for e in os.scandir(fs_dir)]
    assert len(set(inodes)) == len(inodes)


def test_unlink_while_listing_sees_every_entry_once(fs_dir):
    """The rm -rf pattern: read an entry, delete it, read on."""
    names = {f"f{i:04d}".encode() for i in range(2000)}
    for name in names:
        os.mknod(os.fsencode(fs_dir) + b"/" + name)
    seen = []
    with Dir(fs_dir) as d:
        while (ent := d.read()) is not None:
            if ent[0] in (b".", b".."):
                continue
            seen.append(ent[0])
            os.unlink(os.fsencode(fs_dir) + b"/" + ent[0])
    assert len(seen) == len(set(seen)), "an entry was returned twice"
    assert set(seen) == names
    assert os.listdir(fs_dir) == []


def test_telldir_seekdir(fs_dir):
    for i in range(600):
        os.mknod(os.path.join(fs_dir, f"e{i:04d}"))
    with Dir(fs_dir) as d:
        positions = []
        while True:
            pos = d.tell()
            ent = d.read()
            if ent is None:
                break
            positions.append((pos, ent[0]))
        assert len(positions) == 602
        for pos, name in positions[::37] + positions[-1:] + positions[:1]:
            d.seek(pos)
            assert d.read()[0] == name
        mid = positions[300][0]
        d.seek(mid)
        rest = [e[0] for e in d.read_all()]
        assert rest == [n for _, n in positions[300:]]
        d.rewind()
        assert [e[0] for e in d.read_all()] == [n for _, n in positions]


def test_seekdir_stable_across_deletions(fs_dir, fs_kind):
    base = os.fsencode(fs_dir)
    for i in range(400):
        os.mknod(base + b"/g%04d" % i)
    with Dir(fs_dir) as d:
        positions = []
        while True:
            pos = d.tell()
            ent = d.read()
            if ent is None:
                break
            if ent[0].startswith(b"g"):
                positions.append((pos, ent[0]))
        for i, (_, name) in enumerate(positions):
            if i % 2:
                os.unlink(base + b"/" + name)
        kept = [(p, n) for i, (p, n) in enumerate(positions) if i % 2 == 0]
        for pos, name in kept:
            d.seek(pos)
            assert d.read()[0] == name
        d.seek(kept[len(kept) // 2][0])
        rest = [e[0] for e in d.read_all()]
        if fs_kind == "memfs":
            # docs/SEMANTICS.md: a stream opened before the deletions may
            # still return the deleted names; every kept one, once, in order.
            deleted = {n for i, (_, n) in enumerate(positions) if i % 2}
            rest = [n for n in rest if n not in deleted]
        assert rest == [n for _, n in kept[len(kept) // 2:]]


def _list_and_act(d, n, act):
    """Read d with os.scandir (getdents in batches, as ls and renamers do),
    calling act(name) for each entry as it is read; the names read, or a
    failure once the listing has run past 3x the entries it started with."""
    seen = []
    with os.scandir(d) as it:
        for e in it:
            seen.append(e.name)
            assert len(seen) <= 3 * n, f"listing did not end: {len(seen)} entries read from {n}"
            act(e.name)
    return seen


def _renamer_runs(d, n=5000):
    names = [f"f{i:05d}" for i in range(n)]
    for name in names:
        write_file(os.path.join(d, name))

    def to_new_name(name):  # rename each entry read to a new name in the same directory
        os.rename(os.path.join(d, name), os.path.join(d, "r" + name))

    seen = _list_and_act(d, n, to_new_name)
    assert sorted(seen) == names
    assert sorted(os.listdir(d)) == ["r" + x for x in names]

    def there_and_back(name):  # to a temporary name and back
        tmp = os.path.join(d, name + ".tmp")
        os.rename(os.path.join(d, name), tmp)
        os.rename(tmp, os.path.join(d, name))

    seen = _list_and_act(d, n, there_and_back)
    assert sorted(seen) == ["r" + x for x in names]

    def create_sibling(name):  # an entry created during the listing
        write_file(os.path.join(d, "c" + name))

    seen = _list_and_act(d, n, create_sibling)
    assert len(seen) == len(set(seen)) and len(seen) <= 2 * n
    assert set(seen) >= {"r" + x for x in names}


def test_listing_ends_while_its_entries_are_renamed(fs_dir):
    """A bulk renamer (reads a directory, renames each entry it reads) ends,
    and sees each original entry exactly once, as on tmpfs."""
    _renamer_runs(fs_dir)


def test_listing_ends_while_renamed_btree_index(fs_kind, make_mount):
    opts = "size=256M" + (",dirindex=btree" if fs_kind == "memfs" else "")
    _renamer_runs(make_mount(opts))


def test_saved_position_valid_after_renames(fs_dir):
    """telldir/seekdir: a position taken before renames of other entries
    still resumes at the entry after it; no entry comes back twice."""
    base = os.fsencode(fs_dir)
    for i in range(50):
        os.mknod(base + b"/f%02d" % i)
    with Dir(fs_dir) as d:
        order = [e[0] for e in d.read_n(2 + 20)][2:]  # past "." and ".."
        mark = d.tell()
        rest = [e[0] for e in d.read_all()]
        assert len(order) + len(rest) == 50
        for name in order[:10] + rest[10:20]:  # rename some before and after the mark
            os.rename(base + b"/" + name, base + b"/x" + name)
        d.seek(mark)
        again = [e[0] for e in d.read_all()]
    assert len(again) == len(set(again))
    kept = rest[:10] + rest[20:]
    assert [n for n in again if n in set(kept)] == kept
    assert not set(order) & set(again)
