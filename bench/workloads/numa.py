"""NUMA page placement (issue 10): the RedHawk RAM-disk paper's two test
scenarios (seed 004), an O_DIRECT lseek+write / lseek+read loop run with the
file's pages on the node of the CPUs that run it ("local") or on another
node ("remote"), in scenario 1 also beside a memory hog on the other node.

Owns: finding the NUMA nodes (those with both memory and CPUs, from
/sys/devices/system/node), the cases this machine can run, the iteration
counts, the mount options that place the pages, mounting its own instances
(MANAGES_MOUNTS: each run mounts the subject fresh with its own options and
always unmounts it), and starting and ending the hogs.
bench/native/numa_rw.c does the timed loops and the hogs.

Mount options. Pages are placed with `mpol=bind:N`, which kernel tmpfs takes
and memfs takes with the same meaning (issue 10). It is added to both
subjects' options (the suite's, any mpol= in them replaced) only for a case
that needs its pages on a given node, which is every case on a machine with
two or more nodes (the local ones too: a memfs daemon may run on any node,
so only a binding says where its pages are). On a one-node machine every
case is local and both subjects are mounted with the suite's options alone,
as every other workload mounts them. An --also directory's placement cannot
be chosen: it runs only where no binding is needed.

Scenario 1: one process on node L, one 8 MiB buffer; cases local, local with
a hog on node R, remote (pages on R), remote with a hog on R. The hogs are
one `numa_rw hog` per CPU of R (at most HOG_MAX, as the paper's four, one per
CPU), each HOG_MIB MiB, pinned to its CPU, so their own memory is on R.
Scenario 2: PROCS processes at once, each on its own 2 MiB file; on two
nodes half run on each node, each half on a mount bound to its own node
(local) or to the other one (remote), as the paper's two RAM disks; on one
node all run there, on one mount.

Full mode takes about 1.5 minutes on one node with 2 CPUs (3 repetitions);
with two nodes there are three times as many cases.
"""
import contextlib
import glob
import json
import os
import subprocess
import sys

import native
from filesystems import FileSystem
from proc import BenchError, kill_group
from proc import run as run_cmd
from runner import Case, Metric, note

NAME = "numa"
TITLE = "NUMA page placement (RedHawk RAM-disk scenarios)"
DESCRIPTION = """
After the RedHawk Linux RAM-disk paper (seed 004, issue 10): a file in the
mount opened with O_DIRECT, written once, then N × (lseek to 0 + write of
the whole buffer) timed, then N × (lseek to 0 + read); milliseconds per
call, lower is better. Scenario 1: one process, 8 MiB. Scenario 2: 8
processes at once, each on its own 2 MiB file (mean over the processes, and
the slowest one, as the paper reports the highest). "Local": the file's pages
are on the NUMA node of the CPUs the program is pinned to; "remote": bound to
another node (`mpol=bind:N` on both memfs and tmpfs); "hog": one memory
read/write program per CPU (at most 4) of the other node, each striding
through 256 MiB of its own memory.
"""

MANAGES_MOUNTS = True
NODE_DIR = "/sys/devices/system/node"
MiB = 1 << 20
S1_BYTES = 8 * MiB
S2_BYTES = 2 * MiB
PROCS = 8
HOG_MAX = 4
HOG_MIB = 256
FULL = {"s1": 600, "s2": 500}   # iterations: about 1.5 min on 1 node, 2 CPUs, 3 reps
QUICK = {"s1": 50, "s2": 50}    # under 10 s


def _note(text):
    """A note for the report (runner.note)."""
    note(sys.modules[__name__], text)


# -- the machine -------------------------------------------------------------------

def _read(path):
    with open(path) as f:
        return f.read().strip()


def _expand(cpulist):
    """'0-3,8' -> [0, 1, 2, 3, 8]"""
    out = []
    for part in filter(None, cpulist.split(",")):
        lo, _, hi = part.partition("-")
        out += range(int(lo), int(hi or lo) + 1)
    return out


