"""FUSE over io_uring (uring=auto|on|off, docs/TRANSPORT.md).

memfs only. Each test mounts its own memfs with uring=on and does real work
through the io_uring queues: the POSIX tables run over it too (`make
test-uring`); these tests add what is particular to the transport: that it
is in use and reported, that big payloads and many concurrent clients on
every CPU come back intact, that replies sent later from other threads
(parked ENOSPC requests) reach the ring, and that uring=on is refused where
the kernel cannot do it.

The kernel serves FUSE over io_uring only while root has written Y to
/sys/module/fuse/parameters/enable_uring; the `uring_enabled` fixture turns
it on for this module and puts the previous value back after. Tests skip,
saying why, on a kernel without the parameter.
"""
import contextlib
import errno
import hashlib
import multiprocessing
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

import pytest

from conformance.helpers import link_fd
from daemon.test_memory import rss_bytes
from mounts import MEMFS_BIN, fusectl, is_mountpoint, umount

PARAM = "/sys/module/fuse/parameters/enable_uring"
MIB = 1 << 20

pytestmark = [pytest.mark.timeout(180)]


def read_param():
    with open(PARAM) as f:
        return f.read().strip()


def write_param(value):
    with open(PARAM, "w") as f:
        f.write(value + "\n")


@pytest.fixture(scope="module")
def uring_enabled():
    """enable_uring=Y for the module's tests, the previous value after."""
    if os.geteuid() != 0:
        pytest.fail("the io_uring tests need root (mount, the enable_uring parameter)", pytrace=False)
    if not os.access(MEMFS_BIN, os.X_OK):
        pytest.fail(f"memfs binary {MEMFS_BIN} is missing: cargo build --release", pytrace=False)
    if not os.path.exists(PARAM):
        pytest.skip(f"this kernel has no FUSE over io_uring ({PARAM} is missing: it needs Linux 6.14+ "
                    f"with CONFIG_FUSE_IO_URING)")
    before = read_param()
    try:
        write_param("Y")
    except OSError as e:
        pytest.skip(f"cannot turn on {PARAM}: {e}")
    try:
        yield
    finally:
        write_param(before)


def start_memfs(path, options):
    """Run memfs with exactly these options (MEMFS_EXTRA_OPTIONS does not
    apply: these tests choose the transport). Returns the CompletedProcess."""
    return subprocess.run([MEMFS_BIN, "-o", options, path], capture_output=True, text=True, timeout=30)


@contextlib.contextmanager
def uring_mount(options="size=1G"):
    path = tempfile.mkdtemp(prefix="memfs-uring-")
    os.chmod(path, 0o755)
    try:
        r = start_memfs(path, f"uring=on,{options}")
        assert r.returncode == 0, r.stderr
        assert is_mountpoint(path)
        yield path
    finally:
        umount(path)
        with contextlib.suppress(OSError):
            os.rmdir(path)


def transport(mnt):
    with open(os.path.join(mnt, ".memfs", "stats", "transport")) as f:
        lines = f.read().splitlines()
    name = lines[0].split(": ", 1)[1]
    return name, {k: int(v) for k, v in (line.split(": ") for line in lines[1:])}


def possible_cpus():
    n = 0
    with open("/sys/devices/system/cpu/possible") as f:
        for part in f.read().strip().split(","):
            a, _, b = part.partition("-")
            n += int(b or a) - int(a) + 1
    return n


def daemon_pid(mnt):
    r = subprocess.run(["pgrep", "-f", f"^{MEMFS_BIN} -o .* {mnt}$"], capture_output=True, text=True)
    pids = [int(p) for p in r.stdout.split()]
    assert len(pids) == 1, (mnt, r.stdout)
    return pids[0]


