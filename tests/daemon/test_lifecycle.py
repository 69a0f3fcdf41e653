"""The memfs process: start-up, exit, stacked mounts, the mount(8) helper.

Owns: what a user sees of the daemon as a program (memfs only; tmpfs has no
process). Covers: `memfs` returns once the mount is live and a bad option
fails with a message and no mount; `umount` ends the daemon; a memfs
mounted over another file system, once unmounted, leaves that one mounted
with its files (a fuser bug unmounted both, vendor/PATCHES.md); `-f` stays
in the foreground and unmounts on SIGTERM; called as mount.memfs /
mount.fuse.memfs (what mount(8) runs) it mounts, takes the source as the
name, and reads a remount's options as the whole merged set, clearing the
flags the set no longer names; the daemon raises its soft limit of open
files to the hard one (its memory files are descriptors).
"""
import contextlib
import os
import select
import signal
import subprocess
import tempfile
import time

import pytest

from mounts import MEMFS_BIN, fusectl, is_mountpoint, mount_tmpfs, umount


def daemon_pids(mnt):
    pids = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                args = f.read().split(b"\0")
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    continue  # exited, not yet reaped by its parent
        except OSError:
            continue
        if mnt.encode() in args and any(a.endswith(b"memfs") for a in args[:1]):
            pids.append(int(pid))
    return pids


def wait_for(predicate, timeout=10.0):
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


@pytest.fixture
def mnt():
    path = tempfile.mkdtemp(prefix="memfs-life-")
    yield path
    for _ in range(3):  # stacked mounts: peel every layer
        umount(path)
    with contextlib.suppress(OSError):
        os.rmdir(path)


def stderr_until(proc, text, timeout=30.0):
    """What proc wrote to stderr until `text` appeared (or EOF, or `timeout`)."""
    fd, got = proc.stderr.fileno(), b""
    deadline = time.monotonic() + timeout
    while text.encode() not in got:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            break
        chunk = os.read(fd, 4096)
        if not chunk:
            break
        got += chunk
    return got.decode(errors="replace")


def topmost(path):
    """(fstype, source, superblock options) of the topmost mount at path."""
    with open("/proc/self/mountinfo") as f:
        lines = [line for line in f if line.split()[4] == os.path.realpath(path)]
    assert lines, f"nothing mounted at {path}"
    return tuple(lines[-1].split(" - ")[1].split()[:3])


def test_returns_live_and_umount_ends_the_daemon(mnt):
    subprocess.run([MEMFS_BIN, "-o", "size=16M", mnt], check=True, timeout=30)
    assert is_mountpoint(mnt)
    with open(os.path.join(mnt, "f"), "w") as f:  # usable on the next line
        f.write("x")
    pids = daemon_pids(mnt)
    assert len(pids) == 1
    subprocess.run(["umount", mnt], check=True)
    assert wait_for(lambda: not daemon_pids(mnt)), "daemon still running after umount"


def test_bad_option_fails_with_a_message_and_no_mount(mnt):
    r = subprocess.run([MEMFS_BIN, "-o", "size=lots", mnt], capture_output=True, text=True, timeout=30)
    assert r.returncode != 0 and "size=lots" in r.stderr
    assert not is_mountpoint(mnt)


@pytest.mark.parametrize("lower", ["tmpfs", "memfs"])
def test_umount_of_a_stacked_memfs_leaves_the_one_below(mnt, lower):
    if lower == "tmpfs":
        mount_tmpfs(mnt, "size=16M")
    else:
        subprocess.run([MEMFS_BIN, "-o", "size=16M", mnt], check=True, timeout=30)
    with open(os.path.join(mnt, "below"), "w") as f:
        f.write("keep me")
    subprocess.run([MEMFS_BIN, "-o", "size=16M", mnt], check=True, timeout=30)
    assert not os.path.exists(os.path.join(mnt, "below"))  # covered by the new one
    daemons = len(daemon_pids(mnt))  # the upper one, and the lower if a memfs
    subprocess.run(["umount", mnt], check=True)
    assert wait_for(lambda: len(daemon_pids(mnt)) == daemons - 1)
    time.sleep(0.3)  # the bug unmounted the lower one a moment after the upper
    assert is_mountpoint(mnt)
    with open(os.path.join(mnt, "below")) as f:
        assert f.read() == "keep me"


