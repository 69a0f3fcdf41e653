"""The page arenas (core/arena.rs) and huge= (memfs only).

Owns: what the daemon's memory looks like from outside while it holds
file pages: the arena figures in stats/usage against what is stored, RSS
under a ram= ceiling against the ceiling, memory back after deletion, and
transparent huge pages with huge=always and none with huge=never, in the
daemon's arenas and in the private tmpfs of memory files. Memory use is a
behaviour here, not a timing; waits are for asynchronous frees and trims.
"""
import os
import subprocess
import time

import pytest

from mounts import MEMFS_BIN, daemon_pid  # tests/ is on sys.path (conftest)

from .helpers import MIB, binary_pool, memfs, pager_stats, require_root_and_memfs, scratch_dir, settle

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(autouse=True)
def _root_and_binary():
    require_root_and_memfs()


def usage(mnt):
    with open(os.path.join(mnt, ".memfs", "stats", "usage")) as f:
        return {k: int(v) for k, v in (line.rstrip("\n").split(": ") for line in f)}


def kib_field(path, name):
    with open(path) as f:
        for line in f:
            if line.startswith(name + ":"):
                return int(line.split()[1]) * 1024
    raise AssertionError(f"no {name} in {path}")


def rss(pid):
    return kib_field(f"/proc/{pid}/status", "VmRSS")


def thp_available():
    try:
        with open("/sys/kernel/mm/transparent_hugepage/enabled") as f:
            return "[never]" not in f.read()
    except OSError:
        return False


def advised_anon_huge(pid):
    """AnonHugePages of the daemon's mappings it asked huge pages for
    (MADV_HUGEPAGE: "hg" in VmFlags). Where transparent huge pages are
    enabled=always the kernel also gives them to mappings nobody advised
    (malloc's heap, thread stacks): those are the host's choice."""
    total, huge = 0, 0
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            if line.startswith("AnonHugePages:"):
                huge = int(line.split()[1]) * 1024
            elif line.startswith("VmFlags:"):
                if "hg" in line.split()[1:]:
                    total += huge
                huge = 0
    return total


def vmstat(*names):
    """The sum of /proc/vmstat counters (huge page allocations and
    fallbacks are counted there)."""
    total = 0
    with open("/proc/vmstat") as f:
        for line in f:
            name, value = line.split()
            if name in names:
                total += int(value)
    return total


class HugeAttempts:
    """What the kernel did with the huge pages asked of it between two
    points: how many 2 MiB pages it allocated and how many it could not
    (the host's memory too fragmented: it falls back to small pages, and
    the CI host did so once). memfs's part is to ask; whether the kernel
    can give is the host's, so a test bounds the attempts, and the huge
    bytes only when nothing fell back."""

    def __init__(self, kind):
        self.alloc = f"thp_{kind}_alloc"
        self.fallback = (f"thp_{kind}_fallback", f"thp_{kind}_fallback_charge")
        self.alloc0 = vmstat(self.alloc)
        self.fallback0 = vmstat(*self.fallback)

    def allocated(self):
        return vmstat(self.alloc) - self.alloc0

    def fell_back(self):
        return vmstat(*self.fallback) - self.fallback0

    def asked(self):
        return self.allocated() + self.fell_back()


def large_folio_bytes(stats=("shmem_alloc",)):
    """Bytes of shmem folios larger than a page allocated since boot, by
    size (hugepages-<N>kB/stats/shmem_alloc); None where the kernel does
    not count them. tmpfs instances with huge= allocate folios of any
    order up to what a write covers, not only 2 MiB pages. With
    `stats=("shmem_fallback", "shmem_fallback_charge")`, the bytes of
    those the kernel could not allocate and fell back from."""
    base = "/sys/kernel/mm/transparent_hugepage"
    total = None
    try:
        names = os.listdir(base)
    except OSError:
        return None
    for name in names:
        if not (name.startswith("hugepages-") and name.endswith("kB")):
            continue
        for stat in stats:
            try:
                with open(os.path.join(base, name, "stats", stat)) as f:
                    n = int(f.read())
            except OSError:
                continue
            total = (total or 0) + n * int(name[len("hugepages-"):-2]) * 1024
    return total


FOLIO_FALLBACK = ("shmem_fallback", "shmem_fallback_charge")


def write_small_files(mnt, n, size):
    block = os.urandom(size)
    for i in range(n):
        with open(os.path.join(mnt, f"s{i}"), "wb") as f:
            f.write(block)


