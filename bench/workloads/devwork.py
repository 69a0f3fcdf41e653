"""A software-development workload (SDET's idea; the papers' "compilers,
editors, sorting"): real builds and a sort with their sources, temporary and
output files in the mount.

Owns: generating the C project and the sort input (once per run, outside the
mounts), copying them in (not timed), and timing the tasks:
  cc     `make -j<cores>` of a generated C project, TMPDIR in the mount
  sort   GNU sort of a large file with a small buffer (-S) so it spills to
         temporary files, TMPDIR and output in the mount
  cargo  (full mode) `cargo build --release --offline` of this project (a
         snapshot of its sources taken once per run) with its target
         directory (and TMPDIR) in the mount
"""
import os
import subprocess

from proc import BenchError, file_size, timed
from proc import run as run_cmd
from runner import Case, Metric
from sysinfo import REPO

NAME = "devwork"
TITLE = "Software development (builds and sort)"
DESCRIPTION = """
Wall-clock seconds, lower is better; the ratio is tmpfs time / memfs time.
cc: a generated C project (many translation units, a static library and a
program) built from a clean tree in the mount with `make -j<cores>`, gcc's
temporary files in the mount. sort: `LC_ALL=C sort -S 32M` of a file of
random base64 lines, temporary and output files in the mount. cargo: a release
build of this repository (`cargo build --release --offline` of a snapshot of its
committed sources, git HEAD, taken at the start of the task's first run, so every
run builds the same code; target directory and TMPDIR in the mount).
"""

FULL = {"cc_files": 160, "sort_mib": 512, "cargo": True}
QUICK = {"cc_files": 24, "sort_mib": 16, "cargo": False}


def cases(cfg):
    p = QUICK if cfg.quick else FULL
    out = [Case(id="cc", label=f"C build, {p['cc_files']} files", params=p),
           Case(id="sort", label=f"sort {p['sort_mib']} MiB", params=p)]
    if p["cargo"]:
        out.append(Case(id="cargo", label="cargo build --release of memfs", params=p))
    return out


def metrics(case):
    return [Metric(key=f"{case.id}:seconds", table="Seconds per task", label=case.label,
                   unit="s", better="lower")]


def run(ctx):
    tmp = os.path.join(ctx.dir, "tmp")
    run_cmd(["mkdir", "-p", tmp], 60)
    env = dict(os.environ, TMPDIR=tmp, LC_ALL="C")
    task = {"cc": cc, "sort": sort, "cargo": cargo}[ctx.case.id]
    return {f"{ctx.case.id}:seconds": task(ctx, env)}


def cc(ctx, env):
    """Seconds of `make` of the generated C project in ctx.dir (also the passthrough workload's)."""
    src = _c_project(ctx.cfg.scratch, ctx.case.params["cc_files"])
    dest = os.path.join(ctx.dir, "proj")
    run_cmd(["cp", "-r", src, dest], ctx.timeout(300, 60))
    secs, _ = timed(["make", "-s", f"-j{os.cpu_count()}", "-C", dest], ctx.timeout(1800, 120),
                    env=env)
    if run_cmd(["test", "-x", os.path.join(dest, "prog")], 60, check=False).returncode:
        raise BenchError("the C build produced no program")
    return secs


def sort(ctx, env):
    """Seconds of GNU sort spilling to TMPDIR in ctx.dir (also the passthrough workload's)."""
    src = _sort_input(ctx.cfg.scratch, ctx.case.params["sort_mib"])
    data = os.path.join(ctx.dir, "input")
    out = os.path.join(ctx.dir, "sorted")
    run_cmd(["cp", src, data], ctx.timeout(300, 60))
    secs, _ = timed(["sort", "-S", "32M", "-o", out, data], ctx.timeout(1800, 120), env=env)
    if file_size(out) != os.path.getsize(src):
        raise BenchError("sort output has the wrong size")
    return secs


