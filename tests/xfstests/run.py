#!/usr/bin/env python3
"""xfstests (fstests), the suite Linux file systems are held to: its
`generic` tests of the `quick` group on memfs and on kernel tmpfs, side by
side (issue 11).

Owns: building the pinned release (xfstests-VERSION.tar.gz here, a `git
archive` of that tag of git://git.kernel.org/pub/scm/fs/xfs/xfstests-dev.git,
GPL-2.0; no network is needed) patched with memfs.patch into
target/xfstests/VERSION; running `check -g quick` for memfs (FSTYP=fuse,
FUSE_SUBTYP=.memfs: mounted as `-t fuse.memfs` through mount.sh, which calls
the binary under test as mount(8) calls its helper) and for tmpfs at once
(in both, umount.sh tries an unmount again for a moment while the mount is
busy, and what it logs is reported);
and comparing each outcome with the committed lists expected-memfs.txt and
expected-tmpfs.txt (every test not listed must pass; every listed one says
why it fails or does not run). Any difference fails the tier: a new
failure, a new skip, or a listed test that now passes (take it off the list).

memfs.patch teaches the suite what it already knows of tmpfs, for memfs: a
mount cycle is a remount (an unmount ends a memory file system), a sized
scratch file system is `-o size=`, SEEK_DATA/SEEK_HOLE are tmpfs's, and the
mount type fuse.memfs is FSTYP fuse.

The suite's test users (fsgqa, fsgqa2, 123456-fsgqa and the group fsgqa,
as its README asks) are made for the run when the machine lacks them, and
removed after it; users that were there before are left alone. The two
tests that set machine-wide sysctls (SERIAL) run after the side-by-side
run, one file system at a time, and those sysctls are put back at the end.

Usage: run.py [--only memfs|tmpfs] [TEST...]  (default: the quick group).
Needs root and Debian's build and run dependencies (scripts/deps.sh --tests).
"""
import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
VERSION = "v2026.01.27"
TARBALL = os.path.join(HERE, f"xfstests-{VERSION}.tar.gz")
SHA256 = "6093946119c2a43a51d98c0ad4af9346995082000ab36abeba68d34420b02ec1"
TREE = os.path.join(REPO, "target", "xfstests", VERSION)
MEMFS_BIN = os.environ.get("MEMFS_BIN", os.path.join(REPO, "target", "release", "memfs"))
# Both halves together; the quick group took about 15 minutes a half here.
TIMEOUT = int(os.environ.get("XFSTESTS_TIMEOUT", 45 * 60))
SIZE = "2G"


