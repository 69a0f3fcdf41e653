#!/usr/bin/env bash
# Installs what building and testing memfs needs, if missing: Debian's fuse3
# (fusermount3, /dev/fuse tools), attr/acl (tests), postmark/fio (benchmarks),
# the Python test packages and the Rust fmt/clippy components. With --tests
# (scripts/test.sh) also pjdfstest, an independent POSIX conformance suite
# from crates.io built into target/pjdfstest (tests/pjdfstest runs it on
# memfs and tmpfs), and what xfstests needs to build and run (tests/xfstests);
# installing memfs needs neither. tests/gofuse needs Go
# 1.21 or newer (not Debian 12's golang-go); it fetches its module itself.
set -euo pipefail
cd "$(dirname "$0")/.."
# apt-get install WHAT PACKAGE...: Debian packages, quietly.
apt_install() {
  local what=$1
  shift
  echo "installing$what: $*"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "$@" >/dev/null
}
need=()
for pair in findmnt:util-linux fusermount3:fuse3 setfattr:attr setfacl:acl postmark:postmark fio:fio make:make cc:gcc; do
  command -v "${pair%%:*}" >/dev/null 2>&1 || need+=("${pair#*:}")
done
if [ ${#need[@]} -gt 0 ]; then
  apt_install "" "${need[@]}"
fi
if ! command -v cargo >/dev/null 2>&1; then
  echo "cargo is missing: install Rust 1.85 or newer (https://rustup.rs) and run this again" >&2
  exit 1
fi
if command -v rustup >/dev/null 2>&1; then
  rustup component add rustfmt clippy >/dev/null 2>&1 || true
fi
python3 -m pip install -q -r requirements-dev.txt 2>&1 | grep -v "Running pip as the 'root' user" || true
[ "${1:-}" = "--tests" ] || exit 0
PJDFSTEST_VERSION=0.2.2
if ! target/pjdfstest/bin/pjdfstest --version 2>/dev/null | grep -qx "pjdfstest $PJDFSTEST_VERSION"; then
  echo "building pjdfstest $PJDFSTEST_VERSION into target/pjdfstest"
  cargo install -q --locked --force --version "$PJDFSTEST_VERSION" --root target/pjdfstest pjdfstest
fi
# xfstests (tests/xfstests/run.py builds the pinned release it carries):
# Debian's build and run dependencies, as its README lists them, less what
# only block-device file systems use (lvm2, kernel headers).
xfs_need=()
for p in acl attr autoconf automake bc dbench dump e2fsprogs fio gawk gcc libacl1-dev libaio-dev \
    libattr1-dev libcap-dev libgdbm-compat-dev libgdbm-dev libtool libtool-bin liburing-dev make patch \
    psmisc python3 quota sqlite3 uuid-dev uuid-runtime xfslibs-dev xfsprogs; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || xfs_need+=("$p")
done
if [ ${#xfs_need[@]} -gt 0 ]; then
  apt_install " for xfstests" "${xfs_need[@]}"
fi