def cargo(ctx, env):
    """Seconds of a release build of this crate into ctx.dir (also the passthrough workload's)."""
    manifest = os.path.join(_source_snapshot(ctx.cfg.scratch), "Cargo.toml")
    cmd = ["cargo", "build", "--release", "--offline", "--quiet", "--manifest-path", manifest,
           "--target-dir", os.path.join(ctx.dir, "target")]
    secs, _ = timed(cmd, ctx.timeout(3600), env=env)
    return secs


def _source_snapshot(scratch):
    """Copy (once per run) the crate's sources, so that every build in the run
    compiles the same code even while someone edits the repository: the
    committed HEAD where the repository is a git checkout (uncommitted
    edits may not compile), else the files as they are."""
    root = os.path.join(scratch, "crate")
    if not os.path.exists(os.path.join(root, "Cargo.toml")):
        if not os.path.exists(os.path.join(REPO, "Cargo.toml")):
            raise BenchError("no Cargo.toml in the repository")
        os.makedirs(root, exist_ok=True)
        archive = subprocess.run(["git", "-C", REPO, "archive", "--format=tar", "HEAD"], capture_output=True)
        if archive.returncode == 0:
            subprocess.run(["tar", "-x", "-C", root], input=archive.stdout, check=True)
            return root
        names = [n for n in ("Cargo.toml", "Cargo.lock", "build.rs", "src", "benches", "examples")
                 if os.path.exists(os.path.join(REPO, n))]
        run_cmd(["cp", "-r", *[os.path.join(REPO, n) for n in names], root], 300)
    return root


def _c_project(scratch, files):
    """Generate (once) a C project of `files` translation units; return its dir."""
    root = os.path.join(scratch, f"cproj-{files}")
    if os.path.exists(os.path.join(root, "Makefile")):
        return root
    os.makedirs(root, exist_ok=True)
    for i in range(files):
        with open(os.path.join(root, f"unit{i}.c"), "w") as f:
            f.write(_unit(i))
    with open(os.path.join(root, "main.c"), "w") as f:
        f.write("#include <stdio.h>\n"
                + "".join(f"long unit{i}_entry(long);\n" for i in range(files))
                + "int main(void) { long s = 0;\n"
                + "".join(f"  s += unit{i}_entry({i});\n" for i in range(files))
                + '  printf("%ld\\n", s); return 0; }\n')
    objs = " ".join(f"unit{i}.o" for i in range(files))
    with open(os.path.join(root, "Makefile"), "w") as f:
        f.write(f"CFLAGS = -O2 -g\nOBJS = {objs}\n"
                "prog: main.o libproj.a\n\t$(CC) -o $@ main.o libproj.a\n"
                "libproj.a: $(OBJS)\n\tar rcs $@ $(OBJS)\n")
    return root


def _unit(i):
    funcs = []
    for j in range(12):
        funcs.append(
            f"static long f{j}(long x) {{\n"
            f"  long a[64]; for (int k = 0; k < 64; k++) a[k] = (x * {j + 3} + k) ^ (k << {j % 7});\n"
            f"  qsort(a, 64, sizeof a[0], cmp);\n"
            f"  char buf[64]; snprintf(buf, sizeof buf, \"%ld-{i}-{j}\", a[{j}]);\n"
            f"  return a[{(j * 5) % 64}] + (long)strlen(buf);\n}}\n")
    calls = " + ".join(f"f{j}(x + {j})" for j in range(12))
    return ("#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n"
            "static int cmp(const void *a, const void *b) {\n"
            "  long x = *(const long *)a, y = *(const long *)b; return (x > y) - (x < y); }\n"
            + "".join(funcs) + f"long unit{i}_entry(long x) {{ return {calls}; }}\n")


def _sort_input(scratch, mib):
    """Generate (once) `mib` MiB of random base64 lines; return the path."""
    path = os.path.join(scratch, f"sort-{mib}.txt")
    if not os.path.exists(path):
        raw = mib * 3 // 4 << 20
        run_cmd(["sh", "-c", f"head -c {raw} /dev/urandom | base64 -w 40 > {path}.tmp"], 600)
        os.replace(f"{path}.tmp", path)
    return path