def nodes():
    """{node: cpulist} of the nodes with both memory and CPUs; a kernel
    without NUMA counts as one node 0 with the CPUs this process may use."""
    try:
        memory = set(_expand(_read(os.path.join(NODE_DIR, "has_memory"))))
        cpus = {int(os.path.basename(d)[4:]): _read(os.path.join(d, "cpulist"))
                for d in glob.glob(os.path.join(NODE_DIR, "node[0-9]*"))}
    except OSError:
        memory, cpus = set(), {}
    found = {n: c for n, c in sorted(cpus.items()) if n in memory and c}
    if not found:
        found = {0: ",".join(map(str, sorted(os.sched_getaffinity(0))))}
    return found


# -- cases and metrics -------------------------------------------------------------

def cases(cfg):
    found = nodes()
    iters = QUICK if cfg.quick else FULL
    if len(found) < 2:
        (only,) = found
        _note(f"this machine has one NUMA node with memory and CPUs (node {only}), so only "
              "the local figures were measured, with both file systems mounted with the "
              "suite's options alone (no mpol=). The remote cases and those with a memory hog on "
              "another node need two nodes with memory and CPUs.")
        return [_case("s1", "local", only, None, False, iters),
                _case("s2", "local", only, None, False, iters)]
    local, remote = list(found)[:2]
    _note(f"nodes used: local = node {local} (CPUs {found[local]}), other = node {remote} "
          f"(CPUs {found[remote]}); both file systems mounted with mpol=bind:<node>.")
    return [_case("s1", "local", local, remote, False, iters),
            _case("s1", "local", local, remote, True, iters),
            _case("s1", "remote", local, remote, False, iters),
            _case("s1", "remote", local, remote, True, iters),
            _case("s2", "local", local, remote, False, iters),
            _case("s2", "remote", local, remote, False, iters)]


def _case(scenario, where, local, other, hog, iters):
    """other is None on a one-node machine: no binding, no hog."""
    label = f"pages {where}" + (f", memory hog on node {other}" if hog else "")
    return Case(id=f"{scenario}-{where}" + ("-hog" if hog else ""),
                label=f"scenario {scenario[1]}, {label}",
                params={"scenario": scenario, "where": where, "local": local, "other": other,
                        "hog": hog, "iterations": iters[scenario],
                        "bytes": S1_BYTES if scenario == "s1" else S2_BYTES,
                        "procs": 1 if scenario == "s1" else PROCS})


def metrics(case):
    p = case.params
    if p["scenario"] == "s1":
        title = (f"Scenario 1: one process, one {p['bytes'] // MiB} MiB buffer, "
                 f"{p['iterations']} iterations (ms per call)")
        rows = [("write_ms", "lseek + write", "write"), ("read_ms", "lseek + read", "read")]
    else:
        title = (f"Scenario 2: {p['procs']} processes at once, each its own "
                 f"{p['bytes'] // MiB} MiB file, {p['iterations']} iterations (ms per call)")
        rows = [("write_ms", "lseek + write, mean of the processes", "write"),
                ("read_ms", "lseek + read, mean of the processes", "read"),
                ("write_ms_max", "lseek + write, slowest process", ""),
                ("read_ms_max", "lseek + read, slowest process", "")]
    placement = case.label.split(", ", 1)[1]
    short = f"{p['scenario']} {placement.replace('memory ', '')}"
    return [Metric(key=f"{case.id}:{key}", table=title, label=f"{label}, {placement}",
                   unit="ms", better="lower", chart=bool(what),
                   short=f"{short}: {what}" if what else "")
            for key, label, what in rows]


# -- one run -----------------------------------------------------------------------

