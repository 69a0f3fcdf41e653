"""Deterministic random op generator for the differential test.

Owns: the Op type, the value pools (names, modes, sizes, offsets, flags, xattr
names, times) and the weights. `generate(seed, n)` is a pure function of its
arguments: it never looks at file system state, so any subset of a generated
sequence can be replayed by index (that is what minimization relies on).

Paths come from a tiny name pool nested up to three levels, so renames,
links and unlinks collide often; rare path forms (trailing "/", "/.", 255-
and 256-byte names, symlinks in the middle) reach the less common errors.
Symlink targets are relative and never contain "..", and no generated path
contains "..", so no operation can reach outside the mount.
"""
import os
import random

from . import libc

# Intermediate components and directory-making ops mostly use DIR_NAMES,
# file-making ops FILE_NAMES; "c" is in both, and rename/link/unlink/... use
# all of them, so files and directories still collide (ENOTDIR, EISDIR).
DIR_NAMES = ["a", "b", "c"]
FILE_NAMES = ["c", "d", "e"]
NAMES = ["a", "b", "c", "d", "e"]
DIR_KINDS = {"mkdir", "rmdir", "readdir", "tmpfile", "dirseek"}
FILE_KINDS = {"create", "write", "read", "truncate", "mkfifo", "fallocate", "seek", "open", "flink",
              "mknod", "copy"}
NAME_MAX_OK = "n" * 255
NAME_TOO_LONG = "n" * 256

SLOTS = 2  # open file descriptions kept across ops, per side

# Identities for ops run as another user: (uid, gid).
OTHER_USERS = [(1000, 1000), (65534, 65534)]
OTHER_USER_P = 0.15

MODES = [0o644, 0o755, 0o600, 0o000, 0o777, 0o4755, 0o2755, 0o1777, 0o2775, 0o444, 0o7777, 0o711]
IO_SIZES = [0, 1, 100, 4095, 4096, 5000, 65536, 200_000, 1_000_000]
OFFSETS = [0, 1, 4095, 4096, 10_000, 131_072, 1 << 20, 3 << 20]
TRUNC_SIZES = [0, 1, 4096, 5000, 100_000, 1 << 20, 5 << 20, 1 << 40, 2**63 - 1, -1]
# FALLOC_FL_ZERO_RANGE is left out: memfs supports it and tmpfs does not, a
# deliberate difference (docs/SEMANTICS.md) that would make every later op on
# the file differ. tests/conformance checks each side's ZERO_RANGE behaviour.
FALLOC_MODES = [
    0,
    libc.FALLOC_FL_KEEP_SIZE,
    libc.FALLOC_FL_PUNCH_HOLE | libc.FALLOC_FL_KEEP_SIZE,
    libc.FALLOC_FL_PUNCH_HOLE,
    libc.FALLOC_FL_COLLAPSE_RANGE,
    libc.FALLOC_FL_INSERT_RANGE,
]
FALLOC_WEIGHTS = [5, 3, 4, 1, 1, 1]
FALLOC_OFFSETS = [0, 1000, 4096, 1 << 20, -1]
FALLOC_LENS = [0, 1, 4096, 10_000, 1 << 20, 4 << 20, 1 << 30]
SEEK_OFFSETS = [0, 1, 4096, 5000, 1 << 20, -1]
WHENCES = ["SEEK_SET", "SEEK_CUR", "SEEK_END", "SEEK_DATA", "SEEK_HOLE"]
CHOWN_IDS = [0, 1000, 2000, 65534, -1]
ACCESS_MODES = [os.F_OK, os.R_OK, os.W_OK, os.X_OK, os.R_OK | os.W_OK]
# RENAME_WHITEOUT leaves a 0:0 character device (mode 0) at src; it needs
# CAP_MKNOD (EPERM as another user) and is EINVAL with RENAME_EXCHANGE.
RENAME_FLAGS = [0, 0, 0, libc.RENAME_NOREPLACE, libc.RENAME_EXCHANGE, libc.RENAME_NOREPLACE | libc.RENAME_EXCHANGE,
                libc.RENAME_WHITEOUT, libc.RENAME_WHITEOUT | libc.RENAME_NOREPLACE,
                libc.RENAME_WHITEOUT | libc.RENAME_EXCHANGE]

XATTR_NAMES = ["user.a", "user.a", "user.b", "trusted.t", "security.s",
               "user." + "x" * 250, "user." + "x" * 251, "bogus.n", "user."]