def test_arena_figures_follow_the_pages_stored_and_freed():
    # uring=off here and below: the io_uring transport's ring buffers
    # become resident with the first large requests (docs/TRANSPORT.md) and
    # would be counted as the page store's memory.
    with memfs("size=1G,passthrough=off,uring=off") as mnt:
        pid = daemon_pid(mnt)
        fresh = rss(pid)
        assert usage(mnt)["arena_bytes"] == 0
        # 2,048 files of 16 KiB (four whole pages each) and 2,048 of 1 KiB
        # (one 1 KiB slot each, as small files have always been kept).
        write_small_files(mnt, 2048, 16 * 1024)
        for i in range(2048):
            with open(os.path.join(mnt, f"k{i}"), "wb") as f:
                f.write(b"k" * 1024)
        u = usage(mnt)
        assert u["arena_bytes"] == 2048 * 16 * 1024 + 2048 * 1024, u
        for i in range(2048):
            os.unlink(os.path.join(mnt, f"s{i}"))
        u = settle(lambda: usage(mnt), lambda u: u["arena_bytes"] == 2048 * 1024)
        assert u["arena_bytes"] == 2048 * 1024, u
        # The freed pages go back to the kernel (at once for whole chunks,
        # else at the idle trim): RSS ends near the fresh daemon's plus
        # what is still stored.
        left = settle(lambda: rss(pid), lambda r: r <= fresh + 16 * MIB, timeout=10)
        assert left <= fresh + 16 * MIB, (fresh, left)
        for i in range(0, 2048, 97):
            with open(os.path.join(mnt, f"k{i}"), "rb") as f:
                assert f.read() == b"k" * 1024


def test_rss_under_a_ceiling_stays_near_it():
    # Four times a 32 MiB ceiling of programs and libraries written and
    # read back (the benchmark's case 3 at a quarter of its size): pages
    # are compressed (slots of every size come and go) and written back.
    # What the pages cost beyond their bytes (their index in the heap, the
    # arenas' free space) is charged under the ceiling (overhead_bytes), so
    # the daemon's peak RSS stays near the ceiling plus the daemon before
    # the run. "Before" is after a 1 MiB file was written and deleted, so
    # that it includes the worker's request buffer (1 MiB, touched by
    # the first large write), and the peak (VmHWM) is reset there.
    #
    # The target, 1.10, is measured by the benchmark at 128 MiB
    # (docs/PAGER.md: 1.09-1.10); this run gives 1.07-1.09 (8 runs), but
    # at this small ceiling a MiB of heap or rounding is 3%, and the test
    # with a 16 MiB ceiling and 0.4 MiB of margin failed once in CI, so it
    # bounds 1.15.
    ceiling = 32 * MIB
    pool = binary_pool(limit=8 * MIB)
    with scratch_dir() as back, memfs(f"size=1G,ram=32M,backing={back},passthrough=off,uring=off") as mnt:
        pid = daemon_pid(mnt)
        with open(os.path.join(mnt, "warm"), "wb") as f:
            f.write(pool[:MIB])
        os.unlink(os.path.join(mnt, "warm"))
        base = settle(lambda: usage(mnt), lambda u: u["arena_bytes"] == 0)
        assert base["arena_bytes"] == 0, base
        time.sleep(0.5)  # chunks emptied by the deletion are unmapped at once
        before = rss(pid)
        with open(f"/proc/{pid}/clear_refs", "w") as f:
            f.write("5\n")  # VmHWM := VmRSS
        for i in range(16):
            with open(os.path.join(mnt, f"f{i}"), "wb") as f:
                f.write(pool)
        for i in (0, 15):
            with open(os.path.join(mnt, f"f{i}"), "rb") as f:
                assert f.read() == pool
        stats = pager_stats(mnt)
        assert stats["backing_pages"] > 0, stats  # the store was really used
        peak = kib_field(f"/proc/{pid}/status", "VmHWM")
        ratio = peak / (before + ceiling)
        print(f"before {before >> 10} KiB, peak {peak >> 10} KiB, "
              f"peak / (ceiling + before) = {ratio:.3f}; {usage(mnt)}")
        assert ratio <= 1.15, (before, peak, usage(mnt), stats)