def run(ctx):
    p = ctx.case.params
    bound = p["other"] is not None  # a multi-node machine: every case binds its pages
    keys = [m.key for m in metrics(ctx.case)]
    if not ctx.fs.managed and bound:
        return dict.fromkeys(keys)  # an existing directory's placement cannot be chosen
    local, other = p["local"], p["other"]
    page_node = {"local": local, "remote": other}[p["where"]]
    if p["scenario"] == "s1" or not bound:
        groups = [(page_node if bound else None, _cpus(local))]
    else:  # half the processes on each node, each half's pages local to it or remote
        swap = p["where"] == "remote"
        groups = [(other if swap else local, _cpus(local)),
                  (local if swap else other, _cpus(other))]
    with _mounted(ctx, [node for node, _ in groups]) as dirs, _hogs(p, other):
        specs = [f"{d}@{cpus}" for d, (_, cpus) in zip(dirs, groups)]
        cmd = [native.program("numa_rw"), "rw", str(p["bytes"]), str(p["iterations"]),
               str(p["procs"]), *specs]
        out = _answer(run_cmd(cmd, ctx.timeout(900, 120)).stdout)
    if not out.get("o_direct"):
        _note(f"{ctx.fs.name} refused O_DIRECT (EINVAL) in case {ctx.case.id}: its figures "
              f"there are buffered I/O through the page cache ({out.get('note', '')}).")
    values = {k: out[k.split(":", 1)[1]] for k in keys}
    values[f"{ctx.case.id}:o_direct"] = out.get("o_direct")
    return values


def _cpus(node):
    return nodes()[node]


def _answer(stdout):
    text = stdout.decode(errors="replace")
    try:
        return json.loads(text)
    except ValueError:
        raise BenchError(f"numa_rw answer not understood: {text[-300:]!r}") from None


def _options(base, node):
    """The suite's options, with mpol=bind:node instead of any mpol= (node None:
    the suite's options as they are)."""
    if node is None:
        return base
    keep = [o for o in base.split(",") if o and o.split("=")[0] != "mpol"]
    return ",".join(keep + [f"mpol=bind:{node}"])


@contextlib.contextmanager
def _mounted(ctx, page_nodes):
    """One fresh mount of the subject per entry of page_nodes (None: no
    binding), the first on the suite's mount point, the others beside it;
    yields their paths. Always unmounted. An --also directory yields its
    scratch directory (page_nodes is then [None])."""
    if not ctx.fs.managed:
        try:
            yield [ctx.fs.mount()]
        finally:
            ctx.fs.unmount()
        return
    mounted = []
    try:
        for i, node in enumerate(page_nodes):
            path = ctx.fs.path if i == 0 else f"{ctx.fs.path}-{i}"
            fs = FileSystem(ctx.fs.name, ctx.fs.kind, _options(ctx.fs.options, node), path)
            mounted.append(fs)
            fs.mount()
        yield [fs.path for fs in mounted]
        dead = [fs.path for fs in mounted if not fs.healthy()]
        if dead:
            raise BenchError(f"{ctx.fs.name} mount(s) dead after the run: {', '.join(dead)}")
    finally:
        for fs in mounted:
            fs.unmount()


@contextlib.contextmanager
def _hogs(p, node):
    """Memory hogs on node's CPUs for the case's run (none unless p["hog"]);
    always ended (their process groups, which only they are in)."""
    procs = []
    try:
        if p["hog"]:
            for cpu in _expand(_cpus(node))[:HOG_MAX]:
                proc = subprocess.Popen([native.program("numa_rw"), "hog", str(HOG_MIB),
                                         str(cpu)], stdin=subprocess.DEVNULL,
                                        stdout=subprocess.PIPE, start_new_session=True)
                procs.append(proc)
                if proc.stdout.readline().strip() != b"ready":
                    raise BenchError(f"memory hog on CPU {cpu} did not start "
                                     f"(exit {proc.poll()})")
        yield
    finally:
        for proc in procs:
            kill_group(proc)
