"""Mount helpers shared by every Python test and benchmark.

Owns: mounting/unmounting kernel tmpfs and memfs for tests, and running a
function as another user. Used by tests/conformance, tests/differential and
bench/. Knows nothing about individual tests.
"""
import contextlib
import os
import pickle
import subprocess
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MEMFS_BIN = os.environ.get("MEMFS_BIN", os.path.join(REPO, "target", "release", "memfs"))
# Extra memfs options for every memfs a test mounts, e.g. "threads=4,dirindex=btree",
# to run the same tables on non-default settings.
MEMFS_EXTRA_OPTIONS = os.environ.get("MEMFS_EXTRA_OPTIONS", "")

# An unprivileged identity for permission tests (exists on Debian as nobody:nogroup).
NOBODY_UID = 65534
NOBODY_GID = 65534


def is_mountpoint(path):
    path = os.path.realpath(path)
    with open("/proc/self/mountinfo") as f:
        for line in f:
            if line.split()[4] == path:
                return True
    return False


def umount(path):
    """Unmount path; retries briefly while busy, then detaches lazily."""
    for _ in range(50):
        if not is_mountpoint(path):
            return
        r = subprocess.run(["umount", path], capture_output=True)
        if r.returncode == 0:
            return
        time.sleep(0.1)
    subprocess.run(["umount", "-l", path], capture_output=True)


def mount_tmpfs(path, options="size=4G"):
    os.makedirs(path, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", path], check=True)


def mount_memfs(path, options="size=4G"):
    """Start memfs on path; memfs returns only once the mount is live."""
    os.makedirs(path, exist_ok=True)
    args = [MEMFS_BIN]
    options = ",".join(o for o in (options, MEMFS_EXTRA_OPTIONS) if o)
    if options:
        args += ["-o", options]
    args.append(path)
    subprocess.run(args, check=True, capture_output=True, timeout=30)
    if not is_mountpoint(path):
        raise RuntimeError(f"memfs returned but {path} is not a mount point")


def mount(kind, path, options="size=4G"):
    if kind == "tmpfs":
        mount_tmpfs(path, options)
    elif kind == "memfs":
        mount_memfs(path, options)
    else:
        raise ValueError(kind)


@contextlib.contextmanager
def mounted(kind, options="size=4G", base=None):
    """Context manager: a fresh mount of `kind` in a new temporary directory."""
    path = tempfile.mkdtemp(prefix=f"{kind}-", dir=base)
    os.chmod(path, 0o755)
    try:
        mount(kind, path, options)
        yield path
    finally:
        umount(path)
        with contextlib.suppress(OSError):
            os.rmdir(path)


def run_as(uid, gid, fn, *args, groups=None, **kwargs):
    """Run fn(*args, **kwargs) in a forked child with the given credentials.

    Returns fn's return value; re-raises the exception fn raised (OSError keeps
    its errno). The child never returns into the caller's code.
    """
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            os.setgroups(groups if groups is not None else [])
            os.setgid(gid)
            os.setuid(uid)
            result = ("ok", fn(*args, **kwargs))
        except BaseException as e:  # noqa: BLE001 - report everything to parent
            result = ("err", e)
        try:
            data = pickle.dumps(result)
        except Exception as e:  # unpicklable result
            data = pickle.dumps(("err", RuntimeError(repr(e))))
        with os.fdopen(w, "wb") as f:
            f.write(data)
        os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        data = f.read()
    os.waitpid(pid, 0)
    status, value = pickle.loads(data)
    if status == "err":
        raise value
    return value


def daemon_pid(mnt):
    """PID of the memfs daemon serving `mnt` (the daemon forks: scan /proc)."""
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                args = f.read().split(b"\0")
        except OSError:
            continue
        if args and args[0].endswith(b"memfs") and mnt.encode() in args:
            return int(pid)
    raise AssertionError(f"no memfs daemon for {mnt}")


@contextlib.contextmanager
def fusectl():
    """/sys/fs/fuse/connections, mounted for the test if it was not."""
    path = "/sys/fs/fuse/connections"
    mounted_here = False
    if not os.listdir(path):
        r = subprocess.run(["mount", "-t", "fusectl", "none", path], capture_output=True, text=True)
        if r.returncode != 0:
            import pytest  # only tests call this
            pytest.skip(f"cannot mount fusectl: {r.stderr.strip()}")
        mounted_here = True
    try:
        yield path
    finally:
        if mounted_here:
            subprocess.run(["umount", path], capture_output=True)
