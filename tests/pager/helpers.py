"""Shared helpers for the pager tests (memfs only).

Owns: mounting a memfs with pager options and a throwaway backing
directory (both removed whatever happens), reading stats/pager, dropping
the kernel's page cache so reads really reach memfs, real-ish test data
(bytes of programs and libraries, text, seeded random bytes), and finding
which processes hold files open in a directory. Knows nothing about
individual tests.
"""
import contextlib
import ctypes
import ctypes.util
import os
import random
import shutil
import subprocess
import tempfile
import time

import pytest

from mounts import MEMFS_BIN, is_mountpoint, mounted, umount  # tests/ is on sys.path (conftest)

KIB = 1 << 10
MIB = 1 << 20
PAGE = 4096
ENOSPC_ERRNO = 28

FALLOC_FL_KEEP_SIZE = 0x01
FALLOC_FL_PUNCH_HOLE = 0x02
FALLOC_FL_ZERO_RANGE = 0x10

_libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
_libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]


def fallocate(fd, mode, offset, length):
    if _libc.fallocate(fd, mode, offset, length) < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def punch_hole(fd, offset, length):
    fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, offset, length)


def require_root_and_memfs():
    if os.geteuid() != 0:
        pytest.fail("the pager tests need root (mount, drop_caches)", pytrace=False)
    if not os.access(MEMFS_BIN, os.X_OK):
        pytest.fail(f"memfs binary {MEMFS_BIN} is missing: cargo build --release", pytrace=False)


def drop_caches():
    """Drop the kernel's clean page cache, so the next reads reach memfs."""
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def pager_stats(mnt):
    """stats/pager as {key: int}."""
    out = {}
    with open(os.path.join(mnt, ".memfs", "stats", "pager")) as f:
        for line in f:
            key, value = line.rstrip("\n").split(": ", 1)
            out[key] = int(value)
    return out


def io_stats(mnt):
    """stats/io as {key: int}: read_bytes and write_bytes count what READ and
    WRITE requests carried (page-cache hits and passthrough I/O never reach memfs)."""
    with open(os.path.join(mnt, ".memfs", "stats", "io")) as f:
        return {k: int(v) for k, v in (line.rstrip("\n").split(": ") for line in f)}


def stats_line(stats, keys=("ram_limit_bytes", "ram_bytes", "overhead_bytes", "resident_pages", "compressed_pages",
                            "compressed_bytes", "backing_pages", "hits_total", "misses_total",
                            "page_ins_total", "read_through_total", "page_outs_total", "evictions_total", "kept_total",
                            "clean_pages", "clean_reused_total",
                            "checksum_errors_total", "io_errors_total", "backing_full_total")):
    return " ".join(f"{k}={stats.get(k)}" for k in keys)


def settle(fn, ok, timeout=5.0):
    """fn()'s value once ok(value) holds, else its value after `timeout` s.

    memfs frees a deleted file when the kernel's FORGET arrives, which the
    kernel sends asynchronously; callers still assert on the value.
    """
    deadline = time.monotonic() + timeout
    value = fn()
    while not ok(value) and time.monotonic() < deadline:
        time.sleep(0.01)
        value = fn()
    return value


@contextlib.contextmanager
def scratch_dir(prefix="memfs-pager-"):
    """A fresh directory under /var/tmp (a disk file system), removed at the end."""
    path = tempfile.mkdtemp(prefix=prefix, dir="/var/tmp")
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@contextlib.contextmanager
def tmpfs_dir(size):
    """A kernel tmpfs of `size` mounted on a fresh directory; unmounted and removed at the end."""
    path = tempfile.mkdtemp(prefix="memfs-pager-tmpfs-", dir="/var/tmp")
    try:
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", path],
                       check=True, capture_output=True)
        yield path
    finally:
        umount(path)
        if not is_mountpoint(path):
            shutil.rmtree(path, ignore_errors=True)


@contextlib.contextmanager
def loop_device(size):
    """A loop block device over a fresh sparse file of `size` bytes in /var/tmp;
    detached and removed at the end."""
    if shutil.which("losetup") is None:
        pytest.fail("losetup (util-linux) is needed for the block-device backing test", pytrace=False)
    fd, image = tempfile.mkstemp(prefix="memfs-pager-loop-", dir="/var/tmp")
    dev = None
    try:
        os.ftruncate(fd, size)
        os.close(fd)
        dev = subprocess.run(["losetup", "--find", "--show", image], check=True, capture_output=True,
                             text=True).stdout.strip()
        yield dev
    finally:
        if dev:
            subprocess.run(["losetup", "--detach", dev], capture_output=True)
        os.unlink(image)


