"""What a report says about the machine, the load and the memfs build.

Owns: reading /proc (meminfo, loadavg, cpuinfo), the kernel release, the
memfs version and git commit, and the versions of the benchmark tools.
"""
import hashlib
import os
import platform
import shutil
import subprocess

from proc import BenchError, run

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def meminfo():
    """/proc/meminfo as a dict of KiB values."""
    out = {}
    with open("/proc/meminfo") as f:
        for line in f:
            key, rest = line.split(":", 1)
            out[key] = int(rest.split()[0])
    return out


def fuse_uring():
    """What memfs's default `uring=auto` takes on this machine for the
    runs that do not set `uring=` themselves: the fuse module's
    enable_uring parameter, read at the start of the run."""
    try:
        with open("/sys/module/fuse/parameters/enable_uring") as f:
            on = f.read().strip() == "Y"
    except OSError:
        return "no FUSE over io_uring in this kernel: /dev/fuse"
    return "io_uring (enable_uring is Y)" if on else "/dev/fuse (enable_uring is N)"


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def cpu_model():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.machine()


def machine():
    return {
        "cores": os.cpu_count(),
        "cpu": cpu_model(),
        "mem_total_kib": meminfo()["MemTotal"],
        "kernel": platform.release(),
        "os": _os_release(),
        "hostname": platform.node(),
    }


def _os_release():
    try:
        with open("/etc/os-release") as f:
            for line in f:
                if line.startswith("PRETTY_NAME="):
                    return line.split("=", 1)[1].strip().strip('"')
    except OSError:
        pass
    return platform.system()


def git_commit():
    """Short HEAD commit, with -dirty when the work tree has changes."""
    try:
        head = run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"], 10).stdout.decode().strip()
    except BenchError:
        return "no commit"
    dirty = run(["git", "-C", REPO, "status", "--porcelain", "--untracked-files=no"], 30,
                check=False).stdout.strip()
    return head + ("-dirty" if dirty else "")


def file_digest(path):
    """First 12 hex digits of a file's SHA-256 (identifies the exact build)."""
    try:
        with open(path, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()[:12]
    except OSError:
        return "missing"


def memfs_version(binary):
    if not os.path.exists(binary):
        return f"missing ({binary})"
    try:
        res = run([binary, "--version"], 10, check=False)
    except BenchError as e:
        return f"--version failed: {e}"
    text = (res.stdout or res.stderr).decode(errors="replace").strip()
    return text.splitlines()[0] if text else f"--version printed nothing (exit {res.returncode})"


def tool_versions():
    """First line of each external tool's version output (or 'not found')."""
    probes = {
        "postmark": None,  # prints its version as the first line of any run
        "fio": ["fio", "--version"],
        "gcc": ["gcc", "--version"],
        "sort": ["sort", "--version"],
        "cargo": ["cargo", "--version"],
        "python": None,
    }
    out = {}
    for name, cmd in probes.items():
        if name == "python":
            out[name] = platform.python_version()
            continue
        if not shutil.which(name):
            out[name] = "not found"
            continue
        if cmd is None:
            res = subprocess.run([name], input=b"quit\n", capture_output=True, timeout=10)
            out[name] = res.stdout.decode(errors="replace").split("\n")[0].strip()
            continue
        res = run(cmd, 20, check=False)
        out[name] = (res.stdout or res.stderr).decode(errors="replace").split("\n")[0].strip()
    return out
