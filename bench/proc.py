"""Subprocess helpers for the benchmark: every command runs with a timeout.

Owns: running a command in its own process group, killing that group (and
only it) on timeout, timing a command, and dropping the page cache. A failed
or timed-out command raises BenchError, so no workload can report a result
from a run that did not succeed.
"""
import os
import signal
import subprocess
import time


class BenchError(Exception):
    """A run that did not produce a result; the message says why."""


def _tail(data, limit=600):
    """The end of a command's output, led by its first "error" line if any."""
    text = (data or b"").decode(errors="replace").strip()
    errors = [line for line in text.splitlines() if line.lower().startswith("error")]
    lead = errors[0][:200] + " ... " if errors and errors[0] not in text[-limit:] else ""
    return lead + text[-limit:]


def run(cmd, timeout, check=True, **kwargs):
    """Run cmd (a list) with a timeout; returns CompletedProcess with bytes output.

    On timeout the command's whole process group is killed. A non-zero exit
    raises BenchError when check is true.
    """
    kwargs.setdefault("stdin", subprocess.DEVNULL)
    kwargs.setdefault("stdout", subprocess.PIPE)
    kwargs.setdefault("stderr", subprocess.PIPE)
    proc = subprocess.Popen(cmd, start_new_session=True, **kwargs)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_group(proc)
        raise BenchError(f"timed out after {timeout:.0f}s: {' '.join(map(str, cmd))}")
    if check and proc.returncode != 0:
        raise BenchError(f"exit {proc.returncode}: {' '.join(map(str, cmd))}: "
                         f"{_tail(err) or _tail(out)}")
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def timed(cmd, timeout, **kwargs):
    """Run cmd; return (seconds of wall time, CompletedProcess)."""
    t0 = time.monotonic()
    res = run(cmd, timeout, **kwargs)
    return time.monotonic() - t0, res


def kill_group(proc):
    """Kill the process group of a Popen we started (start_new_session=True)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    try:
        proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        pass


def drop_caches(timeout=120):
    """sync, then drop the page cache, dentries and inodes (needs root)."""
    run(["sync"], timeout)
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def file_size(path, timeout=60):
    """Size of a file inside a compared file system, without risking a hang."""
    return int(run(["stat", "-c", "%s", path], timeout).stdout)
