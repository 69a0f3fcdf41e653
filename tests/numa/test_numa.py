"""NUMA placement (issue 10): mpol=, opts/mpol and nodemask, stats/pagestat,
memfs migrate, on the machine's real nodes.

memfs only (tmpfs cannot say where its pages are). On a one-node machine
every policy can only name node 0: these tests check that each form mounts
and is applied (the daemon's /proc/PID/numa_maps shows the policy on its
page arenas), that nodes that do not exist are refused, and that pagestat
counts exactly the pages of data written, as the kernel places them.
Where the machine has two nodes with memory, the placement test checks
real placement too. The decisions for several nodes are unit-tested with
an injected topology (src/core/numa.rs).
"""
import os
import re
import subprocess

import pytest

from mounts import MEMFS_BIN, daemon_pid, mounted
from pager.helpers import require_root_and_memfs, settle

pytestmark = [pytest.mark.timeout(180), pytest.mark.usefixtures("root_and_memfs")]
PAGE = 4096


@pytest.fixture
def root_and_memfs():
    require_root_and_memfs()


def sys_nodes(name):
    try:
        text = open(f"/sys/devices/system/node/{name}").read().strip()
    except OSError:
        return [0]
    nodes = []
    for part in text.split(","):
        a, _, b = part.partition("-")
        nodes.extend(range(int(a), int(b or a) + 1))
    return nodes


MEMORY_NODES = sys_nodes("has_memory")
MISSING = max(sys_nodes("possible")) + 1


def ctl(mnt, *path):
    return os.path.join(mnt, ".memfs", *path)


def read(mnt, *path):
    with open(ctl(mnt, *path)) as f:
        return f.read()


def write_ctl(mnt, value, *path):
    with open(ctl(mnt, *path), "w") as f:
        f.write(value)


def pagestat(mnt):
    out = {}
    for line in read(mnt, "stats", "pagestat").splitlines():
        m = re.fullmatch(r"node(\d+) (\d+)", line)
        assert m, f"bad pagestat line {line!r}"
        out[int(m[1])] = int(m[2])
    return out


def write_pages(directory, files, pages_each):
    """Random (incompressible) data, whole pages: pages written in total."""
    for i in range(files):
        with open(os.path.join(directory, f"f{i}"), "wb") as f:
            f.write(os.urandom(pages_each * PAGE))
    return files * pages_each


def numa_maps_pages(pid, policy):
    """Pages per node of the daemon's mappings whose policy is `policy`
    (the arenas' chunks: nothing else of the daemon carries it)."""
    per_node = {}
    with open(f"/proc/{pid}/numa_maps") as f:
        for line in f:
            fields = line.split()
            if fields[1] != policy:
                continue
            for fld in fields[2:]:
                m = re.fullmatch(r"N(\d+)=(\d+)", fld)
                if m:
                    per_node[int(m[1])] = per_node.get(int(m[1]), 0) + int(m[2])
    return per_node


def kernel_node_list(nodes):
    """Nodes as the kernel prints a node list (%*pbl): ranges, "0-1,3"."""
    out, nodes = [], sorted(nodes)
    i = 0
    while i < len(nodes):
        j = i
        while j + 1 < len(nodes) and nodes[j + 1] == nodes[j] + 1:
            j += 1
        out.append(str(nodes[i]) if i == j else f"{nodes[i]}-{nodes[j]}")
        i = j + 1
    return ",".join(out)


FORMS = ["default", "prefer:0", "bind:0", "interleave", "interleave:0", "local"]


@pytest.mark.parametrize("form", FORMS)
def test_every_mpol_form_mounts_and_places_the_arenas(form):
    with mounted("memfs", f"size=64M,passthrough=off,mpol={form}") as mnt:
        assert read(mnt, "opts", "mpol").strip() == form
        assert re.fullmatch(r"[0-9a-f]{8}(,[0-9a-f]{8})*\n", read(mnt, "opts", "nodemask"))
        write_pages(mnt, 2, 16)
        # numa_maps names a policy as the kernel prints it ("interleave:0" for a
        # bare interleave over node 0, "prefer:0", "bind:0", "local", "default").
        shown = {"interleave": "interleave:" + kernel_node_list(MEMORY_NODES)}.get(form, form)
        pages = numa_maps_pages(daemon_pid(mnt), shown)
        assert sum(pages.values()) >= 32, f"no arena page under {shown}: {pages}"


def test_a_node_that_does_not_exist_is_refused_with_its_number():
    for form in [f"bind:{MISSING}", f"prefer:{MISSING}", f"interleave:0-{MISSING}"]:
        r = subprocess.run([MEMFS_BIN, "-o", f"mpol={form}", "/tmp"], capture_output=True, text=True, timeout=30)
        assert r.returncode != 0
        assert f"node {MISSING}" in r.stderr and "mpol=" in r.stderr, r.stderr
    r = subprocess.run([MEMFS_BIN, "-o", "mpol=sideways", "/tmp"], capture_output=True, text=True, timeout=30)
    assert r.returncode != 0 and "mpol" in r.stderr, r.stderr