def build():
    stamp = os.path.join(TREE, ".memfs-built")
    with open(os.path.join(HERE, "memfs.patch"), "rb") as f:
        patch = f.read()
    key = hashlib.sha256(patch).hexdigest()
    if os.path.exists(stamp) and open(stamp).read() == key:
        return
    with open(TARBALL, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    if digest != SHA256:
        sys.exit(f"xfstests: {TARBALL} has sha256 {digest}, expected {SHA256}")
    print(f"xfstests: building {VERSION} into {TREE}", flush=True)
    shutil.rmtree(TREE, ignore_errors=True)
    os.makedirs(TREE)
    subprocess.run(["tar", "-xzf", TARBALL, "-C", TREE], check=True)
    subprocess.run(["patch", "-s", "-p1"], input=patch, cwd=TREE, check=True)
    log = os.path.join(os.path.dirname(TREE), "build.log")
    with open(log, "w") as out:
        r = subprocess.run(["make", f"-j{os.cpu_count() or 2}"], cwd=TREE, stdout=out, stderr=subprocess.STDOUT)
    if r.returncode != 0:
        with open(log) as f:
            sys.stderr.write("".join(f.readlines()[-30:]))
        sys.exit(f"xfstests: build failed (the whole log: {log})")
    with open(stamp, "w") as f:
        f.write(key)


CONFIG = {
    "memfs": """\
export FSTYP=fuse
export FUSE_SUBTYP=.memfs
export TEST_DEV=memfs_test
export SCRATCH_DEV=memfs_scratch
export MOUNT_OPTIONS="-o size={size}"
export TEST_FS_MOUNT_OPTS="-o size={size}"
""",
    "tmpfs": """\
export FSTYP=tmpfs
export TEST_DEV=tmpfs_test
export SCRATCH_DEV=tmpfs_scratch
export MOUNT_OPTIONS="-o size={size}"
export TEST_FS_MOUNT_OPTS="-o size={size}"
""",
}


class Half:
    """One file system's run of `check`."""

    def __init__(self, fs, tests, skip):
        self.fs = fs
        self.work = tempfile.mkdtemp(prefix=f"memfs-xfstests-{fs}-")
        os.chmod(self.work, 0o755)  # tests run parts as other users (generic/079)
        self.test_dir = os.path.join(self.work, "test")
        self.scratch = os.path.join(self.work, "scratch")
        self.results = os.path.join(self.work, "results")
        for d in (self.test_dir, self.scratch):
            os.mkdir(d)
        config = os.path.join(self.work, "config")
        with open(config, "w") as f:
            f.write(CONFIG[fs].format(size=SIZE))
            f.write(f"export TEST_DIR={self.test_dir}\nexport SCRATCH_MNT={self.scratch}\n")
        shim = os.path.join(self.work, "bin")
        os.mkdir(shim)
        os.symlink(os.path.join(HERE, "mount.sh"), os.path.join(shim, "mount"))
        os.symlink(os.path.join(HERE, "umount.sh"), os.path.join(shim, "umount"))
        self.umount_log = os.path.join(self.work, "umount.log")
        env = dict(os.environ, HOST_OPTIONS=config, RESULT_BASE=self.results, MEMFS_BIN=MEMFS_BIN,
                   UMOUNT_LOG=self.umount_log,
                   PATH=f"{shim}:{os.environ.get('PATH', '/usr/sbin:/usr/bin:/sbin:/bin')}")
        self.log = os.path.join(self.work, "check.log")
        # Tests listed as `skip` are not started at all (-E): they say why.
        exclude = os.path.join(self.work, "exclude")
        with open(exclude, "w") as f:
            f.write("".join(f"{t}\n" for t in sorted(skip)))
        args = ["./check", "-R", "xunit", "-E", exclude] + (tests or ["-g", "quick"])
        self.start = time.monotonic()
        with open(self.log, "w") as out:
            self.proc = subprocess.Popen(args, cwd=TREE, env=env, stdout=out, stderr=subprocess.STDOUT,
                                         start_new_session=True)
        self.seconds = None

    def wait(self, deadline):
        try:
            self.proc.wait(timeout=max(1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, 9)
            self.proc.wait()
            print(f"xfstests: {self.fs}: killed after {TIMEOUT} s", flush=True)
        self.seconds = time.monotonic() - self.start

    def outcomes(self):
        """{test: (pass|fail|notrun, message)} from check's xunit report."""
        path = os.path.join(self.results, "result.xml")
        if not os.path.exists(path):
            return {}
        out = {}
        for case in ET.parse(path).getroot().iter("testcase"):
            name = case.get("name")
            skipped, failure = case.find("skipped"), case.find("failure")
            if skipped is not None:
                out[name] = ("notrun", skipped.get("message", ""))
            elif failure is not None or case.find("error") is not None:
                out[name] = ("fail", (failure if failure is not None else case.find("error")).get("message", ""))
            else:
                out[name] = ("pass", "")
        return out

    def busy_umounts(self):
        """What umount.sh logged: each time an unmount found the mount busy."""
        try:
            with open(self.umount_log) as f:
                return f.read().splitlines()
        except FileNotFoundError:
            return []

    def cleanup(self):
        for d in (self.scratch, self.test_dir):
            for _ in range(3):
                if subprocess.run(["mountpoint", "-q", d]).returncode != 0:
                    break
                subprocess.run(["umount", d], capture_output=True)
                time.sleep(0.5)
            else:
                subprocess.run(["umount", "-l", d], capture_output=True)
        shutil.rmtree(self.work, ignore_errors=True)


# The suite's users, as its README makes them: (argv, what undoes it).
QA_USERS = [
    ("fsgqa", ["useradd", "-m", "fsgqa"]),
    ("123456-fsgqa", ["useradd", "123456-fsgqa"]),
    ("fsgqa2", ["useradd", "fsgqa2"]),
]


# Tests that set machine-wide sysctls (fs.protected_*) and put back what
# they found: run by one half at a time, after the side-by-side run, or one
# half's test saves the value the other's set, puts that back, and leaves
# the machine changed (root then could not open another user's file with
# O_CREAT in a sticky directory); each half's test would also see the
# other's settings.
SERIAL = ["generic/597", "generic/598"]
SYSCTLS = ["fs.protected_symlinks", "fs.protected_hardlinks", "fs.protected_regular", "fs.protected_fifos"]


def read_sysctls():
    out = {}
    for name in SYSCTLS:
        path = "/proc/sys/" + name.replace(".", "/")
        if os.path.exists(path):
            with open(path) as f:
                out[path] = f.read().strip()
    return out


def write_sysctls(values):
    for path, value in values.items():
        with open(path, "w") as f:
            f.write(value + "\n")


def _exists(db, name):
    return subprocess.run(["getent", db, name], capture_output=True).returncode == 0


def make_qa_users():
    """Make the suite's users and group that are missing; return what undoes it."""
    undo = []
    for name, argv in QA_USERS:
        if _exists("passwd", name):
            continue
        r = subprocess.run(argv, capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(f"xfstests: {' '.join(argv)}: {r.stderr.strip()}")
        # userdel removes its group of the same name too; -r its home (-m).
        undo.append(["userdel"] + (["-r"] if "-m" in argv else []) + [name])
    if not _exists("group", "fsgqa"):
        subprocess.run(["groupadd", "fsgqa"], check=True)
        undo.append(["groupdel", "fsgqa"])
    return undo


def remove_qa_users(undo):
    for argv in reversed(undo):
        r = subprocess.run(argv, capture_output=True, text=True)
        if r.returncode != 0:
            print(f"xfstests: {' '.join(argv)}: {r.stderr.strip()}", flush=True)


def expected(fs):
    """{test: (fail|notrun|flaky|skip, reason)} from expected-FS.txt."""
    out = {}
    with open(os.path.join(HERE, f"expected-{fs}.txt")) as f:
        for n, line in enumerate(f, 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            parts = line.split(None, 2)
            if len(parts) < 3 or parts[1] not in ("fail", "notrun", "flaky", "skip"):
                sys.exit(f"expected-{fs}.txt:{n}: want `generic/NNN fail|notrun|flaky|skip reason`")
            out[parts[0]] = (parts[1], parts[2])
    return out


def judge(fs, got, want):
    """Lines saying how `got` differs from `want` (empty: as expected)."""
    bad = []
    for test, (outcome, msg) in sorted(got.items()):
        listed = want.get(test)
        if outcome == "pass":
            if listed and listed[0] != "flaky":
                bad.append(f"{fs}: {test} passes now but is listed as {listed[0]} ({listed[1]}): take it off")
        elif listed is None or listed[0] not in (outcome, "flaky"):
            said = f", listed as {listed[0]}" if listed else ""
            bad.append(f"{fs}: {test} {'failed' if outcome == 'fail' else 'did not run'}{said}: {msg[:200]}")
    return bad


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", choices=sorted(CONFIG))
    ap.add_argument("tests", nargs="*")
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("xfstests: needs root (it mounts file systems)")
    if not os.access(MEMFS_BIN, os.X_OK):
        sys.exit(f"xfstests: no memfs binary at {MEMFS_BIN} (cargo build --release)")
    build()
    want = {fs: expected(fs) for fs in CONFIG}
    skip = {fs: {t for t, (o, _) in want[fs].items() if o == "skip"} for fs in CONFIG}
    undo = make_qa_users()
    sysctls = read_sysctls()
    try:
        run(a, want, skip)
    finally:
        write_sysctls(sysctls)
        remove_qa_users(undo)


# How many of the reference's unexpected failures are run a second time.
RETRY_MAX = 3


def retry_reference(got, want, skip, deadline):
    """Run again, once, the tests that failed on tmpfs and are not listed as
    failing there: tmpfs is the reference, and its own flakes (generic/313,
    "ctime not updated after ftruncate", once in this project's CI) must not
    fail memfs's run. A test that passes the second time is taken as
    passing and named as a flake of the reference; one that fails again
    stays a failure. memfs's failures are never run again. The Half that
    ran them, for the caller to clean up; None when none was needed."""
    failed = [t for t, (o, _) in sorted(got.items())
              if o == "fail" and (want.get(t) or ("",))[0] not in ("fail", "flaky")]
    if not failed or len(failed) > RETRY_MAX:
        return None
    print(f"xfstests: tmpfs (the reference): {' '.join(failed)} failed: running again once", flush=True)
    h = Half("tmpfs", failed, skip)
    h.label = "-retry"
    h.wait(deadline)
    again = h.outcomes()
    for t in failed:
        if again.get(t, ("",))[0] == "pass":
            print(f"xfstests: tmpfs: {t} passed the second time: a flake of the reference, not counted "
                  f"(first: {got[t][1][:200]})", flush=True)
            got[t] = again[t]
    return h


def run(a, want, skip):
    fss = [fs for fs in sorted(CONFIG) if a.only in (None, fs)]
    serial = [t for t in SERIAL if not a.tests or t in a.tests]
    parallel = [t for t in a.tests if t not in serial] if a.tests else None
    halves = [] if parallel == [] else [Half(fs, parallel, skip[fs] | set(serial)) for fs in fss]
    if halves:
        print("xfstests: running " + " and ".join(h.fs for h in halves) + " side by side", flush=True)
    deadline = time.monotonic() + TIMEOUT
    bad, got = [], {fs: {} for fs in fss}
    try:
        for h in halves:
            h.wait(deadline)
        for fs in fss if serial else []:
            print(f"xfstests: {fs}: {' '.join(serial)} alone (they set machine-wide sysctls)", flush=True)
            h = Half(fs, serial, skip[fs])
            halves.append(h)
            h.wait(deadline)
        for h in halves:
            got[h.fs].update(h.outcomes())
        if not a.tests and "tmpfs" in got:
            retried = retry_reference(got["tmpfs"], want["tmpfs"], skip["tmpfs"], deadline)
            if retried:
                halves.append(retried)
        for fs in fss:
            h = next(h for h in halves if h.fs == fs)
            h.seconds = sum(x.seconds for x in halves if x.fs == fs)
            if not got[h.fs]:
                with open(h.log) as f:
                    sys.stderr.write("".join(f.readlines()[-40:]))
                bad.append(f"{h.fs}: no results (check's output above)")
                continue
            counts = {k: sum(1 for o, _ in got[h.fs].values() if o == k) for k in ("pass", "fail", "notrun")}
            print(f"xfstests: {h.fs}: {len(got[h.fs])} tests in {h.seconds / 60:.1f} min: "
                  f"{counts['pass']} passed, {counts['fail']} failed, {counts['notrun']} not run", flush=True)
            if not a.tests:
                bad += judge(h.fs, got[h.fs], want[h.fs])
            else:
                for test, (o, msg) in sorted(got[h.fs].items()):
                    print(f"  {h.fs} {test}: {o} {msg[:200]}")
    finally:
        for i, h in enumerate(halves):
            if h.proc.poll() is None:
                os.killpg(h.proc.pid, 9)
                h.proc.wait()
            if bad and not a.tests:
                part = getattr(h, "label", None) or ("" if i < len(fss) or not halves[:len(fss)] else "-serial")
                keep = os.path.join(os.path.dirname(TREE), f"results-{h.fs}{part}")
                shutil.rmtree(keep, ignore_errors=True)
                if os.path.isdir(h.results):
                    shutil.copytree(h.results, keep)
                    shutil.copy(h.log, keep)
                    print(f"xfstests: {h.fs}: results kept in {keep}")
            busy = h.busy_umounts()
            if busy:
                times = sum(1 for line in busy if line.endswith(": busy"))
                print(f"xfstests: {h.fs}: umount found the mount busy {times} times (tried again; umount.sh):")
                sys.stdout.write("".join(f"  {line}\n" for line in busy[:40]))
            h.cleanup()
    if "memfs" in got and "tmpfs" in got:
        worse = [t for t, (o, _) in got["tmpfs"].items() if o == "pass" and got["memfs"].get(t, ("",))[0] != "pass"]
        print(f"xfstests: {len(worse)} tests pass on tmpfs and not on memfs (each listed in "
              "expected-memfs.txt with its reason, and in docs/SEMANTICS.md)")
    for line in bad:
        print("xfstests: " + line)
    if bad:
        sys.exit(1)
    print("xfstests: every outcome as expected")


if __name__ == "__main__":
    main()
