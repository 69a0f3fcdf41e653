"""File types and open(2) semantics.

Covers: regular files (create, stat fields, read/write/pread/pwrite, gaps),
symlinks (readlink, lstat vs stat, dangling, loops, target length limits),
hard links (nlink on every name, same inode, EPERM for directories), FIFOs,
unix sockets bound in the file system, char/block device nodes (rdev
preserved, node usable), open flags (O_APPEND, O_TRUNC, O_EXCL, O_CREAT on an
existing file, O_DIRECTORY, O_NOFOLLOW, EISDIR, O_DIRECT), unlinked-but-open
files, and O_TMPFILE. Every assertion holds on kernel tmpfs.
"""
import errno
import mmap
import os
import socket
import stat

from .helpers import (DT_BLK, DT_CHR, DT_FIFO, DT_SOCK, assert_errno, current_umask, link_fd,
                      read_file, readdir_all, settle, write_file)


def test_regular_file_stat_fields(fs_dir):
    path = os.path.join(fs_dir, "f")
    old = os.umask(0o022)
    try:
        fd = os.open(path, os.O_CREAT | os.O_WRONLY, 0o666)
    finally:
        os.umask(old)
    os.write(fd, b"hello")
    os.close(fd)
    st = os.stat(path)
    assert stat.S_ISREG(st.st_mode)
    assert stat.S_IMODE(st.st_mode) == 0o644
    assert (st.st_size, st.st_nlink, st.st_uid, st.st_gid) == (5, 1, 0, 0)
    assert st.st_blksize == 4096
    assert st.st_blocks == 8  # one page, in 512-byte units
    assert read_file(path) == b"hello"


def test_pread_pwrite_and_gap_reads_zero(fs_dir):
    path = os.path.join(fs_dir, "f")
    fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o644)
    try:
        assert os.pwrite(fd, b"tail", 10000) == 4
        assert os.pwrite(fd, b"head", 0) == 4
        assert os.fstat(fd).st_size == 10004
        assert os.pread(fd, 4, 0) == b"head"
        assert os.pread(fd, 9996, 4) == b"\0" * 9996
        assert os.pread(fd, 100, 10000) == b"tail"
        assert os.pread(fd, 100, 20000) == b""
        assert os.lseek(fd, 0, os.SEEK_END) == 10004
        assert os.read(fd, 10) == b""
    finally:
        os.close(fd)


def test_large_write_roundtrip(fs_dir):
    path = os.path.join(fs_dir, "big")
    data = os.urandom(3 * 1024 * 1024 + 123)
    write_file(path, data)
    assert os.stat(path).st_size == len(data)
    assert read_file(path) == data
    with open(path, "r+b") as f:  # overwrite straddling page boundaries
        f.seek(4090)
        f.write(b"X" * 10)
    assert read_file(path) == data[:4090] + b"X" * 10 + data[4100:]


def test_symlink_readlink_lstat_stat(fs_dir):
    target = os.path.join(fs_dir, "target")
    link = os.path.join(fs_dir, "link")
    write_file(target, b"abc")
    os.symlink("target", link)
    assert os.readlink(link) == "target"
    lst, st = os.lstat(link), os.stat(link)
    assert stat.S_ISLNK(lst.st_mode)
    assert stat.S_IMODE(lst.st_mode) == 0o777
    assert lst.st_size == len("target")
    assert lst.st_nlink == 1
    assert stat.S_ISREG(st.st_mode) and st.st_ino == os.stat(target).st_ino
    assert read_file(link) == b"abc"
    assert_errno(errno.EINVAL, os.readlink, target)


def test_dangling_symlink(fs_dir):
    link = os.path.join(fs_dir, "dangling")
    os.symlink("does/not/exist", link)
    assert os.readlink(link) == "does/not/exist"
    assert stat.S_ISLNK(os.lstat(link).st_mode)
    assert_errno(errno.ENOENT, os.stat, link)
    assert os.path.lexists(link) and not os.path.exists(link)
    # O_CREAT through a dangling symlink creates the target (relative to the link).
    os.symlink("made", os.path.join(fs_dir, "to-made"))
    write_file(os.path.join(fs_dir, "to-made"), b"x")
    assert read_file(os.path.join(fs_dir, "made")) == b"x"