def test_foreground_unmounts_on_sigterm(mnt):
    proc = subprocess.Popen([MEMFS_BIN, "-f", "-o", "size=16M", mnt],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        assert wait_for(lambda: is_mountpoint(mnt)), "never mounted"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
        assert not is_mountpoint(mnt)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_foreground_sigterm_while_busy_then_again(mnt):
    """A stop signal while a file is open cannot unmount (EBUSY): memfs
    says so and keeps serving, and the next signal, once the file is
    closed, unmounts. Before, the first signal's failure left every later
    one pending for good."""
    proc = subprocess.Popen([MEMFS_BIN, "-f", "-o", "size=16M", mnt],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        assert wait_for(lambda: is_mountpoint(mnt)), "never mounted"
        fd = os.open(os.path.join(mnt, "open"), os.O_CREAT | os.O_WRONLY, 0o644)
        try:
            proc.send_signal(signal.SIGTERM)
            # The signal thread's answer, however long it takes to run.
            said = stderr_until(proc, "not unmounted")
            assert "not unmounted" in said, said
            assert proc.poll() is None and is_mountpoint(mnt), "unmounted under an open file"
            assert os.write(fd, b"still served") == 12
        finally:
            os.close(fd)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
        assert not is_mountpoint(mnt)
        assert "not unmounted" in said + proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        umount(mnt)


def test_an_aborted_connection_leaves_no_dead_mount(mnt):
    """/sys/fs/fuse/connections/N/abort ends the daemon; the mount it
    leaves answers ENOTCONN until unmounted, so the daemon detaches it as
    it ends (it stayed before)."""
    subprocess.run([MEMFS_BIN, "-o", "size=16M", mnt], check=True, timeout=30)
    with open(os.path.join(mnt, "f"), "w") as f:
        f.write("x")
    conn = str(os.minor(os.stat(mnt).st_dev))
    with fusectl() as ctl:
        with open(os.path.join(ctl, conn, "abort"), "w") as f:
            f.write("1")
    try:
        assert wait_for(lambda: not is_mountpoint(mnt)), "the aborted mount is still in place"
    finally:
        umount(mnt)


@pytest.fixture
def helper(tmp_path):
    """Path of a `mount.fuse.memfs` that is the built binary (as `make install` links it)."""
    link = tmp_path / "mount.fuse.memfs"
    link.symlink_to(MEMFS_BIN)
    return str(link)


def test_mount_helper_mounts_under_the_source_name(mnt, helper):
    subprocess.run([helper, "scratch", mnt, "-o", "size=16M,mode=1777"], check=True, timeout=30)
    assert topmost(mnt)[:2] == ("fuse.memfs", "scratch")
    assert os.stat(mnt).st_mode & 0o7777 == 0o1777


def test_remount_through_the_helper_takes_the_whole_set(mnt, helper):
    subprocess.run([MEMFS_BIN, "-o", "size=16M,nosuid,noexec", mnt], check=True, timeout=30)
    flags = os.statvfs(mnt).f_flag
    assert flags & os.ST_NOSUID and flags & os.ST_NOEXEC
    # What mount(8) passes after `mount -o remount,suid,exec`: no nosuid, no noexec.
    merged = "rw,relatime,remount,user_id=0,group_id=0,default_permissions,allow_other"
    subprocess.run([helper, "memfs", mnt, "-o", merged], check=True, timeout=30)
    assert not os.statvfs(mnt).f_flag & (os.ST_NOSUID | os.ST_NOEXEC)
    # And after `mount -o remount,size=32M` on a nosuid mount: nosuid is in the set.
    subprocess.run([MEMFS_BIN, "-o", "remount,nosuid", mnt], check=True, timeout=30)
    subprocess.run([helper, "memfs", mnt, "-o", "rw,nosuid,relatime,remount,size=32M"], check=True, timeout=30)
    st = os.statvfs(mnt)
    assert st.f_flag & os.ST_NOSUID and st.f_blocks == 32 * 256


def test_remount_refuses_a_file_system_stacked_on_a_memfs(mnt):
    subprocess.run([MEMFS_BIN, "-o", "size=16M", mnt], check=True, timeout=30)
    mount_tmpfs(mnt, "size=16M")
    r = subprocess.run([MEMFS_BIN, "-o", "remount,ro", mnt], capture_output=True, text=True, timeout=30)
    assert r.returncode != 0 and "not the mount point of a memfs" in r.stderr
    assert not os.statvfs(mnt).f_flag & os.ST_RDONLY  # the tmpfs on top is untouched


def test_fstab_remount_of_a_read_only_mount_with_the_same_size(mnt, helper):
    subprocess.run([MEMFS_BIN, "-o", "size=200M", mnt], check=True, timeout=30)
    ctl = os.path.join(mnt, ".memfs", "opts")
    subprocess.run([helper, "memfs", mnt, "-o", "ro,remount,size=200M,mode=1777"], check=True, timeout=30)
    assert os.statvfs(mnt).f_flag & os.ST_RDONLY
    with open(os.path.join(ctl, "noatime")) as f:
        assert f.read() == "1\n"  # no access times on a read-only mount, as the kernel
    # mount(8) passes fstab's options on every remount: the same size, spelled 200M.
    subprocess.run([helper, "memfs", mnt, "-o", "ro,remount,size=200M,mode=1777,noexec"], check=True, timeout=30)
    assert os.statvfs(mnt).f_flag & os.ST_NOEXEC
    subprocess.run([helper, "memfs", mnt, "-o", "rw,relatime,remount,size=200M"], check=True, timeout=30)
    with open(os.path.join(ctl, "noatime")) as f:
        assert f.read() == "0\n"
    r = subprocess.run([MEMFS_BIN, "-o", "remount,nr_inodes=0", mnt], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr  # lifting a limit is fine
    r = subprocess.run([MEMFS_BIN, "-o", "remount,nr_inodes=100", mnt], capture_output=True, text=True, timeout=30)
    assert r.returncode != 0 and "without a limit" in r.stderr  # as tmpfs: no retroactive limit


def test_a_flag_remount_keeps_lazytime(mnt):
    # statvfs has no bit for lazytime: remount reads it from mountinfo.
    subprocess.run([MEMFS_BIN, "-o", "size=16M", mnt], check=True, timeout=30)
    subprocess.run([MEMFS_BIN, "-o", "remount,lazytime", mnt], check=True, timeout=30)
    subprocess.run([MEMFS_BIN, "-o", "remount,nosuid", mnt], check=True, timeout=30)
    assert "lazytime" in topmost(mnt)[2].split(",")
    assert os.statvfs(mnt).f_flag & os.ST_NOSUID


def test_the_daemon_raises_its_soft_limit_of_open_files_to_the_hard_one(mnt):
    # Every large file is a memory file the daemon holds open
    # (docs/PASSTHROUGH.md); started from a shell whose soft limit is 1024,
    # it could hold about a thousand before new large files stayed in its
    # heap, held twice. It takes what the hard limit allows.
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard <= 256:
        pytest.skip(f"the hard limit of open files is {hard}: nothing to raise to")

    def low_soft_limit():
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))

    subprocess.run([MEMFS_BIN, mnt], check=True, capture_output=True, timeout=30, preexec_fn=low_soft_limit)
    (pid,) = daemon_pids(mnt)
    with open(f"/proc/{pid}/limits") as f:
        line = next(line for line in f if line.startswith("Max open files"))
    got_soft, got_hard = line.split()[3:5]
    assert got_soft == got_hard, line