def test_heap_memory_of_page_ins_and_outs_goes_back_under_a_ceiling():
    # `memfs evict` and `memfs prime` of a file three times the ceiling,
    # ten times over: every page leaves RAM and comes back through buffers
    # of the malloc heap, which malloc keeps once freed. The reclaimer
    # gives that back (trim.rs, HeapTrim); before, the daemon kept 32 MiB
    # of heap under ram=16M for good (a judge's walk: 93-118 MiB of
    # anonymous memory under ram=64M, for 47-60 MiB of pages and their
    # counted overhead). The file's resident pages are in its memory file
    # (passthrough=auto as root), outside the daemon's anonymous memory;
    # the compressed ones in its arenas, inside: the bound is the promise
    # (the ceiling and 10%) and 4 MiB for the daemon itself.
    # 48 MiB, three times the ceiling. Until binary_pool kept a pool per
    # size (2026-12-06) this wrote the 8 MiB of the suite's first caller;
    # at 48 MiB the peak was 35-39 MiB in 4 of 10 runs, over the bound of
    # then (12 MiB above the promise), until the heap stopped keeping the
    # batches' buffers (below).
    ceiling = 16 * MIB
    bound = ceiling + ceiling // 10 + 4 * MIB
    pool = binary_pool(limit=48 * MIB)
    with scratch_dir() as back, memfs(f"size=1G,ram=16M,backing={back}") as mnt:
        pid = daemon_pid(mnt)
        path = os.path.join(mnt, "f")
        with open(path, "wb") as f:
            f.write(pool)
        time.sleep(1.5)  # the write's transient buffers given back
        with open(f"/proc/{pid}/clear_refs", "w") as f:
            f.write("5\n")  # VmHWM := VmRSS
        for _ in range(10):
            for tool in ("evict", "prime"):
                subprocess.run([MEMFS_BIN, tool, path], capture_output=True, check=True)
        # Its peak too: `memfs evict` asks for 4,096 pages a call, which
        # held 16 MiB of copies and as much of store buffers at once (a
        # peak of 40 MiB here; now a call's pages go 256 at a time: 26-29).
        # The batches' buffers then came from the malloc heap and left it
        # holding 10-17 MiB between two trims (27-34 MiB peak at 48 MiB
        # written); they are mapped on their own now (daemon.rs,
        # MMAP_THRESHOLD): 23.2-23.6 MiB, bounded here 4 MiB above the
        # promise.
        peak = kib_field(f"/proc/{pid}/status", "VmHWM")
        print(f"peak {peak >> 10} KiB, bound {bound >> 10} KiB")
        assert peak <= bound + 4 * MIB, (peak, pager_stats(mnt), usage(mnt))
        anon = settle(lambda: kib_field(f"/proc/{pid}/status", "RssAnon"), lambda a: a <= bound, timeout=10)
        assert anon <= bound, (anon, pager_stats(mnt), usage(mnt))
        with open(path, "rb") as f:
            assert f.read() == pool


def test_evict_and_prime_of_a_tree_of_small_files_stay_near_the_ceiling():
    # `memfs evict` and `memfs prime` of a whole tree, 2,048 files of 32
    # KiB (64 MiB, four times the ceiling) three times over: their pages
    # are heap pages, compressed into the arenas' 64 size classes and
    # freed again by the thousand a call, faster than the reclaimer's pass
    # gave the emptied spans back (a judge's walk: the arenas held 62 MiB
    # more than their slots in use under ram=128M). Each call now trims
    # them (`Fs::trim_after_bulk_move`): peak 21-23 MiB here (over either
    # transport), 31 before. The bound is the promise (the ceiling, 10%
    # and the metadata) over the daemon as mounted, and 3 MiB.
    ceiling = 16 * MIB
    pool = binary_pool(limit=64 * MIB)
    with scratch_dir() as back, memfs(f"size=1G,ram=16M,backing={back}") as mnt:
        pid = daemon_pid(mnt)
        fresh = rss(pid)
        for d in range(8):
            os.mkdir(os.path.join(mnt, f"d{d}"))
            for i in range(256):
                k = (d * 256 + i) * 32 * 1024
                with open(os.path.join(mnt, f"d{d}", f"f{i}"), "wb") as f:
                    f.write(pool[k:k + 32 * 1024])
        time.sleep(1.5)
        with open(f"/proc/{pid}/clear_refs", "w") as f:
            f.write("5\n")  # VmHWM := VmRSS
        for _ in range(3):
            for tool in ("evict", "prime"):
                subprocess.run([MEMFS_BIN, tool, mnt], capture_output=True, check=True)
        meta = usage(mnt)["metadata_bytes"]
        peak = kib_field(f"/proc/{pid}/status", "VmHWM")
        bound = fresh + ceiling + ceiling // 10 + meta + 3 * MIB
        print(f"fresh {fresh >> 10} KiB, peak {peak >> 10} KiB, bound {bound >> 10} KiB")
        assert peak <= bound, (peak, bound, pager_stats(mnt), usage(mnt))
        for i in (0, 255):
            k = (7 * 256 + i) * 32 * 1024
            with open(os.path.join(mnt, "d7", f"f{i}"), "rb") as f:
                assert f.read() == pool[k:k + 32 * 1024]