def test_symlink_target_length_limits(fs_dir):
    long_target = "a/" * 2047 + "b"  # 4095 bytes: the longest allowed
    os.symlink(long_target, os.path.join(fs_dir, "ok"))
    assert os.readlink(os.path.join(fs_dir, "ok")) == long_target
    assert os.lstat(os.path.join(fs_dir, "ok")).st_size == 4095
    assert_errno(errno.ENAMETOOLONG, os.symlink, "x" * 4096, os.path.join(fs_dir, "bad"))
    assert_errno(errno.ENOENT, os.symlink, "", os.path.join(fs_dir, "empty"))


def test_symlink_loop_and_nofollow(fs_dir):
    a, b = os.path.join(fs_dir, "a"), os.path.join(fs_dir, "b")
    os.symlink("b", a)
    os.symlink("a", b)
    assert_errno(errno.ELOOP, os.stat, a)
    assert_errno(errno.ELOOP, os.open, a, os.O_RDONLY)
    write_file(os.path.join(fs_dir, "file"), b"data")
    os.symlink("file", os.path.join(fs_dir, "l"))
    assert_errno(errno.ELOOP, os.open, os.path.join(fs_dir, "l"), os.O_RDONLY | os.O_NOFOLLOW)
    fd = os.open(os.path.join(fs_dir, "l"), os.O_PATH | os.O_NOFOLLOW)
    try:
        assert stat.S_ISLNK(os.fstat(fd).st_mode)
    finally:
        os.close(fd)


def test_symlink_existing_name_eexist(fs_dir):
    write_file(os.path.join(fs_dir, "f"))
    assert_errno(errno.EEXIST, os.symlink, "x", os.path.join(fs_dir, "f"))


def test_hard_links_nlink_and_inode(fs_dir):
    a, b, c = (os.path.join(fs_dir, n) for n in "abc")
    write_file(a, b"shared")
    os.link(a, b)
    os.link(b, c)
    inos = {os.stat(p).st_ino for p in (a, b, c)}
    assert len(inos) == 1
    assert [os.stat(p).st_nlink for p in (a, b, c)] == [3, 3, 3]
    with open(b, "ab") as f:
        f.write(b"+more")
    assert read_file(c) == b"shared+more"
    os.unlink(a)
    assert [os.stat(p).st_nlink for p in (b, c)] == [2, 2]
    os.unlink(c)
    assert os.stat(b).st_nlink == 1
    assert read_file(b) == b"shared+more"


def test_hard_link_errors(fs_dir):
    d, f = os.path.join(fs_dir, "d"), os.path.join(fs_dir, "f")
    os.mkdir(d)
    write_file(f)
    assert_errno(errno.EPERM, os.link, d, os.path.join(fs_dir, "dlink"))
    assert_errno(errno.EEXIST, os.link, f, d)
    assert_errno(errno.EEXIST, os.link, f, f)
    assert_errno(errno.ENOENT, os.link, os.path.join(fs_dir, "missing"), os.path.join(fs_dir, "x"))
    assert os.stat(d).st_nlink == 2 and os.stat(f).st_nlink == 1


def test_hard_link_to_symlink_links_the_symlink(fs_dir):
    os.symlink("nowhere", os.path.join(fs_dir, "sl"))
    os.link(os.path.join(fs_dir, "sl"), os.path.join(fs_dir, "sl2"), follow_symlinks=False)
    assert os.readlink(os.path.join(fs_dir, "sl2")) == "nowhere"
    assert os.lstat(os.path.join(fs_dir, "sl")).st_nlink == 2


def test_fifo(fs_dir):
    path = os.path.join(fs_dir, "fifo")
    os.mkfifo(path, 0o640)
    st = os.lstat(path)
    assert stat.S_ISFIFO(st.st_mode)
    assert stat.S_IMODE(st.st_mode) == 0o640 & ~current_umask()
    assert st.st_size == 0
    r = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    w = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
    try:
        assert os.write(w, b"through the pipe") == 16
        assert os.read(r, 100) == b"through the pipe"
    finally:
        os.close(w)
        os.close(r)
    assert_errno(errno.EEXIST, os.mkfifo, path)
    assert {n: t for n, t, _ in readdir_all(fs_dir)}[b"fifo"] == DT_FIFO


def test_unix_socket_bind_and_connect(fs_dir):
    path = os.path.join(fs_dir, "sock")
    assert len(path) < 100
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    cli = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        srv.bind(path)
        srv.listen(1)
        assert stat.S_ISSOCK(os.lstat(path).st_mode)
        assert {n: t for n, t, _ in readdir_all(fs_dir)}[b"sock"] == DT_SOCK
        cli.connect(path)
        conn, _ = srv.accept()
        with conn:
            cli.sendall(b"ping")
            assert conn.recv(4) == b"ping"
    finally:
        cli.close()
        srv.close()
    assert stat.S_ISSOCK(os.lstat(path).st_mode)  # the node outlives the socket
    os.unlink(path)