@pytest.mark.parametrize("options", ["cache=metadata,passthrough=off", "passthrough=on,passthrough_min=0"])
def test_pagestat_counts_the_data_pages_written_where_the_kernel_put_them(options):
    with mounted("memfs", f"size=256M,mpol=bind:0,{options}") as mnt:
        before = pagestat(mnt)
        assert set(before) == set(MEMORY_NODES) and sum(before.values()) == 0, before
        written = write_pages(mnt, 8, 300)
        after = pagestat(mnt)
        assert after == {**{n: 0 for n in MEMORY_NODES}, 0: written}, after
        if "passthrough=off" in options:
            # The arenas: what the kernel shows of the daemon's bound memory,
            # which also counts arena pages emptied and not yet given back.
            shown = numa_maps_pages(daemon_pid(mnt), "bind:0")
            assert set(shown) == {0} and written <= shown[0] <= written + 64, (shown, written)
        os.unlink(os.path.join(mnt, "f0"))
        # f0's pages go when the kernel's FORGET arrives (over io_uring on
        # the /dev/fuse thread, beside this read of the figures), not before
        # unlink returns.
        left = settle(lambda: pagestat(mnt)[0], lambda n: n == written - 300)
        assert left == written - 300, (left, written)
        prom = read(mnt, "stats", "prometheus")
        assert f'memfs_numa_pages{{mountpoint="{mnt}",node="0"}} {written - 300}' in prom


def test_nodemask_reads_and_writes_and_refuses_a_missing_node():
    with mounted("memfs", "size=64M") as mnt:
        mask = read(mnt, "opts", "nodemask").strip()
        assert int(mask.replace(",", ""), 16) == sum(1 << n for n in MEMORY_NODES)
        with pytest.raises(OSError) as e:
            write_ctl(mnt, format(1 << MISSING, "x"), "opts", "nodemask")
        assert e.value.errno == 22
        for bad in ["zz", "1,,1", "123456789", ",1"]:
            with pytest.raises(OSError):
                write_ctl(mnt, bad, "opts", "nodemask")
        assert read(mnt, "opts", "mpol").strip() == "default", "a refused write changes nothing"
        write_ctl(mnt, "1\n", "opts", "nodemask")
        assert read(mnt, "opts", "mpol").strip() == "bind:0"
        assert int(read(mnt, "opts", "nodemask").replace(",", ""), 16) == 1
        with pytest.raises(OSError) as e:
            write_ctl(mnt, f"bind:{MISSING}", "opts", "mpol")
        assert e.value.errno == 22
        write_ctl(mnt, "interleave", "opts", "mpol")
        assert read(mnt, "opts", "mpol").strip() == "interleave"


def test_a_new_policy_applies_at_once_to_the_chunks_already_mapped():
    with mounted("memfs", "size=64M,passthrough=off") as mnt:
        write_pages(mnt, 1, 64)
        pid = daemon_pid(mnt)
        assert sum(numa_maps_pages(pid, "bind:0").values()) == 0
        write_ctl(mnt, "bind:0", "opts", "mpol")
        assert sum(numa_maps_pages(pid, "bind:0").values()) >= 64


def test_migrate_moves_nothing_on_allowed_nodes_and_says_so():
    with mounted("memfs", "size=64M,mpol=bind:0") as mnt:
        written = write_pages(mnt, 4, 100)
        r = subprocess.run([MEMFS_BIN, "migrate", mnt], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        assert f"pages looked at {written} of about {written}, moved 0, failed 0" in r.stdout, r.stdout
        assert "policy bind:0 (nodemask" in r.stdout and f"node0 {written}" in r.stdout, r.stdout
        stats = dict(line.split(": ") for line in read(mnt, "stats", "migrate").splitlines())
        assert stats["running"] == "0" and stats["migrations_total"] == "1" and stats["moved"] == "0"
        assert int(stats["pages"]) == written
        with pytest.raises(OSError) as e:
            write_ctl(mnt, "2", "opts", "migrate")
        assert e.value.errno == 22


def test_remount_changes_the_policy_and_refuses_a_missing_node():
    with mounted("memfs", "size=64M,mpol=bind:0") as mnt:
        r = subprocess.run([MEMFS_BIN, "-o", "remount,mpol=interleave:0", mnt], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        assert read(mnt, "opts", "mpol").strip() == "interleave:0"
        r = subprocess.run([MEMFS_BIN, "-o", f"remount,mpol=bind:{MISSING}", mnt], capture_output=True, text=True)
        assert r.returncode != 0 and "mpol" in r.stderr, r.stderr
        assert read(mnt, "opts", "mpol").strip() == "interleave:0"


@pytest.mark.skipif(len(MEMORY_NODES) < 2, reason="needs two NUMA nodes with memory (this machine has one)")
def test_pages_are_where_the_policy_says_and_migrate_moves_them():
    a, b = MEMORY_NODES[:2]
    with mounted("memfs", f"size=256M,passthrough=off,mpol=bind:{a}") as mnt:
        written = write_pages(mnt, 4, 256)
        assert pagestat(mnt)[a] == written
        write_ctl(mnt, f"bind:{b}", "opts", "mpol")
        r = subprocess.run([MEMFS_BIN, "migrate", mnt], capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        after = pagestat(mnt)
        assert after[b] + after[a] == written and after[b] > written * 0.9, after