XATTR_LENS = [0, 3, 100, 3000, 65536, 65537]
XATTR_SETFLAGS = ["0", "0", "XATTR_CREATE", "XATTR_REPLACE"]
ACL_XATTRS = ["system.posix_acl_access", "system.posix_acl_default"]
# getxattr/removexattr also see the ACL names (setacl writes them); setxattr
# does not: its fill values are never valid ACLs, setacl covers malformed ones.
XATTR_READ_NAMES = XATTR_NAMES + ACL_XATTRS
XATTR_GETSIZES = [0, 1, 65536]

# Explicit timestamps utimens may set. observe.py reports a time equal to one
# of these by its index (a relation, not an absolute value).
EXPLICIT_TIMES = [(0, 0), (1_000_000_000, 123_456_789), (-1, 500), (2**33, 999_999_999)]
TIME_SPECS = EXPLICIT_TIMES + ["UTIME_NOW", "UTIME_NOW", "UTIME_OMIT", (5, 1_000_000_000)]

SYMLINK_TARGETS = ["a", "b", "a/b", "c/d", "zz", ".", "a/./b",
                   "./" * 98 + "a",          # 197 bytes: not a "short" symlink in tmpfs
                   # dangling on purpose: resolving 2047 components is slow, in a loop very slow
                   "./" * 2047 + "z",        # 4095 bytes: the longest allowed
                   "./" * 2047 + "zz"]       # 4096 bytes: ENAMETOOLONG

# mknod: file types and device numbers. Every device number here is safe to
# open on this host and on CI: 1:3 and 1:5 are /dev/null and /dev/zero; the
# others name no driver (ENXIO). Real disks such as 8:1 are left out on
# purpose: write/truncate/open ops reach any generated path and would write
# to the host's disk through a node on a mount without nodev. 4096:0 does not
# fit the kernel's 12-bit major: EINVAL.
MKNOD_TYPES = ["chr", "chr", "blk", "sock", "sock", "reg", "none", "dir"]
CHR_RDEVS = [os.makedev(1, 3), os.makedev(1, 5), 0, os.makedev(60, 1), os.makedev(4095, 1048575),
             os.makedev(4096, 0)]
BLK_RDEVS = [0, os.makedev(60, 1), os.makedev(4095, 1048575), os.makedev(4096, 0)]

MMAP_SIZES = [1, 100, 4096, 5000, 65536, 1 << 20]
COPY_COUNTS = [0, 1, 100, 4096, 5000, 65536, 1_000_000]
COPY_OFFSETS = OFFSETS + [5 << 20, None, None]  # None: use (and advance) the fd's offset
DIRSEEK_AFTER = [0, 1, 2, 3, 5]


def _acl(*entries, version=2):
    """A POSIX ACL xattr value: u32 version, then (u16 tag, u16 perm, u32 id) entries."""
    head = version.to_bytes(4, "little")
    return head + b"".join(t.to_bytes(2, "little") + p.to_bytes(2, "little") + i.to_bytes(4, "little")
                           for t, p, i in entries)


# ACL tags (linux/posix_acl_xattr.h); UNDEF is the id of the entries without one.
U_OBJ, USER, G_OBJ, GROUP, MASK, OTHER, UNDEF = 0x01, 0x02, 0x04, 0x08, 0x10, 0x20, 0xFFFFFFFF
ACL_BLOBS = {
    # valid: mode-equivalent ones are not stored as xattrs (the mode says it all)
    "min644": _acl((U_OBJ, 6, UNDEF), (G_OBJ, 4, UNDEF), (OTHER, 4, UNDEF)),
    "min777": _acl((U_OBJ, 7, UNDEF), (G_OBJ, 7, UNDEF), (OTHER, 7, UNDEF)),
    "user": _acl((U_OBJ, 7, UNDEF), (USER, 6, 1000), (G_OBJ, 5, UNDEF), (MASK, 7, UNDEF), (OTHER, 0, UNDEF)),
    "group": _acl((U_OBJ, 6, UNDEF), (G_OBJ, 4, UNDEF), (GROUP, 7, 65534), (MASK, 5, UNDEF), (OTHER, 4, UNDEF)),
    "both": _acl((U_OBJ, 7, UNDEF), (USER, 7, 1000), (USER, 4, 65534), (G_OBJ, 7, UNDEF), (GROUP, 2, 1000),
                 (MASK, 4, UNDEF), (OTHER, 1, UNDEF)),
    "mask": _acl((U_OBJ, 5, UNDEF), (G_OBJ, 7, UNDEF), (MASK, 1, UNDEF), (OTHER, 0, UNDEF)),
    "header": _acl(),  # no entries: removes the ACL
    "empty": b"",      # no value at all: removes the ACL too
    # malformed
    "no_mask": _acl((U_OBJ, 7, UNDEF), (USER, 6, 1000), (G_OBJ, 5, UNDEF), (OTHER, 0, UNDEF)),  # EINVAL
    "unsorted": _acl((G_OBJ, 4, UNDEF), (U_OBJ, 6, UNDEF), (OTHER, 4, UNDEF)),  # EINVAL
    "dup_user": _acl((U_OBJ, 7, UNDEF), (USER, 6, 1000), (USER, 4, 1000), (G_OBJ, 5, UNDEF), (MASK, 7, UNDEF),
                     (OTHER, 0, UNDEF)),  # EINVAL
    "bad_perm": _acl((U_OBJ, 0xF, UNDEF), (G_OBJ, 4, UNDEF), (OTHER, 4, UNDEF)),  # EINVAL
    "bad_id": _acl((U_OBJ, 7, UNDEF), (USER, 6, UNDEF), (G_OBJ, 5, UNDEF), (MASK, 7, UNDEF), (OTHER, 0, UNDEF)),
    "truncated": _acl((U_OBJ, 6, UNDEF), (G_OBJ, 4, UNDEF), (OTHER, 4, UNDEF))[:-3],  # EINVAL
    "version1": _acl((U_OBJ, 6, UNDEF), (G_OBJ, 4, UNDEF), (OTHER, 4, UNDEF), version=1),  # EOPNOTSUPP
}
ACL_CHOICES = list(ACL_BLOBS) + ["user", "both", "group", "min644"]  # valid extended ACLs more often

