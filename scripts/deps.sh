#!/usr/bin/env bash
# Installs what building and testing memfs needs, if missing: Debian's fuse3
# (fusermount3, /dev/fuse tools), attr/acl (tests), postmark/fio (benchmarks),
# the Python test packages, and the Rust fmt/clippy components.
set -euo pipefail
cd "$(dirname "$0")/.."
need=()
for pair in fusermount3:fuse3 setfattr:attr setfacl:acl postmark:postmark fio:fio make:make cc:gcc; do
  command -v "${pair%%:*}" >/dev/null 2>&1 || need+=("${pair#*:}")
done
if [ ${#need[@]} -gt 0 ]; then
  echo "installing: ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${need[@]}" >/dev/null
fi
if ! command -v cargo >/dev/null 2>&1; then
  echo "cargo is missing: install Rust 1.85 or newer (https://rustup.rs) and run this again" >&2
  exit 1
fi
if command -v rustup >/dev/null 2>&1; then
  rustup component add rustfmt clippy >/dev/null 2>&1 || true
fi
python3 -m pip install -q -r requirements-dev.txt 2>&1 | grep -v "Running pip as the 'root' user" || true
