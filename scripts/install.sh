#!/usr/bin/env bash
# The README's first command: install what is missing, build memfs, install
# /usr/local/bin/memfs and /sbin/mount.memfs (mount.fuse.memfs for remounts), and mount a memfs at
# ${MOUNTPOINT:-/mnt/memfs} with ${OPTIONS:-size=1G}. Run as root.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/deps.sh
make install
mnt="${MOUNTPOINT:-/mnt/memfs}"
opts="${OPTIONS:-size=1G}"
mkdir -p "$mnt"
if grep -q " $mnt fuse.memfs " /proc/mounts; then
  echo "a memfs is already mounted at $mnt"
else
  /usr/local/bin/memfs -o "$opts" "$mnt"
fi
cat <<MSG

memfs is mounted at $mnt ($opts):
  df -h $mnt                       size and use
  cp -r ~/src $mnt/ ; ls $mnt       use it like any directory
  umount $mnt                      unmount and free all its memory
  mount -t memfs -o size=2G memfs /mnt/other      another one, via mount(8)
  fstab:  memfs /mnt/scratch memfs size=4G,mode=1777 0 0
MSG
