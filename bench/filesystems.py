"""The file systems a run compares: memfs, the kernel tmpfs reference, and any
`--also DIR` directories.

Owns: mounting and unmounting them for each run (through tests/mounts.py),
a never-hanging unmount, finding the memfs daemon, and memory snapshots
(daemon RSS, kernel slab, Shmem, page cache). Knows nothing about workloads.
"""
import os
import shutil
import signal
import sys
import time

from proc import BenchError, run
from sysinfo import REPO, meminfo

sys.path.insert(0, os.path.join(REPO, "tests"))
import mounts  # noqa: E402  (shared mount helpers, read-only for the bench)

UNMOUNT_TIMEOUT = 120
GIVE_UP_AFTER = 3  # consecutive mount failures before the remaining runs are not attempted


class FileSystem:
    """One compared file system.

    name:    the label in reports ("memfs", "tmpfs", or the --also path)
    kind:    how to mount it: "memfs", "tmpfs", or "dir" (an existing
             directory we only create a scratch directory in)
    options: mount options (-o) for memfs / tmpfs
    """

    def __init__(self, name, kind, options, path):
        self.name = name
        self.kind = kind
        self.options = options
        self.path = path
        self.daemon = None  # memfs daemon pid while mounted
        self.mount_seconds = None  # how long the last mount command took
        self.mount_errors = 0  # consecutive failed mounts (GIVE_UP_AFTER stops trying)
        self.last_mount_error = None

    @property
    def managed(self):
        return self.kind != "dir"

    @property
    def is_memfs(self):
        return self.kind == "memfs"

    def describe(self):
        if self.kind == "dir":
            return f"{self.name} (existing directory, used as is)"
        return f"{self.name}: {self.kind} -o {self.options}"

    # -- mounting -----------------------------------------------------------

    def mount(self):
        """Mount fresh (managed) or create a scratch directory; returns the work dir."""
        if not self.managed:
            workdir = os.path.join(self.path, f".memfs-bench-{os.getpid()}")
            run(["mkdir", "-p", workdir], 60)
            return workdir
        if self.mount_errors >= GIVE_UP_AFTER:
            raise BenchError(f"not attempted: mounting {self.name} failed {self.mount_errors} "
                             f"times in a row (last: {self.last_mount_error})")
        if mounts.is_mountpoint(self.path):
            self.unmount()
        try:
            t0 = time.monotonic()
            mounts.mount(self.kind, self.path, self.options)
            self.mount_seconds = time.monotonic() - t0
        except Exception as e:  # CalledProcessError, TimeoutExpired, RuntimeError
            self.unmount()
            self.mount_errors += 1
            self.last_mount_error = _describe_error(e)
            raise BenchError(f"mounting {self.name} failed: {self.last_mount_error}") from None
        self.mount_errors = 0
        self.daemon = find_daemon(self.path) if self.is_memfs else None
        return self.path

    def workdir(self):
        """The work directory if a fresh mount is ready, else None."""
        if self.managed and mounts.is_mountpoint(self.path) and self.healthy():
            return self.path
        return None

    def unmount(self):
        """Unmount (managed) or remove the scratch directory; never hangs.

        Uses tests/mounts.umount in a child process with a time limit; if that
        hangs, detaches lazily and kills the memfs daemon we started. Waits
        for the memfs daemon to exit so its memory is back before the next run.
        """
        if not self.managed:
            run(["rm", "-rf", os.path.join(self.path, f".memfs-bench-{os.getpid()}")],
                UNMOUNT_TIMEOUT, check=False)
            return
        daemon = self.daemon or (find_daemon(self.path) if self.is_memfs else None)
        code = (f"import sys; sys.path.insert(0, {os.path.join(REPO, 'tests')!r}); "
                f"import mounts; mounts.umount({self.path!r})")
        try:
            run([sys.executable, "-c", code], UNMOUNT_TIMEOUT, check=False)
        except BenchError:
            run(["umount", "-l", self.path], 30, check=False)
            if daemon:
                _kill(daemon)
        if daemon and not wait_exit(daemon, 60):
            _kill(daemon)
        self.daemon = None

    def healthy(self):
        """Still mounted, daemon alive (memfs) and answering a stat in time."""
        if not self.managed:
            return True
        if not mounts.is_mountpoint(self.path):
            return False
        if self.is_memfs and self.daemon is not None and not _alive(self.daemon):
            return False
        try:
            return run(["stat", "-f", self.path], 30, check=False).returncode == 0
        except BenchError:
            return False

    # -- memory ---------------------------------------------------------------

    def memory(self):
        """Snapshot in KiB: system meminfo fields plus the memfs daemon's RSS."""
        info = meminfo()
        snap = {k: info[k] for k in ("Slab", "SReclaimable", "SUnreclaim", "Shmem", "Cached")}
        snap["RSS"] = daemon_rss(self.daemon) if self.is_memfs and self.daemon else None
        return snap


def memory_per_file(fs, before, after, files):
    """KiB per file from two snapshots.

    memfs:  daemon RSS growth + kernel slab growth (all-in).
    tmpfs:  Shmem growth (its data pages) + slab growth (inodes, dentries).
    dir:    not measurable (None).
    """
    d = {k: (after[k] - before[k]) if after[k] is not None and before[k] is not None else None
         for k in before}
    per = lambda v: None if v is None else v / files  # noqa: E731
    if fs.is_memfs:
        allin = None if d["RSS"] is None else d["RSS"] + d["Slab"]
        return {"rss": per(d["RSS"]), "slab": per(d["Slab"]), "shmem": None,
                "allin": per(allin), "rss_total_kib": after["RSS"]}
    if fs.kind == "tmpfs":
        return {"rss": None, "slab": per(d["Slab"]), "shmem": per(d["Shmem"]),
                "allin": per(d["Shmem"] + d["Slab"]), "rss_total_kib": None}
    return {"rss": None, "slab": None, "shmem": None, "allin": None, "rss_total_kib": None}


# -- the memfs daemon ---------------------------------------------------------

def find_daemon(mountpoint):
    """PID of the memfs process serving mountpoint (the daemon forks, so scan /proc)."""
    binary = os.path.realpath(mounts.MEMFS_BIN)
    target = os.path.realpath(mountpoint)
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                args = [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
        except OSError:
            continue
        if not args or os.path.basename(args[0]) != os.path.basename(binary):
            continue
        if any(os.path.realpath(a) == target for a in args[1:] if a.startswith("/")):
            return int(pid)
    return None


def daemon_rss(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def _alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1][0] != "Z"
    except OSError:
        return False


def wait_exit(pid, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.005)
    return False


def _kill(pid):
    """SIGKILL one memfs daemon we started (by PID, never by name)."""
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _describe_error(e):
    stderr = getattr(e, "stderr", None)
    if stderr:
        return f"{e}: {stderr.decode(errors='replace').strip()[-400:]}"
    return str(e)


def cleanup_base(base):
    """Remove the mount-point base directory once everything is unmounted."""
    for name in os.listdir(base) if os.path.isdir(base) else []:
        path = os.path.join(base, name)
        if not mounts.is_mountpoint(path):
            shutil.rmtree(path, ignore_errors=True)
    if os.path.isdir(base) and not os.listdir(base):
        os.rmdir(base)
