"""Observable state of one mounted side, normalized so two file systems compare.

Owns: what "the same state" means. A snapshot of a path holds its type,
permission bits, nlink, uid, gid, size, st_blocks, st_blksize, st_rdev, the
content (as byte runs), the symlink target, the xattr set and, for a
directory, the sorted listing with entry types. Also statfs and a full tree
walk (including which paths are hard links of each other).

Deliberately NOT compared (they differ between any two mounts, or depend on
FUSE caching rather than on file system semantics):
  - st_dev, st_ino: identities of the mount/inode; only used for relations
    ("is this still the same inode", "which paths share an inode").
  - absolute timestamps: the harness compares only relations (changed or not,
    equal to an explicitly set value or not).
  - atime, except right after utimens: reads served from the kernel page cache
    never reach a FUSE server, so it cannot update atime like tmpfs does.
  - statvfs f_flag (mount flags such as nosuid/nodev, a property of how the
    mount was made) and f_fsid (an identity).
The observer itself opens files with O_NOATIME so it does not change state.
"""
import errno
import hashlib
import os
import stat

from . import gen

_TYPES = {stat.S_IFREG: "reg", stat.S_IFDIR: "dir", stat.S_IFLNK: "lnk", stat.S_IFIFO: "fifo",
          stat.S_IFCHR: "chr", stat.S_IFBLK: "blk", stat.S_IFSOCK: "sock"}
_MAX_RUNS = 48
# Files can be sparse and huge (truncate to 2**63-1): read at most this much
# of the head and of the tail. Generated writes all start below _HEAD, except
# appends, which land at the tail.
_HEAD = 8 << 20
_TAIL = 2 << 20
_CHUNK = 1 << 20  # content is read and scanned in chunks of this size
_UNIFORM = {}  # byte -> memoryview of _CHUNK copies of it


def err_name(e):
    return errno.errorcode.get(e.errno, str(e.errno))


def _uniform(byte):
    if byte not in _UNIFORM:
        _UNIFORM[byte] = memoryview(bytes([byte]) * _CHUNK)
    return _UNIFORM[byte]


def _run_end(data, lo):
    """End of the run of equal bytes starting at lo (binary search with memcmp)."""
    u, ok, bad = _uniform(data[lo]), 1, len(data) - lo + 1
    if data.startswith(u[:bad - 1], lo):
        return len(data)
    while bad - ok > 1:
        mid = (ok + bad) // 2
        if data.startswith(u[:mid], lo):
            ok = mid
        else:
            bad = mid
    return lo + ok


def _runs(data, base=0, runs=None):
    """Append the byte runs [offset, length, byte] of data (at most _CHUNK bytes,
    found at offset base) to runs, merging with the previous run."""
    runs = [] if runs is None else runs
    lo = 0
    if len(runs) > _MAX_RUNS:
        lo = len(data)
        runs.append(["sha1", base, hashlib.sha1(data).hexdigest()[:16]])
    while lo < len(data):
        hi = _run_end(data, lo)
        last = runs[-1] if runs else None
        if last and last[2] == data[lo] and last[0] + last[1] == base + lo:
            last[1] += hi - lo
        else:
            runs.append([base + lo, hi - lo, data[lo]])
        lo = hi
        if len(runs) > _MAX_RUNS and lo < len(data):  # not a generated fill: hash the rest
            runs.append(["sha1", base + lo, hashlib.sha1(data[lo:]).hexdigest()[:16]])
            break
    return runs


def _describe(size, runs):
    return {"size": size, "runs": [tuple(r) for r in runs]}


def summarize(data):
    """Bytes as {size, byte runs [(offset, length, byte)]}; the test only writes fills."""
    runs = []
    for off in range(0, len(data), _CHUNK):
        _runs(data[off:off + _CHUNK], off, runs)
    return _describe(len(data), runs)


def norm_stat(st):
    return {
        "type": _TYPES.get(stat.S_IFMT(st.st_mode), "?"),
        "mode": oct(stat.S_IMODE(st.st_mode)),
        "nlink": st.st_nlink,
        "uid": st.st_uid,
        "gid": st.st_gid,
        "size": st.st_size,
        "blocks": st.st_blocks,
        "blksize": st.st_blksize,
        "rdev": st.st_rdev,
    }


