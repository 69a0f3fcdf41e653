#!/usr/bin/env bash
# The README's second command: install what is missing, then run the whole
# test suite (fmt, clippy, unit tests, mounted conformance and differential
# tests against kernel tmpfs). Run as root: the tests mount tmpfs and memfs
# and act as other users.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/deps.sh --tests
make test
