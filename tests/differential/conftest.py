"""Fixtures of the differential test (tests/differential only).

Owns: the diff_root_user fixture and this directory's report header. Independent of
tests/conftest.py on purpose; fixture names carry the diff_ prefix.
"""
import os

import pytest

from . import settings


def pytest_report_header(config):
    seed = settings.random_seed()
    return (f"differential: {len(settings.seeds())} sequences x {settings.n_ops()} ops"
            + (f", random seed {seed} (replay: MEMFS_DIFF_SEED={seed})" if seed else ""))


@pytest.fixture
def diff_root_user():
    """The test mounts file systems and switches uid: it needs root."""
    if os.geteuid() != 0:
        pytest.fail("tests/differential must run as root (it mounts tmpfs and memfs)")