def time_class(sec_ns):
    """Index of the explicit utimens value this time equals, else 'other'."""
    for i, (sec, nsec) in enumerate(gen.EXPLICIT_TIMES):
        if sec_ns == sec * 1_000_000_000 + nsec:
            return i
    return "other"


def _identity(st):
    return (st.st_ino, st.st_mtime_ns, st.st_ctime_ns, st.st_atime_ns, stat.S_ISFIFO(st.st_mode))


def identity(path, follow=False):
    """(ino, mtime_ns, ctime_ns, atime_ns, is_fifo) for relations, or None."""
    try:
        return _identity(os.stat(path, follow_symlinks=follow))
    except OSError:
        return None


def fd_identity(fd):
    return _identity(os.fstat(fd))


def content(path):
    """Byte runs of a regular file; of a huge sparse file only its head and tail."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOATIME)
    try:
        size = os.fstat(fd).st_size
        runs = []
        regions = [(0, size)] if size <= _HEAD + _TAIL else [(0, _HEAD), (size - _TAIL, size)]
        for start, end in regions:
            pos = start
            while pos < end:
                b = os.pread(fd, min(_CHUNK, end - pos), pos)
                if not b:
                    break
                _runs(b, pos, runs)
                pos += len(b)
        return _describe(size, runs)
    finally:
        os.close(fd)


def xattrs(path):
    out = {}
    for name in sorted(os.listxattr(path, follow_symlinks=False)):
        try:
            out[name] = summarize(os.getxattr(path, name, follow_symlinks=False))
        except OSError as e:
            out[name] = err_name(e)
    return out


def _dtype(entry):
    if entry.is_symlink():
        return "lnk"
    if entry.is_dir(follow_symlinks=False):
        return "dir"
    return "reg" if entry.is_file(follow_symlinks=False) else "other"


def listing(path, noatime=False):
    """Sorted [(name, type from d_type)]; noatime: leave the directory's atime alone."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | (os.O_NOATIME if noatime else 0))
    try:
        with os.scandir(fd) as it:
            return sorted((e.name, _dtype(e)) for e in it)
    finally:
        os.close(fd)


def _guard(fn, *args):
    try:
        return fn(*args)
    except OSError as e:
        return err_name(e)


def snapshot(path):
    """Everything observable about one path (final component not followed)."""
    try:
        st = os.lstat(path)
    except OSError as e:
        return {"error": err_name(e)}
    snap = {"stat": norm_stat(st), "xattrs": _guard(xattrs, path)}
    if stat.S_ISREG(st.st_mode):
        snap["content"] = _guard(content, path)
    elif stat.S_ISLNK(st.st_mode):
        snap["target"] = _guard(os.readlink, path)
        snap["follow"] = _guard(lambda p: norm_stat(os.stat(p)), path)
    elif stat.S_ISDIR(st.st_mode):
        snap["listing"] = _guard(listing, path, True)
    return snap


def statfs(root):
    v = os.statvfs(root)
    return {k: getattr(v, "f_" + k) for k in
            ("bsize", "frsize", "blocks", "bfree", "bavail", "files", "ffree", "favail", "namemax")}


def tree(root):
    """Snapshot of every path under root (symlinks not followed) plus hard-link groups."""
    snaps, inodes = {}, {}

    def walk(rel):
        full = os.path.join(root, rel) if rel else root
        snaps[rel] = snapshot(full)
        try:
            st = os.lstat(full)
        except OSError:
            return
        if rel and not stat.S_ISDIR(st.st_mode):
            inodes.setdefault(st.st_ino, []).append(rel)
        if stat.S_ISDIR(st.st_mode) and isinstance(snaps[rel].get("listing"), list):
            for name, _ in snaps[rel]["listing"]:
                walk(os.path.join(rel, name) if rel else name)

    walk("")
    links = sorted(sorted(paths) for paths in inodes.values() if len(paths) > 1)
    return {"paths": snaps, "hardlinks": links}


def diff(a, b, prefix=""):
    """[(key, a_value, b_value)] for every leaf where a and b differ."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(set(a) | set(b), key=str):
            key = f"{prefix}.{k}" if prefix else str(k)
            if k not in a or k not in b:
                out.append((key, a.get(k, "<absent>"), b.get(k, "<absent>")))
            else:
                out.extend(diff(a[k], b[k], key))
        return out
    return [] if a == b else [(prefix, a, b)]
