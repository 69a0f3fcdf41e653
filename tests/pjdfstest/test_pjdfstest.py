"""pjdfstest, an independent POSIX conformance suite, on memfs and on tmpfs.

Owns: running the Rust rewrite of pjdfstest (crates.io `pjdfstest`, pinned in
scripts/deps.sh, built into target/pjdfstest) on a private mount of each kind,
with tests/pjdfstest/pjdfstest.toml, and comparing the outcomes. Its ~400
cases (chmod, chown, link, mkdir, mkfifo, mknod, open, rename, rmdir, symlink,
truncate, ftruncate, unlink, utimensat, posix_fallocate, their errno matrices
and timestamp rules, as other users too) are not ours: they are a second
opinion next to tests/conformance.

The 13 EROFS cases remount the file system read-only and back with
`mount -o remount,ro|rw DIR`; they run alone, in a second run (in a whole run
tmpfs, too, is sometimes "busy": a file still open for writing). mount(8)
runs /sbin/mount.fuse.memfs for a memfs (which `make install` provides); so
that this tier needs no install, a `mount` found first in PATH makes the same
call to the built binary.

Passes when tmpfs passes every case it does not skip (otherwise the
configuration is wrong, not memfs), memfs passes every case, and both skip
only the expected cases.
"""
import os
import re
import shutil
import subprocess
import textwrap

import pytest

from mounts import MEMFS_BIN, REPO

PJDFSTEST = os.environ.get("PJDFSTEST_BIN",
                           os.path.join(REPO, "target", "pjdfstest", "bin", "pjdfstest"))
CONFIG = os.path.join(os.path.dirname(os.path.abspath(__file__)), "pjdfstest.toml")
RESULT = re.compile(r"^(\S+::\S+)\s+(ok|FAILED|skipped)\s*$")

# pathconf(LINK_MAX) has no answer on Linux tmpfs (nor through FUSE): skipped.
NO_LINK_MAX = "link::link_count_max"

MOUNT_SHIM = textwrap.dedent("""\
    #!/bin/sh
    # mount(8) stand-in for pjdfstest's remounts (`mount -o remount,ro DIR`):
    # the same change through the built binary for a memfs; anything else
    # goes to the real mount(8).
    if [ "$#" -eq 3 ] && [ "$1" = "-o" ] && \\
       [ "$(findmnt -n -o FSTYPE --mountpoint "$3")" = "fuse.memfs" ]; then
        exec "{memfs}" -o "$2" "$3"
    fi
    exec /usr/bin/mount "$@"
    """)


def run_pjdfstest(workdir, secondary, tmp_path, config, patterns=()):
    shim = tmp_path / "bin"
    shim.mkdir(exist_ok=True)
    (shim / "mount").write_text(MOUNT_SHIM.format(memfs=MEMFS_BIN))
    (shim / "mount").chmod(0o755)
    env = dict(os.environ, PATH=f"{shim}:{os.environ.get('PATH', '/usr/bin:/bin')}")
    proc = subprocess.run([PJDFSTEST, "-c", config, "-p", workdir, "-s", secondary, *patterns],
                          cwd=workdir, env=env, capture_output=True, text=True, timeout=500)
    results, reasons, last = {}, {}, None
    for line in proc.stdout.splitlines():
        m = RESULT.match(line)
        if m:
            last = m.group(1)
            results[last] = m.group(2)
        elif last and line.startswith("\t") and last not in reasons:
            reasons[last] = line.strip()
    if not results:
        pytest.fail(f"pjdfstest reported nothing (exit {proc.returncode}):\n"
                    f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return results, reasons, proc.stdout


def check_outcome(fs_kind, results, reasons, out, expected_skips):
    failed = sorted(name for name, r in results.items() if r == "FAILED")
    skipped = {name for name, r in results.items() if r == "skipped"}
    assert not failed, (f"{fs_kind} failed {len(failed)} pjdfstest case(s):\n"
                        + "\n".join(f"  {n}: {reasons.get(n, '')}" for n in failed))
    assert skipped == expected_skips, (
        "skipped cases differ from the expected ones:\n"
        + "\n".join(f"  {n}: {reasons.get(n, '')}" for n in sorted(skipped ^ expected_skips)))


@pytest.fixture
def pjd_mounts(fs_kind, make_mount):
    if not os.access(PJDFSTEST, os.X_OK):
        pytest.fail(f"{PJDFSTEST} is missing: scripts/deps.sh --tests builds it "
                    f"(or set PJDFSTEST_BIN)", pytrace=False)
    if shutil.which("findmnt") is None:
        pytest.fail("findmnt (util-linux) is missing", pytrace=False)
    root = make_mount("size=1G")
    secondary = make_mount("size=64M")  # a second file system, for the EXDEV cases
    workdir = os.path.join(root, "pjd")
    os.mkdir(workdir)
    os.chmod(workdir, 0o755)
    return workdir, secondary


@pytest.mark.timeout(600)
def test_pjdfstest(fs_kind, pjd_mounts, tmp_path):
    workdir, secondary = pjd_mounts
    results, reasons, out = run_pjdfstest(workdir, secondary, tmp_path, CONFIG)
    assert len(results) > 350, f"only {len(results)} cases ran:\n{out[-3000:]}"
    erofs = {name for name in results if "erofs" in name}
    assert len(erofs) >= 13, sorted(erofs)
    check_outcome(fs_kind, results, reasons, out, erofs | {NO_LINK_MAX})


@pytest.mark.timeout(300)
def test_pjdfstest_read_only_remount(fs_kind, pjd_mounts, tmp_path):
    """EROFS from every call that would change a file system remounted ro."""
    workdir, secondary = pjd_mounts
    config = tmp_path / "remount.toml"
    text = open(CONFIG).read()
    assert "allow_remount = false" in text
    config.write_text(text.replace("allow_remount = false", "allow_remount = true"))
    results, reasons, out = run_pjdfstest(workdir, secondary, tmp_path, str(config), ["erofs"])
    assert len(results) >= 13 and all("erofs" in name for name in results), sorted(results)
    check_outcome(fs_kind, results, reasons, out, set())
    assert not os.statvfs(workdir).f_flag & os.ST_RDONLY, "left read-only after the run"