ACCESS = ["O_RDONLY", "O_WRONLY", "O_RDWR"]
OPEN_EXTRAS = [("O_CREAT", 0.7), ("O_EXCL", 0.15), ("O_TRUNC", 0.15), ("O_APPEND", 0.2),
               ("O_DIRECTORY", 0.05), ("O_NOFOLLOW", 0.1)]

# kind -> weight. Path ops first, then fd-slot ops.
WEIGHTS = {
    "create": 6, "write": 10, "read": 3, "truncate": 4, "mkdir": 8, "rmdir": 5,
    "unlink": 6, "rename": 10, "link": 5, "symlink": 4, "readlink": 1, "chmod": 3,
    "chown": 2, "utimens": 3, "setxattr": 4, "getxattr": 2, "listxattr": 1,
    "removexattr": 2, "mkfifo": 1, "stat": 1, "readdir": 1, "statfs": 1,
    "access": 1, "fallocate": 4, "seek": 2,
    "open": 7, "close": 1, "fwrite": 5, "fread": 2, "ftruncate": 2,
    "ffallocate": 2, "lseek": 2, "fstat": 1, "tmpfile": 2, "flink": 2,
    "mknod": 5, "setacl": 5, "copy": 2, "dirseek": 1,
    "fchmod": 2, "fchown": 2, "futimens": 2, "fsync": 1, "fstatfs": 1, "mmap": 5, "fcopy": 4,
}
# Ops on the open-fd slots ("slot"; fcopy also "src_slot").
SLOT_KINDS = {"open", "close", "fwrite", "fread", "ftruncate", "ffallocate", "lseek", "fstat", "tmpfile", "flink",
              "fchmod", "fchown", "futimens", "fsync", "fstatfs", "mmap", "fcopy"}
# Ops that change which fd a slot holds: they must run in the test process
# itself. Every other slot op may run as another user: run_as forks, and the
# child inherits the fds (the open file descriptions, offsets included).
SLOT_CHANGING = {"open", "close", "tmpfile"}
# Ops that may run as another user (the rest change the slots or are global).
AS_OTHER_OK = set(WEIGHTS) - SLOT_CHANGING - {"statfs", "fstatfs"}


class Op:
    """One generated operation: kind, keyword args, and the identity to run as."""

    __slots__ = ("index", "kind", "args", "user")

    def __init__(self, index, kind, args, user=None):
        self.index, self.kind, self.args, self.user = index, kind, args, user

    def __str__(self):
        args = ", ".join(f"{k}={_fmt(self.kind, k, v)}" for k, v in self.args.items())
        who = f" as uid {self.user[0]}" if self.user else ""
        return f"#{self.index} {self.kind}({args}){who}"

    def paths(self):
        """The path-valued args (relative to the mount root)."""
        return [v for k, v in self.args.items() if k in ("path", "src", "dst")]