@contextlib.contextmanager
def memfs(options):
    """A memfs with these options on a fresh directory; unmounted at the end."""
    with mounted("memfs", options) as mnt:
        yield mnt


def write_all(fd, data, offset=None):
    """Write all of data (pwrite at offset, or write); return the bytes accepted
    and the errno that stopped it (0 if everything was written)."""
    view = memoryview(data)
    done = 0
    while done < len(view):
        try:
            if offset is None:
                n = os.write(fd, view[done:])
            else:
                n = os.pwrite(fd, view[done:], offset + done)
        except OSError as e:
            return done, e.errno
        if n == 0:
            return done, 0
        done += n
    return done, 0


def read_whole(path, chunk=MIB):
    out = bytearray()
    with open(path, "rb", buffering=0) as f:
        while True:
            b = f.read(chunk)
            if not b:
                return bytes(out)
            out += b


# ---------------------------------------------------------------- test data

_POOLS = {}


def binary_pool(limit=8 * MIB, per_file=256 * KIB):
    """Bytes of programs and libraries (/usr/bin, /usr/lib): compressible,
    but not trivially. The same bytes on the same machine every time."""
    # Kept per size asked: one pool for all sizes gave a later caller the
    # first caller's size.
    if (limit, per_file) not in _POOLS:
        out = bytearray()
        for top in ("/usr/bin", "/usr/lib/x86_64-linux-gnu", "/usr/lib"):
            try:
                names = sorted(os.listdir(top))
            except OSError:
                continue
            for name in names:
                p = os.path.join(top, name)
                try:
                    if not os.path.isfile(p):
                        continue
                    with open(p, "rb") as f:
                        out += f.read(per_file)
                except OSError:
                    continue
                if len(out) >= limit:
                    break
            if len(out) >= limit:
                break
        if len(out) < MIB:
            raise RuntimeError("found less than 1 MiB of files under /usr/bin and /usr/lib")
        _POOLS[(limit, per_file)] = bytes(out[:limit])
    return _POOLS[(limit, per_file)]


def text_data(limit):
    """`limit` bytes of plain text from /usr/share (copyright files, READMEs,
    licenses, perl and python sources), in a fixed order."""
    out = bytearray()
    sources = [("/usr/share/doc", ("copyright", "README", "changelog")),
               ("/usr/share/common-licenses", ("",)),
               ("/usr/share/perl", (".pm", ".pod")),
               ("/usr/lib/python3", (".py",))]
    for root, suffixes in sources:
        for d, dirs, files in os.walk(root):
            dirs.sort()
            for name in sorted(files):
                if not name.endswith(suffixes):
                    continue
                try:
                    with open(os.path.join(d, name), "rb") as f:
                        out += f.read()
                except OSError:
                    continue
                if len(out) >= limit:
                    return bytes(out[:limit])
    raise RuntimeError(f"found only {len(out)} bytes of text under /usr/share")


def mixed_bytes(rng, n):
    """n bytes made of pieces of program bytes, seeded random bytes (not
    compressible), short repeated patterns and zeros."""
    pool = binary_pool()
    out = bytearray()
    while len(out) < n:
        piece = min(n - len(out), rng.randint(1, 64 * KIB))
        kind = rng.random()
        if kind < 0.45:
            start = rng.randrange(0, len(pool) - piece)
            out += pool[start:start + piece]
        elif kind < 0.85:
            out += rng.randbytes(piece)
        elif kind < 0.95:
            pat = rng.randbytes(rng.randint(1, 32))
            out += (pat * (piece // len(pat) + 1))[:piece]
        else:
            out += bytes(piece)
    return bytes(out)


def seeded_rng(env_name):
    """A random.Random and its seed: from the environment variable if set."""
    seed = int(os.environ.get(env_name) or random.SystemRandom().randrange(1 << 32))
    return random.Random(seed), seed


# ------------------------------------------------------------- processes

def holders_of(directory):
    """{pid: [fd targets]} of processes with a file in `directory` open."""
    directory = os.path.realpath(directory).rstrip("/") + "/"
    found = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        fd_dir = f"/proc/{pid}/fd"
        try:
            fds = os.listdir(fd_dir)
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink(os.path.join(fd_dir, fd))
            except OSError:
                continue
            if target.startswith(directory):
                found.setdefault(int(pid), []).append(target)
    return found


def mounted_at(path):
    """Whether /proc/mounts lists a mount on `path`."""
    path = os.path.realpath(path)
    with open("/proc/mounts") as f:
        return any(line.split()[1] == path for line in f)
