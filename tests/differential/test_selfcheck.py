"""Self-checks of the differential harness, on kernel tmpfs only (no memfs needed).

Owns: proof that the harness is deterministic, that tmpfs vs tmpfs shows no
difference (the normalization compares no identities or absolute times),
that the generated sequences reach the interesting errors, and that a
deliberately perturbed side IS reported, with the seed and a replay command.
"""
import collections
import os

import pytest

from . import gen, harness, observe

CLEAN_SEEDS = range(1, 9)
INTERESTING = {"ENOTEMPTY", "EISDIR", "EEXIST", "ENOENT", "EINVAL", "ENOSPC", "ENOTDIR",
               "EACCES", "EPERM", "ELOOP", "ENAMETOOLONG", "ENODATA", "E2BIG", "EBADF"}
TMPFS2 = ("tmpfs", "tmpfs")


@pytest.mark.timeout(30)
def test_generator_is_deterministic():
    a, b = gen.generate(7, 300), gen.generate(7, 300)
    assert [str(op) for op in a] == [str(op) for op in b]
    assert [str(op) for op in gen.generate(7, 100)] == [str(op) for op in a[:100]]
    assert [str(op) for op in gen.generate(8, 300)] != [str(op) for op in a]
    assert {op.kind for op in gen.generate(7, 600)} == set(gen.WEIGHTS)  # every kind is generated


@pytest.mark.timeout(300)
def test_tmpfs_vs_tmpfs_has_no_mismatch_and_reaches_interesting_errors(diff_root_user):
    seen = collections.Counter()
    for seed in CLEAN_SEEDS:
        result = harness.run_sequence(seed, 300, kinds=TMPFS2)
        assert result.mismatch is None, result.mismatch.report()
        assert result.executed == 300
        seen.update(outcome for (_, outcome), n in result.outcomes.items() for _ in range(n))
    missing = INTERESTING - set(seen)
    assert not missing, f"errors never reached in {len(CLEAN_SEEDS)} sequences: {missing}; seen {seen}"
    assert seen["ok"] > 0.2 * sum(seen.values())


# ---- perturbations: each changes side B only, in one way the comparator must notice ------

def _at(index, action):
    """Perturbation running action(side, op, outcome) on side B at op index; returns outcome."""
    def perturb(pos, op, side_index, side, outcome):
        if side_index == 1 and op.index == index:
            return action(side, op, outcome) or outcome
        return outcome
    return perturb


def _first(pred, action):
    """Perturbation on side B at the first op where pred(op, outcome) holds."""
    done = []

    def perturb(pos, op, side_index, side, outcome):
        if side_index == 1 and not done and pred(op, outcome):
            done.append(op.index)
            return action(side, op, outcome) or outcome
        return outcome
    return perturb


def _overwrite_first_byte(side, op, outcome):
    fd = os.open(side.abs(op.args["path"]), os.O_WRONLY)
    os.pwrite(fd, b"\x7f", 0)
    os.close(fd)


def _hidden_space(side, op, outcome):
    fd = os.open(side.root, os.O_TMPFILE | os.O_RDWR, 0o600)
    os.write(fd, b"x" * 65536)
    side.slots["perturbation"] = fd  # closed with the other slots at the end


def _file_in_untouched_dir(side, op, outcome):
    touched = set(harness._touched(op, {}))
    for rel, snap in observe.tree(side.root)["paths"].items():
        if rel and rel not in touched and snap.get("stat", {}).get("type") == "dir":
            os.close(os.open(os.path.join(side.abs(rel), "zz"), os.O_CREAT | os.O_WRONLY, 0o644))
            return
    raise AssertionError("no untouched directory to perturb: pick another seed/op")


READ_ONLY_KINDS = {"stat", "readlink", "readdir", "getxattr", "listxattr", "access", "statfs"}

PERTURBATIONS = {
    # name: (seed, perturbation, expected "what differs" prefix)
    "outcome": (3, _at(40, lambda side, op, out: ("err", "EIO")), "outcome"),
    "content": (4, _first(lambda op, out: op.kind == "write" and out[0] == "ok" and out[1] > 0,
                          _overwrite_first_byte), "state of touched paths"),
    "mode": (3, _at(25, lambda side, op, out: os.chmod(side.root, 0o700)), "state of touched paths"),
    "extra entry": (3, _at(25, lambda side, op, out: os.mkdir(side.abs("zz"))), "state of touched paths"),
    "ctime only": (5, _first(lambda op, out: op.kind in READ_ONLY_KINDS and op.index > 5,
                             lambda side, op, out: os.chmod(side.root, os.stat(side.root).st_mode)),
                   "timestamp relations"),
    "statfs only": (4, _at(30, _hidden_space), "statfs"),
    "tree only": (2, _first(lambda op, out: op.index >= 150 and op.kind not in gen.SLOT_KINDS,
                            _file_in_untouched_dir), "full tree walk"),
}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("name", list(PERTURBATIONS))
def test_perturbed_side_is_reported(name, diff_root_user):
    seed, perturb, what = PERTURBATIONS[name]
    result = harness.run_sequence(seed, 300, kinds=TMPFS2, perturb=perturb, walk_every=1)
    m = result.mismatch
    assert m is not None, f"perturbation {name!r} went unnoticed"
    assert m.what.startswith(what), m.report()
    report = m.report()
    assert f"seed={seed}" in report and f"MEMFS_DIFF_SEED={seed}" in report, report
    assert str(m.op) in report


@pytest.mark.timeout(120)
def test_minimizer_shrinks_to_the_culprit(diff_root_user):
    perturb = _at(57, lambda side, op, out: ("err", "EIO"))
    m = harness.run_sequence(2, 100, kinds=TMPFS2, perturb=perturb).mismatch
    assert m is not None and m.op.index == 57
    kept, found, runs, _ = harness.minimize(m, TMPFS2, budget_seconds=60, perturb=perturb)
    assert kept == [57], kept
    assert found.op.index == 57
