"""Randomized differential test: memfs vs kernel tmpfs, operation by operation.

Owns the package tests/differential. Modules:
  settings  - environment knobs (MEMFS_DIFF_*), seeds, mount profiles, replay command
  libc      - ctypes wrappers for syscalls Python's os module lacks or hides
  gen       - deterministic op generator (pure function of the seed)
  execute   - applies one op to one mounted side and normalizes the outcome
  observe   - observable state: per-path snapshots, statfs, full tree walk, diffs
  harness   - runs a sequence on two sides, compares after every op, minimizes
See tests/differential/README.md for how to run it.
"""
import os
import sys

# tests/mounts.py is shared by all test tiers; make it importable as `mounts`
# whatever import mode pytest uses.
_TESTS_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if _TESTS_DIR not in sys.path:
    sys.path.insert(0, _TESTS_DIR)
