#!/usr/bin/env bash
# The README's first command: install what is missing, build memfs, install
# /usr/local/bin/memfs and /sbin/mount.memfs (mount.fuse.memfs for remounts), and mount a memfs at
# ${MOUNTPOINT:-/mnt/memfs} with ${OPTIONS:-size=1G}. Run as root.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/deps.sh
make install
# FUSE over io_uring (memfs's uring=auto, the default) is off in the kernel
# until root turns on the fuse module's enable_uring parameter.
param=/sys/module/fuse/parameters/enable_uring
uring_note=""
if [ -e "$param" ]; then
  if [ "$(id -u)" = 0 ] && [ "$(cat "$param")" != Y ]; then
    echo Y > "$param"
    echo "turned on FUSE over io_uring (echo Y > $param): memfs mounts serve requests on a queue per CPU"
  fi
  uring_note="
  FUSE over io_uring is on until the next reboot. To keep it on, as root:
      echo 'options fuse enable_uring=1' > /etc/modprobe.d/fuse-uring.conf
  (fuse is often built into the kernel: then add fuse.enable_uring=1 to the
  kernel command line instead). uring=off on a mount keeps it on /dev/fuse."
fi
mnt="${MOUNTPOINT:-/mnt/memfs}"
opts="${OPTIONS:-size=1G}"
mkdir -p "$mnt"
if findmnt -rn -M "$mnt" -t fuse.memfs >/dev/null; then
  echo "a memfs was already mounted at $mnt: left as it is"
else
  /usr/local/bin/memfs -o "$opts" "$mnt"
fi
size=$(df -h --output=size "$mnt" | tail -1 | tr -d ' ')
cat <<MSG

memfs is mounted at $mnt (size $size):
  df -h $mnt
      size and use
  cp -r /etc $mnt/ && ls $mnt
      use it like any directory
  mount -o remount,size=2G $mnt
      resize it live
  umount $mnt
      unmount and free all its memory
  mkdir -p /mnt/other && mount -t memfs -o size=2G memfs /mnt/other
      another one, through mount(8)
  in /etc/fstab:  memfs /mnt/scratch memfs size=4G,mode=1777 0 0
$uring_note
MSG
