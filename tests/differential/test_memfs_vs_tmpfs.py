"""The differential test proper: memfs vs kernel tmpfs on random op sequences.

Owns: test_memfs_vs_tmpfs, one test per seed (settings.seeds(): the fixed
seeds, plus one random seed per run whose value is in the test id). Each
sequence runs on fresh mounts of both, with identical options.
"""
import pytest

from . import harness, settings

# A sequence takes seconds; minimizing a failure up to 45 s more.
TIMEOUT = max(300, 120 + settings.n_ops())


@pytest.mark.timeout(TIMEOUT)
@pytest.mark.parametrize("seed", [s for _, s in settings.seeds()], ids=[i for i, _ in settings.seeds()])
def test_memfs_vs_tmpfs(seed, diff_root_user):
    missing = settings.memfs_missing()
    if missing:
        pytest.fail(missing, pytrace=False)  # fail, never skip: CI builds memfs first
    print(f"differential seed={seed} ops={settings.n_ops()} options={settings.options(seed)}")
    report = harness.check(seed, settings.n_ops(), keep=settings.keep())
    if report:
        pytest.fail(report, pytrace=False)