@pytest.mark.parametrize("huge", ["never", "within_size", "always"])
def test_huge_pages_in_arenas_and_memory_files(huge):
    if huge != "never" and not thp_available():
        pytest.skip("transparent huge pages are disabled on this kernel")
    with memfs(f"size=1G,huge={huge}") as mnt:
        pid = daemon_pid(mnt)
        shmem_before = kib_field("/proc/meminfo", "ShmemHugePages")
        folios_before = large_folio_bytes()
        fallback_before = large_folio_bytes(FOLIO_FALLBACK)
        anon_asked, file_asked = HugeAttempts("fault"), HugeAttempts("file")
        # Small files (the daemon's arenas) and one large file (a memory
        # file in the private tmpfs, which takes the mount's huge=).
        write_small_files(mnt, 512, 128 * 1024)
        with open(os.path.join(mnt, "big"), "wb") as f:
            f.write(os.urandom(64 * MIB))
        anon_huge = advised_anon_huge(pid)
        shmem_huge = kib_field("/proc/meminfo", "ShmemHugePages") - shmem_before
        folios = None if folios_before is None else large_folio_bytes() - folios_before
        fell_back = 0 if fallback_before is None else large_folio_bytes(FOLIO_FALLBACK) - fallback_before
        with open(os.path.join(mnt, ".memfs", "stats", "passthrough")) as f:
            memory_files = "memory_files: 1" in f.read()
        # The arenas take huge pages only when asked for always: they are
        # shared by many small files.
        if huge == "always":
            assert_huge(anon_asked, anon_huge, 16 * MIB, "the arenas")
        else:
            assert anon_huge == 0, anon_huge
        if not memory_files:
            return
        if huge == "never":
            assert shmem_huge < 2 * MIB, shmem_huge
            assert folios is None or folios < 2 * MIB, folios
        elif huge == "always":
            if shmem_denied():
                return
            assert_huge(file_asked, file_asked.allocated() * 2 * MIB, 32 * MIB, "the memory file")
        elif folios is not None and not shmem_denied():
            # within_size: folios no larger than what each write covers (the
            # daemon writes 128 KiB at a time), never a page past the size;
            # those the kernel could not allocate (memory too fragmented)
            # count as asked for.
            if fell_back:
                assert folios + fell_back >= 32 * MIB, (folios, fell_back)
            else:
                assert folios >= 32 * MIB, folios


def shmem_denied():
    """shmem_enabled=deny makes every tmpfs ignore its huge= (an
    administrator's switch for emergencies): there is nothing to see."""
    try:
        with open("/sys/kernel/mm/transparent_hugepage/shmem_enabled") as f:
            return "[deny]" in f.read()
    except OSError:
        return True


def assert_huge(asked, huge_bytes, at_least, what):
    """The kernel was asked for huge pages for at least `at_least` bytes
    of `what`, and gave them unless it had to fall back. For memory files
    the bytes are those the kernel allocated (thp_file_alloc), not the
    growth of ShmemHugePages: a previous test's private tmpfs is freed
    from deferred work, and its huge pages leaving during the write made
    that growth 0 once."""
    pages = at_least // (2 * MIB)
    assert asked.asked() >= pages, (what, asked.allocated(), asked.fell_back())
    if asked.fell_back() == 0:
        assert huge_bytes >= at_least, (what, huge_bytes)


def test_huge_changes_live_through_remount_and_the_control_file():
    if not thp_available():
        pytest.skip("transparent huge pages are disabled on this kernel")
    with memfs("size=1G,huge=never") as mnt:
        opt = os.path.join(mnt, ".memfs", "opts", "huge")
        r = subprocess.run([MEMFS_BIN, "-o", "remount,huge=always", mnt], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        with open(opt) as f:
            assert f.read() == "always\n"
        pid = daemon_pid(mnt)
        anon_asked, file_asked = HugeAttempts("fault"), HugeAttempts("file")
        write_small_files(mnt, 512, 128 * 1024)
        with open(os.path.join(mnt, "big"), "wb") as f:
            f.write(os.urandom(64 * MIB))
        anon_huge = advised_anon_huge(pid)
        assert_huge(anon_asked, anon_huge, 16 * MIB, "new arena chunks")
        with open(os.path.join(mnt, ".memfs", "stats", "passthrough")) as f:
            if "memory_files: 1" in f.read() and not shmem_denied():
                assert_huge(file_asked, file_asked.allocated() * 2 * MIB, 32 * MIB, "the memory file")
        with pytest.raises(OSError):
            with open(opt, "w") as f:
                f.write("sometimes")
        with open(opt) as f:
            assert f.read() == "always\n", "a refused value changes nothing"
        with open(opt, "w") as f:
            f.write("never\n")
        with open(opt) as f:
            assert f.read() == "never\n"
