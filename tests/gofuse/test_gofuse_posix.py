"""go-fuse's POSIX test table, an independent suite, on memfs and on tmpfs.

Owns: building tests/gofuse (a Go test over github.com/hanwen/go-fuse/v2
posixtest, pinned in go.mod/go.sum, fetched through the Go module proxy)
into target/gofuse, and running its ~30 tests (append, O_DIRECT, fallocate,
SEEK_DATA/HOLE, hard links and renames of open files, unlinked open files,
O_TMPFILE, directory seeks and consistency under change, parallel opens,
xattrs, symlink races) in a fresh directory of each kind. Passes when every
test passes on both; posix_test.go skips the one whose expectation is wrong
everywhere (tmpfs fails it too).
"""
import os
import re
import shutil
import subprocess

import pytest

from mounts import REPO

SRC = os.path.dirname(os.path.abspath(__file__))
BINARY = os.path.join(REPO, "target", "gofuse", "posix.test")
RESULT = re.compile(r"^\s*--- (PASS|FAIL|SKIP): TestPosix/(\S+)")


def go_binary():
    for candidate in (shutil.which("go"), "/usr/local/go/bin/go"):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


@pytest.fixture(scope="session")
def posix_test():
    go = go_binary()
    if go is None:
        pytest.fail("the Go toolchain (1.21 or newer) is needed for tests/gofuse", pytrace=False)
    os.makedirs(os.path.dirname(BINARY), exist_ok=True)
    r = subprocess.run([go, "test", "-c", "-o", BINARY, "."], cwd=SRC, capture_output=True, text=True,
                       timeout=600, env=dict(os.environ, GOFLAGS="-mod=readonly"))
    if r.returncode != 0:
        pytest.fail(f"building tests/gofuse failed:\n{r.stdout}\n{r.stderr}", pytrace=False)
    return BINARY


@pytest.mark.timeout(300)
def test_gofuse_posixtest(fs_kind, fs_dir, posix_test):
    r = subprocess.run([posix_test, "-test.v", "-test.run", "^TestPosix$", "-test.timeout", "240s"],
                       env=dict(os.environ, POSIX_DIR=fs_dir), capture_output=True, text=True, timeout=280)
    results = {}
    for line in r.stdout.splitlines():
        m = RESULT.match(line)
        if m:
            results[m.group(2)] = m.group(1)
    failed = sorted(name for name, outcome in results.items() if outcome == "FAIL")
    assert not failed, f"{fs_kind} failed {failed}:\n{r.stdout[-4000:]}"
    assert r.returncode == 0, f"exit {r.returncode}:\n{r.stdout[-4000:]}\n{r.stderr[-2000:]}"
    passed = [name for name, outcome in results.items() if outcome == "PASS"]
    assert len(passed) >= 30, sorted(results.items())
    assert [name for name, outcome in results.items() if outcome == "SKIP"] == ["FcntlFlockLocksFile"]
