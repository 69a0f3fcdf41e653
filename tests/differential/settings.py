"""Environment knobs of the differential test, and the replay command.

Owns: which seeds run, how many ops, the mount options of each sequence, and
how a failure is replayed. Every knob is an environment variable:

  MEMFS_DIFF_SEED=N       run only seed N (replay); also disables the random seed
  MEMFS_DIFF_KEEP=i,j,... with MEMFS_DIFF_SEED: run only these op indices (minimized replay)
  MEMFS_DIFF_SEQS=M       number of fixed seeds (default 20): seeds BASE .. BASE+M-1
  MEMFS_DIFF_SEED_BASE=B  first fixed seed (default 1)
  MEMFS_DIFF_OPS=K        ops per sequence (default 300)
  MEMFS_DIFF_RANDOM=0     no extra random-seed sequence (default: one per run, seed printed)
  MEMFS_DIFF_OPTIONS=...  mount options for both sides (default: by seed, see PROFILES)
  MEMFS_DIFF_WALK_EVERY=W full tree walk every W ops (default 10; always at the end)
  MEMFS_DIFF_MIN_BUDGET=S seconds per pytest session for minimizing failures (default 90)
"""
import os
import random

import mounts

DEFAULT_SEQS = 20
DEFAULT_OPS = 300
# Even seeds: roomy enough to build trees, small enough that big writes and
# fallocate hit ENOSPC. Odd seeds: tiny, so blocks and inodes run out often.
PROFILES = ["size=8M,nr_inodes=2000", "size=1M,nr_inodes=40"]
_RANDOM_SEED = random.SystemRandom().randrange(1_000_000, 2**31)


def _int(name, default):
    value = os.environ.get(name, "")
    return int(value) if value.strip() else default


def replay_seed():
    return _int("MEMFS_DIFF_SEED", None)


def n_ops():
    return _int("MEMFS_DIFF_OPS", DEFAULT_OPS)


def keep():
    value = os.environ.get("MEMFS_DIFF_KEEP", "").strip()
    return [int(x) for x in value.split(",") if x.strip()] if value else None


def walk_every():
    return max(1, _int("MEMFS_DIFF_WALK_EVERY", 10))


def min_budget():
    return _int("MEMFS_DIFF_MIN_BUDGET", 90)


def seeds():
    """[(test id, seed)] for the memfs-vs-tmpfs test."""
    if replay_seed() is not None:
        return [(f"seed-{replay_seed()}", replay_seed())]
    base = _int("MEMFS_DIFF_SEED_BASE", 1)
    out = [(f"seed-{s}", s) for s in range(base, base + _int("MEMFS_DIFF_SEQS", DEFAULT_SEQS))]
    if os.environ.get("MEMFS_DIFF_RANDOM", "1") != "0":
        out.append((f"random-{_RANDOM_SEED}", _RANDOM_SEED))
    return out


def random_seed():
    """This run's random seed, or None when it is disabled."""
    return next((s for i, s in seeds() if i.startswith("random")), None)


def options(seed):
    return os.environ.get("MEMFS_DIFF_OPTIONS") or PROFILES[seed % len(PROFILES)]


def memfs_missing():
    """Why the memfs binary cannot be used, or None."""
    path = mounts.MEMFS_BIN
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        return (f"memfs binary not found at {path}: build it first (cargo build --release); "
                "CI builds it before running the tests")
    return None


def replay_command(seed, ops, keep_indices=None):
    env = f"MEMFS_DIFF_SEED={seed} MEMFS_DIFF_OPS={ops}"
    if keep_indices is not None:
        # minimization walks the tree after every op, so the replay must too
        env += f" MEMFS_DIFF_KEEP={','.join(map(str, keep_indices))} MEMFS_DIFF_WALK_EVERY=1"
    if os.environ.get("MEMFS_DIFF_OPTIONS"):
        env += f" MEMFS_DIFF_OPTIONS={os.environ['MEMFS_DIFF_OPTIONS']}"
    return f"{env} python3 -m pytest -q tests/differential -k memfs_vs_tmpfs"