def test_transport_is_io_uring_and_reported(uring_enabled):
    with uring_mount() as mnt:
        # The queues register after the mount is live (requests are served
        # over /dev/fuse until the kernel has them all): `io_uring_starting`
        # for the first moments.
        deadline = time.monotonic() + 5
        while (name := transport(mnt)[0]) == "io_uring_starting" and time.monotonic() < deadline:
            time.sleep(0.01)
        name, keys = transport(mnt)
        assert name == "io_uring"
        held = keys.pop("io_uring_buffer_bytes")
        for helper_key in ("awake_spins_total", "awake_crowded_total"):  # test_a_helper_keeps_a_cpu_awake_...
            keys.pop(helper_key)
        assert keys == {"io_uring": 1, "io_uring_queues": possible_cpus()}
        assert 0 <= held <= possible_cpus() * 8 * MIB, held
        out = subprocess.run([MEMFS_BIN, "stat", mnt], capture_output=True, text=True, check=True).stdout
        assert f"transport io_uring ({possible_cpus()} queues)" in out
        with open(os.path.join(mnt, ".memfs", "stats", "prometheus")) as f:
            assert re.search(r"^memfs_transport_io_uring\{[^}]*\} 1$", f.read(), re.M)
        # One thread per queue, named for it.
        pid = daemon_pid(mnt)
        names = set()
        for t in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{t}/comm") as f:
                names.add(f.read().strip())
        assert {f"fuser-uring-{q}" for q in range(possible_cpus())} <= names


def awake_helper(pid, timeout=5.0):
    """The daemon's memfs-awake helper process (fuse/awake.rs), or None. Found
    by its argv[0] (set at exec; its name follows once it has set itself up),
    waiting up to `timeout` s: at SCHED_IDLE its start-up may wait for a CPU."""
    deadline = time.monotonic() + timeout
    while True:
        for child in filter(str.isdigit, os.listdir("/proc")):
            with contextlib.suppress(OSError, IndexError, ValueError):
                with open(f"/proc/{child}/cmdline", "rb") as f:
                    argv0 = f.read().split(b"\0")[0]
                with open(f"/proc/{child}/stat") as f:
                    ppid = int(f.read().rsplit(") ", 1)[1].split()[1])
                with open(f"/proc/{child}/comm") as f:
                    named = f.read().strip() == "memfs-awake"
                if argv0 == b"memfs-awake" and ppid == pid and named:
                    return int(child)
        if time.monotonic() > deadline:
            return None
        time.sleep(0.02)