def test_device_nodes_preserve_rdev(fs_dir):
    cases = [("chr", stat.S_IFCHR, 1, 3, DT_CHR), ("blk", stat.S_IFBLK, 8, 0, DT_BLK),
             ("bigchr", stat.S_IFCHR, 259, 131073, DT_CHR)]
    for name, kind, major, minor, _ in cases:
        os.mknod(os.path.join(fs_dir, name), kind | 0o600, os.makedev(major, minor))
    types = {n: t for n, t, _ in readdir_all(fs_dir)}
    for name, kind, major, minor, dtype in cases:
        st = os.lstat(os.path.join(fs_dir, name))
        assert stat.S_IFMT(st.st_mode) == kind, name
        assert stat.S_IMODE(st.st_mode) == 0o600, name
        assert (os.major(st.st_rdev), os.minor(st.st_rdev)) == (major, minor), name
        assert st.st_size == 0, name
        assert types[name.encode()] == dtype, name


def test_char_device_node_opens_the_device(fs_dir):
    path = os.path.join(fs_dir, "null")
    os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 3))  # /dev/null
    fd = os.open(path, os.O_RDWR)
    try:
        assert os.write(fd, b"discarded") == 9
        assert os.read(fd, 10) == b""
    finally:
        os.close(fd)


def test_mknod_regular_and_errors(fs_dir):
    path = os.path.join(fs_dir, "reg")
    os.mknod(path, stat.S_IFREG | 0o600)
    assert stat.S_ISREG(os.lstat(path).st_mode) and os.lstat(path).st_size == 0
    assert_errno(errno.EEXIST, os.mknod, path, stat.S_IFREG | 0o600)
    assert_errno(errno.ENOENT, os.mknod, os.path.join(fs_dir, "no", "such"), stat.S_IFREG)


def test_o_append_always_writes_at_end(fs_dir):
    path = os.path.join(fs_dir, "log")
    write_file(path, b"0123456789")
    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    try:
        os.lseek(fd, 0, os.SEEK_SET)
        os.write(fd, b"AB")
        assert os.lseek(fd, 0, os.SEEK_CUR) == 12
        os.lseek(fd, 3, os.SEEK_SET)
        os.write(fd, b"CD")
        os.pwrite(fd, b"EF", 0)  # Linux: pwrite on O_APPEND appends too
    finally:
        os.close(fd)
    assert read_file(path) == b"0123456789ABCDEF"


def test_o_trunc(fs_dir):
    path = os.path.join(fs_dir, "t")
    write_file(path, b"x" * 10000)
    os.close(os.open(path, os.O_WRONLY | os.O_TRUNC))
    st = os.stat(path)
    assert (st.st_size, st.st_blocks) == (0, 0)
    write_file(path, b"keep")
    os.close(os.open(path, os.O_RDONLY | os.O_TRUNC))  # Linux truncates even O_RDONLY
    assert os.stat(path).st_size == 0


def test_o_excl_and_o_creat_on_existing(fs_dir):
    path = os.path.join(fs_dir, "e")
    fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    os.write(fd, b"first")
    os.close(fd)
    assert_errno(errno.EEXIST, os.open, path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    os.symlink("e", os.path.join(fs_dir, "sym"))
    assert_errno(errno.EEXIST, os.open, os.path.join(fs_dir, "sym"), os.O_CREAT | os.O_EXCL)
    fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o777)  # existing: mode ignored, data kept
    try:
        assert os.read(fd, 100) == b"first"
    finally:
        os.close(fd)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600


def test_o_directory_and_eisdir(fs_dir):
    f = os.path.join(fs_dir, "f")
    write_file(f)
    assert_errno(errno.ENOTDIR, os.open, f, os.O_RDONLY | os.O_DIRECTORY)
    assert_errno(errno.ENOTDIR, os.open, os.path.join(f, "x"), os.O_RDONLY)
    assert_errno(errno.ENOTDIR, os.stat, f + "/")
    assert_errno(errno.EISDIR, os.open, fs_dir, os.O_WRONLY)
    assert_errno(errno.EISDIR, os.open, fs_dir, os.O_RDWR)
    assert_errno(errno.ENOENT, os.open, os.path.join(fs_dir, "missing"), os.O_RDONLY)
    fd = os.open(fs_dir, os.O_RDONLY | os.O_DIRECTORY)
    try:
        assert_errno(errno.EISDIR, os.read, fd, 10)
    finally:
        os.close(fd)