_FLAG_NAMES = {
    "rename": {libc.RENAME_NOREPLACE: "RENAME_NOREPLACE", libc.RENAME_EXCHANGE: "RENAME_EXCHANGE",
               libc.RENAME_WHITEOUT: "RENAME_WHITEOUT"},
    "fallocate": {libc.FALLOC_FL_KEEP_SIZE: "KEEP_SIZE", libc.FALLOC_FL_PUNCH_HOLE: "PUNCH_HOLE",
                  libc.FALLOC_FL_COLLAPSE_RANGE: "COLLAPSE_RANGE", libc.FALLOC_FL_ZERO_RANGE: "ZERO_RANGE",
                  libc.FALLOC_FL_INSERT_RANGE: "INSERT_RANGE"},
}
_FLAG_NAMES["ffallocate"] = _FLAG_NAMES["fallocate"]


def _fmt(kind, key, value):
    if isinstance(value, str) and len(value) > 24:
        return f"<{len(value)} chars {value[:10]!r}...>"
    names = _FLAG_NAMES.get(kind) if key in ("flags", "mode") else None
    if names is not None:
        return "|".join(n for bit, n in names.items() if value & bit) or "0"
    if key == "mode" and isinstance(value, int):
        return oct(value)
    if key == "rdev":
        return f"makedev({os.major(value)},{os.minor(value)})"
    return repr(value)


def _path(rng, leaves=NAMES):
    depth = rng.choices([1, 2, 3], [6, 4, 1])[0]
    parts = [rng.choice(DIR_NAMES if rng.random() < 0.9 else NAMES) for _ in range(depth - 1)]
    parts.append(rng.choice(leaves))
    r = rng.random()
    if r < 0.01:
        parts[-1] = NAME_MAX_OK
    elif r < 0.02:
        parts[-1] = NAME_TOO_LONG
    path = "/".join(parts)
    r = rng.random()
    if r < 0.03:
        path += "/"
    elif r < 0.04:
        path += "/."
    return path


def _open_flags(rng):
    # O_TMPFILE is its own kind ("tmpfile"): it needs a directory path.
    flags = [rng.choice(ACCESS)]
    flags += [name for name, p in OPEN_EXTRAS if rng.random() < p]
    return tuple(flags)


