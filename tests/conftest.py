"""Pytest fixtures and settings for the whole tests/ tree.

Owns: the file-system kinds every mounted test runs against (kernel tmpfs, the
reference, and memfs), one shared mount per kind per session, a fresh
directory per test, per-test private mounts with their own options, and the
default per-test time limit. Knows nothing about individual tests.

Fixtures:
  fs_kind   "tmpfs" or "memfs" (session scoped; every test using it runs on
            both). For memfs the binary must exist: if it does not, every
            memfs test fails with a message saying so (never skips).
  fs_root   path of the shared mount of fs_kind (size=4G), unmounted at the
            end of the session even when tests fail.
  fs_dir    a fresh, empty directory (mode 0755, root:root) on fs_root.
  make_mount  callable(options) -> path of a private mount of fs_kind with
            those tmpfs-style options; unmounted when the test ends.

Time limits: every test gets @pytest.mark.timeout(60) unless it carries its
own timeout marker (pytest-timeout), or --timeout is given on the command line.
"""
import contextlib
import itertools
import os
import shutil
import sys
import tempfile

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from mounts import MEMFS_BIN, mount, umount  # noqa: E402

KINDS = ("tmpfs", "memfs")
DEFAULT_TIMEOUT = 60
SHARED_MOUNT_OPTIONS = "size=4G"

_dir_counter = itertools.count()


def pytest_collection_modifyitems(config, items):
    if config.getoption("timeout", None):
        return  # an explicit --timeout applies to every test
    for item in items:
        if item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(DEFAULT_TIMEOUT))


def memfs_missing_reason():
    if not os.path.exists(MEMFS_BIN):
        return (f"memfs binary {MEMFS_BIN} does not exist: build it first "
                f"(cargo build --release) or set MEMFS_BIN")
    if not os.access(MEMFS_BIN, os.X_OK):
        return f"memfs binary {MEMFS_BIN} is not executable"
    return None


@contextlib.contextmanager
def fresh_mount(kind, options):
    """Like mounts.mounted(), but also unmounts when mounting itself fails
    half-way (e.g. memfs timed out after the mount went live)."""
    path = tempfile.mkdtemp(prefix=f"{kind}-")
    os.chmod(path, 0o755)
    try:
        mount(kind, path, options)
        yield path
    finally:
        umount(path)
        with contextlib.suppress(OSError):
            os.rmdir(path)


@pytest.fixture(scope="session", params=KINDS)
def fs_kind(request):
    kind = request.param
    if os.geteuid() != 0:
        pytest.fail("the mounted tests need root (mount, mknod, other uids)", pytrace=False)
    if kind == "memfs":
        reason = memfs_missing_reason()
        if reason:
            pytest.fail(reason, pytrace=False)
    return kind


@pytest.fixture(scope="session")
def fs_root(fs_kind):
    with fresh_mount(fs_kind, SHARED_MOUNT_OPTIONS) as path:
        yield path


@pytest.fixture
def fs_dir(fs_root, request):
    name = f"t{next(_dir_counter):05d}-{request.node.originalname}"[:200]
    path = os.path.join(fs_root, name)
    os.mkdir(path)
    os.chmod(path, 0o755)
    yield path
    with contextlib.suppress(Exception):  # best effort: the mount goes away at session end
        shutil.rmtree(path)


@pytest.fixture
def make_mount(fs_kind):
    with contextlib.ExitStack() as stack:
        def mount_with(options):
            return stack.enter_context(fresh_mount(fs_kind, options))
        yield mount_with