def helper_ticks(helper):
    """CPU time the helper used, in clock ticks (utime + stime)."""
    with open(f"/proc/{helper}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def helper_ran_ns(helper):
    """CPU time the helper used, in ns (schedstat's first field)."""
    with open(f"/proc/{helper}/schedstat") as f:
        return int(f.read().split()[0])


def round_trips(path, seconds):
    """A stream of lone requests (getxattr of a missing name) for `seconds`."""
    end = time.monotonic() + seconds
    n = 0
    while time.monotonic() < end:
        with contextlib.suppress(OSError):
            os.getxattr(path, "user.none")
        n += 1
    return n


def needs_two_cpus():
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("one CPU: there is no idle CPU to keep awake, and memfs starts no helper")


def test_a_helper_keeps_a_cpu_awake_while_requests_come(uring_enabled):
    """Over io_uring a helper process (memfs-awake, the daemon's child) spins
    while requests keep coming (one within `poll_us`), so that a client the
    reply wakes onto another vCPU finds it running (fuse/awake.rs). It is
    in a session of its own whose autogroup is at nice 19, at SCHED_IDLE;
    an idle mount costs nothing (it sleeps on a futex with no timeout),
    poll_us=0 turns it off, and it ends with the daemon."""
    needs_two_cpus()
    with uring_mount() as mnt:
        pid = daemon_pid(mnt)
        helper = awake_helper(pid)
        assert helper, "no memfs-awake child of the daemon"
        assert os.getsid(helper) == helper != os.getsid(pid), "not in a session of its own"
        if os.path.exists(f"/proc/{helper}/autogroup"):  # CONFIG_SCHED_AUTOGROUP
            with open(f"/proc/{helper}/autogroup") as f:
                assert f.read().split()[-1] == "19"
        assert os.sched_getscheduler(helper) == os.SCHED_IDLE
        f = os.path.join(mnt, "f")
        open(f, "w").close()
        time.sleep(0.3)
        idle = helper_ticks(helper)
        time.sleep(0.5)
        assert helper_ticks(helper) == idle, "it spun with no request"
        crowded = stat_value(mnt, "transport", "awake_crowded_total")
        round_trips(f, 1.0)
        spun = helper_ticks(helper) - idle
        # The stream's client uses one CPU at a time: another is idle and
        # the helper spins there (10 ms ticks; a second is 100).
        assert spun >= 10, spun
        assert stat_value(mnt, "transport", "awake_spins_total") >= 1
        # Its client and memfs's queue thread are both runnable at each
        # hand-off: that must not look like a crowd (it did, to a judge
        # that counted runnable tasks: 3-6 stops a second). One stop is
        # allowed: the helper's first wake-up may find both CPUs busy a
        # moment (the test's own start).
        stops = stat_value(mnt, "transport", "awake_crowded_total") - crowded
        print(f"helper: {spun} ticks of spinning in 1 s of round trips, {stops} stops for a crowd")
        assert stops <= 1, f"a lone client's stream was taken for a crowd {stops} times"
        time.sleep(0.3)
        after = helper_ticks(helper)
        time.sleep(0.5)
        assert helper_ticks(helper) == after, "it kept spinning after the requests stopped"
        with open(os.path.join(mnt, ".memfs", "opts", "poll_us"), "w") as o:
            o.write("0\n")
        round_trips(f, 1.0)
        time.sleep(0.3)
        assert helper_ticks(helper) - after <= 2, "poll_us=0 spins nothing"
    assert wait_exit(helper, timeout=5), "the helper outlived the unmount"


def test_the_helper_ends_when_the_daemon_is_killed(uring_enabled):
    """SIGKILL of the daemon (no unmount, no clean-up of its own) ends the
    helper too: it was set before exec to get SIGKILL when the daemon dies."""
    needs_two_cpus()
    with uring_mount() as mnt:
        pid = daemon_pid(mnt)
        helper = awake_helper(pid)
        assert helper, "no memfs-awake child of the daemon"
        os.kill(pid, 9)
        assert wait_exit(pid, timeout=5)
        # At once: the kernel's SIGKILL, not a check of its own a while later.
        assert wait_exit(helper, timeout=0.5), "the helper outlived the daemon"


def test_the_helper_stops_while_other_processes_want_every_cpu(uring_enabled):
    """With a CPU-bound process per CPU (in sessions of their own, as other
    users' jobs are) no CPU is idle: the helper must take next to no CPU
    time from them. At nice 19 it may hardly run at all; once it has run at
    all, it must have found that it waited for a CPU, stopped and backed
    off (stats/transport awake_crowded_total). A helper at nice 19 with no
    such judge, spinning on, ran 70 ms in 3 s beside two such processes;
    judging only while it spun, 30-35 ms in 2 s; judging its wait after
    each wake-up too, 1-9 ms (measured)."""
    needs_two_cpus()
    with uring_mount() as mnt:
        helper = awake_helper(daemon_pid(mnt))
        assert helper, "no memfs-awake child of the daemon"
        f = os.path.join(mnt, "f")
        open(f, "w").close()
        crowded = stat_value(mnt, "transport", "awake_crowded_total")
        hogs = [subprocess.Popen([sys.executable, "-c", "import time\nend = time.monotonic() + 4\n"
                                  "while time.monotonic() < end: pass"], start_new_session=True)
                for _ in os.sched_getaffinity(0)]
        try:
            time.sleep(0.3)
            ran = helper_ran_ns(helper)
            round_trips(f, 2.0)
            ran = (helper_ran_ns(helper) - ran) / 1e6
            now_crowded = stat_value(mnt, "transport", "awake_crowded_total")
        finally:
            for h in hogs:
                h.kill()
                h.wait()
        print(f"helper ran {ran:.1f} ms in 2 s beside CPU-bound processes; stopped for them {now_crowded - crowded} times")
        assert ran < 20, f"the helper ran {ran:.1f} ms in 2 s beside CPU-bound processes"
        if ran > 3:
            assert now_crowded > crowded, f"the helper ran {ran:.1f} ms and never found the machine crowded"


def test_create_write_read_rename_unlink(uring_enabled):
    with uring_mount() as mnt:
        a, b = os.path.join(mnt, "a"), os.path.join(mnt, "b")
        with open(a, "wb") as f:
            f.write(b"hello over io_uring\n")
        with open(a, "rb") as f:
            assert f.read() == b"hello over io_uring\n"
        os.mkdir(os.path.join(mnt, "d"))
        os.rename(a, os.path.join(mnt, "d", "a2"))
        os.rename(os.path.join(mnt, "d", "a2"), b)
        assert os.stat(b).st_size == 20
        os.truncate(b, 5)
        with open(b, "rb") as f:
            assert f.read() == b"hello"
        os.symlink("b", os.path.join(mnt, "s"))
        assert os.readlink(os.path.join(mnt, "s")) == "b"
        os.link(b, os.path.join(mnt, "h"))
        assert os.stat(b).st_nlink == 2
        for n in ("b", "h", "s"):
            os.unlink(os.path.join(mnt, n))
        os.rmdir(os.path.join(mnt, "d"))
        assert sorted(os.listdir(mnt)) == []
        with pytest.raises(FileNotFoundError):
            os.stat(b)


def test_big_file_reads_back_by_checksum(uring_enabled):
    """Payloads of the largest requests (1 MiB writes and reads) through the
    ring entries, read back after the page cache is dropped."""
    with uring_mount() as mnt:
        path = os.path.join(mnt, "big")
        h = hashlib.sha256()
        block = bytearray(os.urandom(MIB))
        with open(path, "wb") as f:
            for i in range(96):
                block[:8] = i.to_bytes(8, "little")
                h.update(block)
                f.write(block)
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        r = hashlib.sha256()
        with open(path, "rb", buffering=0) as f:
            while chunk := f.read(3 * MIB + 4096):
                r.update(chunk)
        assert r.hexdigest() == h.hexdigest()
        # A read at an odd offset inside a block.
        with open(path, "rb") as f:
            f.seek(95 * MIB + 17)
            assert f.read(8) == bytes(block[17:25])


def test_idle_queues_give_their_buffers_back(uring_enabled):
    """After large requests from every CPU, each queue, once idle for a
    second, gives the pages of its entries' 1 MiB payload buffers and of its
    reassembly buffer back to the kernel (vendor/fuser uring.rs,
    `trim_idle`): with the files deleted, the daemon's RSS is back near a
    fresh mount's. Before, every CPU kept up to 8 x 1 MiB + 1 MiB resident
    for the life of the mount (5-6 MiB more than fresh here, on 2 CPUs)."""
    with uring_mount("size=1G,passthrough=off") as mnt:
        pid = daemon_pid(mnt)
        time.sleep(1.5)  # any trim after the mount's first requests
        fresh = rss_bytes(pid)
        cpus = sorted(os.sched_getaffinity(0))
        names = [os.path.join(mnt, f"big{i}") for i in range(2 * len(cpus))]
        # 32 MiB a file on up to 8 CPUs; less on more, so that all of it
        # fits the mount's 1 GiB (512 MiB of files).
        mb = max(1, min(32, 512 // len(names)))

        def on_each_cpu(argv):
            procs = [subprocess.Popen(["taskset", "-c", str(cpus[i % len(cpus)]), *argv(p)])
                     for i, p in enumerate(names)]
            assert all(p.wait(timeout=120) == 0 for p in procs)

        # 1 MiB writes and 4 MiB reads (several READs in flight per reader:
        # the kernel's readahead), two clients per CPU, through the daemon.
        on_each_cpu(lambda p: ["dd", "if=/dev/zero", f"of={p}", "bs=1M", f"count={mb}", "status=none"])
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        on_each_cpu(lambda p: ["dd", f"if={p}", "of=/dev/null", "bs=4M", "status=none"])
        busy = rss_bytes(pid)
        assert busy > fresh + mb * MIB * len(names) // 2, (fresh, busy)  # the data was in the daemon
        for p in names:
            os.unlink(p)
        deadline = time.monotonic() + 30
        while rss_bytes(pid) > fresh + 2 * MIB and time.monotonic() < deadline:
            time.sleep(0.5)
        assert rss_bytes(pid) <= fresh + 2 * MIB, (fresh, busy, rss_bytes(pid))


def stat_value(mnt, name, key):
    with open(os.path.join(mnt, ".memfs", "stats", name)) as f:
        return int(re.search(rf"^{key}: (\d+)$", f.read(), re.M).group(1))


def test_queue_buffers_count_under_the_ceiling_and_go_back_while_stats_are_read(uring_enabled):
    """Under ram= the pages of the queues' payload buffers that large
    requests touched count with the pager's overhead_bytes, and a queue
    gives them back a second after its last large request even while
    small requests keep coming to it (a judge's walk: `memfs stat
    --watch`, a read a second, kept every queue from a whole idle second,
    and 8 MiB a CPU stayed resident, counted nowhere, under ram=128M)."""
    cpu = min(os.sched_getaffinity(0))
    was = os.sched_getaffinity(0)
    with tempfile.TemporaryDirectory(dir="/var/tmp") as store, \
            uring_mount(f"size=256M,ram=64M,backing={store},passthrough=off") as mnt:
        # Everything from one CPU: the writer's and the readers' requests
        # reach the same queue.
        os.sched_setaffinity(0, {cpu})
        try:
            time.sleep(1.5)  # any trim after the mount's first requests
            before = stat_value(mnt, "pager", "overhead_bytes")
            subprocess.run(["dd", "if=/dev/zero", f"of={mnt}/f", "bs=1M", "count=8", "status=none"], check=True)
            held = stat_value(mnt, "transport", "io_uring_buffer_bytes")
            after = stat_value(mnt, "pager", "overhead_bytes")
            assert held >= MIB, held  # at least one entry's 1 MiB WRITE
            assert after - before >= held, (before, after, held)  # counted under the ceiling
            # A small request to that queue every 0.2 s for 4 s: never a whole idle second.
            low = held
            for _ in range(20):
                time.sleep(0.2)
                low = min(low, stat_value(mnt, "transport", "io_uring_buffer_bytes"))
            assert low < MIB, (held, low)
        finally:
            os.sched_setaffinity(0, was)


def _worker(args):
    mnt, n, files = args
    d = os.path.join(mnt, f"w{n}")
    os.mkdir(d)
    for i in range(files):
        p = os.path.join(d, f"f{i}")
        data = f"{n}:{i}:".encode() * (1 + i % 50)
        with open(p, "wb") as f:
            f.write(data)
        with open(p, "rb") as f:
            if f.read() != data:
                return f"mismatch {p}"
        os.setxattr(p, "user.n", str(i).encode())
        if i % 3 == 0:
            os.rename(p, p + ".r")
    names = sorted(os.listdir(d))
    if len(names) != files:
        return f"{d}: {len(names)} entries"
    for name in names:
        os.unlink(os.path.join(d, name))
    os.rmdir(d)
    return None


def test_many_concurrent_processes(uring_enabled):
    """Clients on every CPU at once: requests land on every queue."""
    with uring_mount() as mnt:
        with multiprocessing.get_context("fork").Pool(16) as pool:
            results = pool.map(_worker, [(mnt, n, 300) for n in range(32)])
        assert results == [None] * 32
        assert os.listdir(mnt) == []


def test_parked_enospc_replies_from_other_threads(uring_enabled):
    """A write that needs the space of a file just deleted is parked until
    the FORGET (over /dev/fuse) frees it, then answered from that thread; one
    that can never fit gets ENOSPC from the expiry thread after the grace
    period. Both replies are committed to the ring by the queue's own
    thread, woken through its eventfd."""
    with uring_mount("size=1M") as mnt:
        failures = []
        for i in range(40):
            p = os.path.join(mnt, f"f{i}")
            try:
                with open(p, "wb") as f:
                    f.write(b"x" * MIB)
            except OSError as e:
                # The space comes back when the kernel's FORGET arrives (on
                # the /dev/fuse thread, while the write runs on a queue
                # thread: parked.rs handles that race). On a very loaded
                # machine the FORGET can still come after the 20 ms grace,
                # as on /dev/fuse: then ENOSPC, never another error or a
                # hang. Before the race was handled, 5 to 8 of the 40 failed.
                assert e.errno == errno.ENOSPC
                failures.append(i)
            os.unlink(p)
        assert len(failures) <= 2, failures
        # Held by an open descriptor: the space never comes back, so the
        # parked write is answered ENOSPC by the expiry thread.
        held = os.path.join(mnt, "held")
        fd = os.open(held, os.O_CREAT | os.O_RDWR, 0o644)
        try:
            os.write(fd, b"h" * (768 * 1024))
            os.unlink(held)
            other = os.open(os.path.join(mnt, "other"), os.O_CREAT | os.O_WRONLY, 0o644)
            try:
                t = time.monotonic()
                with pytest.raises(OSError) as e:
                    for _ in range(8):
                        os.write(other, b"o" * (128 * 1024))
                        os.fsync(other)
                assert e.value.errno == errno.ENOSPC
                assert time.monotonic() - t < 10
            finally:
                os.close(other)
            assert os.pread(fd, 4, 0) == b"hhhh"
        finally:
            os.close(fd)


def test_parked_enospc_waits_for_a_deleted_memory_files_pages(uring_enabled):
    """xfstests generic/213 over io_uring: fallocate most of the free space
    in a new file, delete it, do it again. The deleted file's bytes are in
    a memory file that the kernel holds until the last passthrough open's
    RELEASE (which can be handled after the FORGET: they come on different
    threads) and lets go of a few milliseconds after that, from deferred
    work; a fallocate in that window must wait for the space, as on tmpfs
    it never fails. Before: 21 of 160 such fallocates failed (1 GiB each)."""
    with uring_mount("size=512M,passthrough=on") as mnt:
        with open(os.path.join(mnt, "filler"), "wb") as f:
            f.write(b"f" * (160 * MIB))
        failures = []
        for i in range(60):
            p = os.path.join(mnt, "ouch")
            fd = os.open(p, os.O_CREAT | os.O_RDWR, 0o644)
            try:
                os.posix_fallocate(fd, 0, 256 * MIB)
                os.ftruncate(fd, [100, 256 * MIB, 512 * MIB][i % 3])
            except OSError as e:
                assert e.errno == errno.ENOSPC, e
                failures.append(i)
            finally:
                os.close(fd)
            os.unlink(p)
        assert failures == [], f"fallocate failed on space on its way back, rounds {failures}"


def test_clients_killed_in_the_middle_of_requests(uring_enabled):
    """Writers killed while their requests are parked (ENOSPC, answered
    later from another thread) or being served: the mount goes on."""
    with uring_mount("size=2M") as mnt:
        held = os.path.join(mnt, "held")
        fd = os.open(held, os.O_CREAT | os.O_RDWR, 0o644)
        try:
            os.write(fd, b"h" * (1536 * 1024))
            os.unlink(held)  # still open: its space stays taken
            for i in range(20):
                child = subprocess.Popen(["dd", "if=/dev/zero", f"of={mnt}/w{i}", "bs=256k", "count=4"],
                                         stderr=subprocess.DEVNULL)
                time.sleep(0.002 * (i % 5))
                child.kill()
                child.wait()
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(os.path.join(mnt, f"w{i}"))
            assert os.pread(fd, 4, 0) == b"hhhh"
        finally:
            os.close(fd)
        p = os.path.join(mnt, "after")
        with open(p, "wb") as f:
            f.write(b"a" * MIB)
        with open(p, "rb") as f:
            assert f.read() == b"a" * MIB


def test_o_tmpfile(uring_enabled):
    with uring_mount() as mnt:
        fd = os.open(mnt, os.O_TMPFILE | os.O_RDWR, 0o600)
        try:
            os.write(fd, b"anonymous")
            assert os.pread(fd, 9, 0) == b"anonymous"
            assert os.listdir(mnt) == []
            link_fd(fd, os.path.join(mnt, "named"))
        finally:
            os.close(fd)
        with open(os.path.join(mnt, "named"), "rb") as f:
            assert f.read() == b"anonymous"


def test_xattrs(uring_enabled):
    with uring_mount() as mnt:
        p = os.path.join(mnt, "x")
        open(p, "w").close()
        big = os.urandom(60000)
        os.setxattr(p, "user.small", b"v")
        os.setxattr(p, "user.big", big)
        assert os.getxattr(p, "user.small") == b"v"
        assert os.getxattr(p, "user.big") == big
        assert sorted(os.listxattr(p)) == ["user.big", "user.small"]
        os.removexattr(p, "user.small")
        with pytest.raises(OSError) as e:
            os.getxattr(p, "user.small")
        assert e.value.errno == errno.ENODATA
        with pytest.raises(OSError) as e:
            os.setxattr(p, "user.big", b"w", os.XATTR_CREATE)
        assert e.value.errno == errno.EEXIST


def test_readdir_of_many_entries(uring_enabled):
    with uring_mount() as mnt:
        d = os.path.join(mnt, "many")
        os.mkdir(d)
        names = [f"entry-{i:05d}-" + "n" * (i % 200) for i in range(5000)]
        for n in names:
            os.close(os.open(os.path.join(d, n), os.O_CREAT | os.O_WRONLY, 0o644))
        assert sorted(os.listdir(d)) == sorted(names)
        # readdirplus: names with their attributes.
        sizes = {e.name: e.stat().st_size for e in os.scandir(d)}
        assert len(sizes) == 5000 and set(sizes.values()) == {0}


def test_daemon_exits_on_unmount(uring_enabled):
    """Unmount ends every queue thread and the daemon."""
    path = tempfile.mkdtemp(prefix="memfs-uring-")
    try:
        r = start_memfs(path, "uring=on,size=64M")
        assert r.returncode == 0, r.stderr
        pid = daemon_pid(path)
        with open(os.path.join(path, "f"), "wb") as f:
            f.write(b"x" * MIB)
        subprocess.run(["umount", path], check=True)
        deadline = time.monotonic() + 10
        while os.path.exists(f"/proc/{pid}") and time.monotonic() < deadline:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)
            time.sleep(0.05)
        with open(f"/proc/{pid}/stat") if os.path.exists(f"/proc/{pid}") else contextlib.nullcontext() as f:
            assert f is None or f.read().split()[2] == "Z", "the daemon is still running after umount"
    finally:
        umount(path)
        with contextlib.suppress(OSError):
            os.rmdir(path)


def wait_exit(pid, timeout=10):
    """Whether process `pid` (not our child) ended within `timeout` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().split(") ")[1].split()[0] in "ZX":
                    return True
        except FileNotFoundError:
            return True
        time.sleep(0.05)
    return False


def test_abort_with_requests_in_flight_ends_the_daemon(uring_enabled):
    """Writing `abort` for the connection while a writer keeps requests on
    the queues: every queue thread and the daemon end."""
    path = tempfile.mkdtemp(prefix="memfs-uring-")
    writer = None
    try:
        r = start_memfs(path, "uring=on,size=256M")
        assert r.returncode == 0, r.stderr
        pid = daemon_pid(path)
        writer = subprocess.Popen(["sh", "-c", f"while :; do dd if=/dev/zero of={path}/f bs=64k count=64 "
                                   f"status=none; rm -f {path}/f; done"], stderr=subprocess.DEVNULL)
        time.sleep(0.3)
        with fusectl() as ctl:
            # The connection's name is the mount's anonymous device number.
            with open(os.path.join(ctl, str(os.minor(os.stat(path).st_dev)), "abort"), "w") as f:
                f.write("1")
            assert wait_exit(pid), "the daemon is still running after abort"
            # The daemon detaches its dead mount as it ends (it stayed,
            # answering ENOTCONN, until a tester unmounted it by hand).
            assert not is_mountpoint(path), "the aborted mount is still in place"
    finally:
        if writer:
            writer.kill()
            writer.wait()
        umount(path)
        # The writer went on in the bare directory once the mount was gone.
        if not is_mountpoint(path):
            shutil.rmtree(path, ignore_errors=True)


def test_lazy_umount_with_open_files(uring_enabled):
    """umount -l while a file is open: the open file keeps working through
    the queues; the daemon ends once it is closed."""
    path = tempfile.mkdtemp(prefix="memfs-uring-")
    try:
        r = start_memfs(path, "uring=on,size=64M")
        assert r.returncode == 0, r.stderr
        pid = daemon_pid(path)
        fd = os.open(os.path.join(path, "open"), os.O_CREAT | os.O_RDWR, 0o644)
        try:
            subprocess.run(["umount", "-l", path], check=True)
            assert not is_mountpoint(path)
            os.pwrite(fd, b"still here", 0)
            os.fsync(fd)
            assert os.pread(fd, 10, 0) == b"still here"
            assert not wait_exit(pid, timeout=0.3)
        finally:
            os.close(fd)
        assert wait_exit(pid), "the daemon is still running after the last file closed"
    finally:
        umount(path)
        with contextlib.suppress(OSError):
            os.rmdir(path)


def test_uring_on_refused_when_the_kernel_has_it_off(uring_enabled):
    """enable_uring=N: uring=on fails the mount, saying how to turn it on;
    uring=auto mounts over /dev/fuse."""
    path = tempfile.mkdtemp(prefix="memfs-uring-")
    write_param("N")
    try:
        r = start_memfs(path, "uring=on")
        assert r.returncode != 0
        assert "enable_uring" in r.stderr and "echo Y" in r.stderr, r.stderr
        assert not is_mountpoint(path)
        r = start_memfs(path, "uring=auto")
        assert r.returncode == 0, r.stderr
        assert transport(path) == ("dev_fuse", {"io_uring": 0, "io_uring_queues": 0, "io_uring_buffer_bytes": 0,
                                                "awake_spins_total": 0, "awake_crowded_total": 0})
    finally:
        write_param("Y")
        umount(path)
        with contextlib.suppress(OSError):
            os.rmdir(path)


def test_uring_off_uses_dev_fuse(uring_enabled):
    path = tempfile.mkdtemp(prefix="memfs-uring-")
    try:
        r = start_memfs(path, "uring=off")
        assert r.returncode == 0, r.stderr
        assert transport(path)[0] == "dev_fuse"
        with open(os.path.join(path, "f"), "wb") as f:
            f.write(b"dev")
    finally:
        umount(path)
        with contextlib.suppress(OSError):
            os.rmdir(path)