def _args(kind, rng):
    leaves = DIR_NAMES if kind in DIR_KINDS else FILE_NAMES if kind in FILE_KINDS else NAMES
    P = lambda: _path(rng, leaves)  # noqa: E731 - local shorthand
    slot = lambda: rng.randrange(SLOTS)  # noqa: E731
    byte = lambda: rng.choice([0, 0x41, 0x42, 0x43, 0xFF])  # noqa: E731
    off_or_none = lambda: rng.choice(OFFSETS + [None, None])  # noqa: E731
    if kind == "create":
        return dict(path=P(), mode=rng.choice(MODES))
    if kind == "write":
        return dict(path=P(), offset=off_or_none(), size=rng.choice(IO_SIZES), byte=byte(),
                    trunc=rng.random() < 0.1)
    if kind == "read":
        return dict(path=P(), offset=rng.choice(OFFSETS), size=rng.choice(IO_SIZES))
    if kind in ("truncate",):
        return dict(path=P(), size=rng.choice(TRUNC_SIZES))
    if kind in ("mkdir", "mkfifo"):
        return dict(path=P(), mode=rng.choice(MODES))
    if kind in ("rmdir", "unlink", "readlink", "readdir"):
        return dict(path=P())
    if kind == "mknod":
        kind_ = rng.choice(MKNOD_TYPES)
        rdev = rng.choice(CHR_RDEVS if kind_ == "chr" else BLK_RDEVS if kind_ == "blk" else [0, 0, 0, 5])
        return dict(path=P(), type=kind_, mode=rng.choice(MODES), rdev=rdev)
    if kind == "setacl":
        return dict(path=P(), name=rng.choice(ACL_XATTRS), acl=rng.choice(ACL_CHOICES), follow=rng.random() < 0.8)
    if kind == "copy":
        return dict(src=P(), dst=P(), src_off=rng.choice(COPY_OFFSETS[:-2]), dst_off=rng.choice(COPY_OFFSETS[:-2]),
                    count=rng.choice(COPY_COUNTS))
    if kind == "dirseek":
        return dict(path=rng.choice(["", ""] + [P()]), after=rng.choice(DIRSEEK_AFTER))
    if kind == "fcopy":
        return dict(slot=slot(), src_slot=slot(), src_off=rng.choice(COPY_OFFSETS),
                    dst_off=rng.choice(COPY_OFFSETS), count=rng.choice(COPY_COUNTS))
    if kind == "mmap":
        return dict(slot=slot(), offset=rng.choice(OFFSETS), size=rng.choice(MMAP_SIZES), byte=byte(),
                    write=rng.random() < 0.7)
    if kind == "fchmod":
        return dict(slot=slot(), mode=rng.choice(MODES))
    if kind == "fchown":
        return dict(slot=slot(), uid=rng.choice(CHOWN_IDS), gid=rng.choice(CHOWN_IDS))
    if kind == "futimens":
        return dict(slot=slot(), atime=rng.choice(TIME_SPECS), mtime=rng.choice(TIME_SPECS))
    if kind == "fsync":
        return dict(slot=slot(), data_only=rng.random() < 0.5)
    if kind == "fstatfs":
        return dict(slot=slot())
    if kind == "rename":
        return dict(src=P(), dst=P(), flags=rng.choice(RENAME_FLAGS))
    if kind == "link":
        return dict(src=P(), dst=P())
    if kind == "symlink":
        return dict(target=rng.choice(SYMLINK_TARGETS), path=P())
    if kind == "chmod":
        return dict(path=P(), mode=rng.choice(MODES))
    if kind == "chown":
        return dict(path=P(), uid=rng.choice(CHOWN_IDS), gid=rng.choice(CHOWN_IDS),
                    follow=rng.random() < 0.7)
    if kind == "utimens":
        return dict(path=P(), atime=rng.choice(TIME_SPECS), mtime=rng.choice(TIME_SPECS),
                    follow=rng.random() < 0.8)
    if kind == "setxattr":
        return dict(path=P(), name=rng.choice(XATTR_NAMES), size=rng.choice(XATTR_LENS),
                    byte=byte(), flags=rng.choice(XATTR_SETFLAGS), follow=rng.random() < 0.8)
    if kind == "getxattr":
        return dict(path=P(), name=rng.choice(XATTR_READ_NAMES), size=rng.choice(XATTR_GETSIZES),
                    follow=rng.random() < 0.8)
    if kind == "listxattr":
        return dict(path=P(), size=rng.choice([0, 1, 65536]), follow=rng.random() < 0.8)
    if kind == "removexattr":
        return dict(path=P(), name=rng.choice(XATTR_READ_NAMES), follow=rng.random() < 0.8)
    if kind == "stat":
        return dict(path=P(), follow=rng.random() < 0.5)
    if kind == "statfs":
        return {}
    if kind == "access":
        return dict(path=P(), mode=rng.choice(ACCESS_MODES))
    if kind in ("fallocate", "ffallocate"):
        args = dict(path=P()) if kind == "fallocate" else dict(slot=slot())
        args.update(mode=rng.choices(FALLOC_MODES, FALLOC_WEIGHTS)[0],
                    offset=rng.choice(FALLOC_OFFSETS), length=rng.choice(FALLOC_LENS))
        return args
    if kind in ("seek", "lseek"):
        args = dict(path=P()) if kind == "seek" else dict(slot=slot())
        args.update(offset=rng.choice(SEEK_OFFSETS), whence=rng.choice(WHENCES))
        return args
    if kind == "open":
        return dict(slot=slot(), path=P(), flags=_open_flags(rng), mode=rng.choice(MODES))
    if kind == "tmpfile":  # O_TMPFILE in a directory; O_EXCL ones cannot be linked
        return dict(slot=slot(), path=P(), excl=rng.random() < 0.3, mode=rng.choice(MODES))
    if kind == "flink":  # linkat(/proc/self/fd/N): names an O_TMPFILE, or adds a link
        return dict(slot=slot(), path=P())
    if kind in ("close", "fstat"):
        return dict(slot=slot())
    if kind == "fwrite":
        return dict(slot=slot(), offset=off_or_none(), size=rng.choice(IO_SIZES), byte=byte())
    if kind == "fread":
        return dict(slot=slot(), offset=off_or_none(), size=rng.choice(IO_SIZES))
    if kind == "ftruncate":
        return dict(slot=slot(), size=rng.choice(TRUNC_SIZES))
    raise ValueError(kind)


def generate(seed, n):
    """The first n ops of the sequence for seed (a prefix of any longer run)."""
    rng = random.Random(seed)
    kinds, weights = list(WEIGHTS), list(WEIGHTS.values())
    ops = []
    for i in range(n):
        kind = rng.choices(kinds, weights)[0]
        args = _args(kind, rng)
        user = None
        if kind in AS_OTHER_OK and rng.random() < OTHER_USER_P:
            user = rng.choice(OTHER_USERS)
        ops.append(Op(i, kind, args, user))
    return ops