def test_unlinked_open_file_stays_usable(fs_dir):
    path = os.path.join(fs_dir, "ghost")
    write_file(path, b"before")
    fd = os.open(path, os.O_RDWR)
    fd2 = os.open(path, os.O_RDONLY)
    try:
        os.unlink(path)
        assert "ghost" not in os.listdir(fs_dir)
        assert_errno(errno.ENOENT, os.stat, path)
        assert os.fstat(fd).st_nlink == 0
        os.lseek(fd, 0, os.SEEK_END)
        os.write(fd, b"+after" * 1000)
        os.ftruncate(fd, 6 + 6 * 999)
        assert os.pread(fd2, 20, 0) == b"before+after+after+a"
        assert os.fstat(fd2).st_size == 6 + 6 * 999
        write_file(path, b"new file")  # the name is free again
        assert os.fstat(fd).st_ino != os.stat(path).st_ino
        assert os.pread(fd, 6, 0) == b"before"
    finally:
        os.close(fd)
        os.close(fd2)
    assert read_file(path) == b"new file"


def test_o_tmpfile(fs_dir):
    fd = os.open(fs_dir, os.O_TMPFILE | os.O_RDWR, 0o600)
    try:
        os.write(fd, b"anonymous")
        st = os.fstat(fd)
        assert stat.S_ISREG(st.st_mode) and st.st_nlink == 0
        assert stat.S_IMODE(st.st_mode) == 0o600
        assert os.listdir(fs_dir) == []
        named = os.path.join(fs_dir, "named")
        link_fd(fd, named)
        assert os.fstat(fd).st_nlink == 1
        assert read_file(named) == b"anonymous"
        assert os.stat(named).st_ino == st.st_ino
    finally:
        os.close(fd)


def test_o_tmpfile_excl_cannot_be_linked(fs_dir):
    fd = os.open(fs_dir, os.O_TMPFILE | os.O_WRONLY | os.O_EXCL, 0o600)
    try:
        os.write(fd, b"x")
        assert_errno(errno.ENOENT, link_fd, fd, os.path.join(fs_dir, "n"))
    finally:
        os.close(fd)
    assert os.listdir(fs_dir) == []


def test_o_tmpfile_space_comes_back_at_close_and_inode_limits_hold(make_mount):
    root = make_mount("size=1m,nr_inodes=3")
    free = os.statvfs(root).f_bfree
    fd = os.open(root, os.O_TMPFILE | os.O_WRONLY, 0o600)
    os.write(fd, b"z" * 65536)
    assert os.statvfs(root).f_bfree == free - 16
    fd2 = os.open(root, os.O_TMPFILE | os.O_WRONLY, 0o600)  # the root and two files: full
    assert_errno(errno.ENOSPC, os.open, root, os.O_TMPFILE | os.O_WRONLY, 0o600)
    link_fd(fd2, os.path.join(root, "kept"))  # its first name costs no inode space
    os.close(fd)
    os.close(fd2)
    # The unnamed one is gone with its last reference (on memfs at the
    # kernel's FORGET, which comes after close returns); the named one stays.
    assert settle(lambda: os.statvfs(root).f_bfree, free) == free
    assert os.listdir(root) == ["kept"]
    assert_errno(errno.ENOENT, os.open, os.path.join(root, "gone"), os.O_RDONLY)


def test_o_direct_io(fs_dir):
    path = os.path.join(fs_dir, "direct")
    fd = os.open(path, os.O_CREAT | os.O_RDWR | os.O_DIRECT, 0o644)
    try:
        aligned = mmap.mmap(-1, 8192)  # page-aligned buffer
        aligned.write(b"a" * 8192)
        assert os.pwrite(fd, aligned, 0) == 8192
        assert os.pwrite(fd, b"u" * 100, 3) == 100  # tmpfs needs no alignment
        back = mmap.mmap(-1, 8192)
        assert os.preadv(fd, [back], 0) == 8192
        assert back[:] == b"aaa" + b"u" * 100 + b"a" * (8192 - 103)
    finally:
        os.close(fd)
    assert read_file(path) == b"aaa" + b"u" * 100 + b"a" * (8192 - 103)
