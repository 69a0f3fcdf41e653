#!/bin/bash
# Replays a judge walk of 2026-12-07 (docs/PAGER.md): a 1.1 GB copy of /usr under
# ram=64M, a first scan ending with bin/, a hot set of 60 small files read three
# times, a second scan of bin/ and doc/, then how much of the hot set is still
# resident. Usage (as root): scripts/pager-second-scan.sh [MEMFS_BINARY] [,EXTRA_OPTIONS]
BIN=${1:-target/release/memfs}; OPTS=$2
BIN=$(realpath "$BIN")
M=/tmp/j8/m; B=/var/tmp/j8
mkdir -p $M $B
$BIN -o size=2G,ram=64M,backing=$B$OPTS $M || exit 1
cp -a /usr/lib/x86_64-linux-gnu /usr/share/doc /usr/bin $M/
cd $M
echo 3 > /proc/sys/vm/drop_caches
(find x86_64-linux-gnu doc -type f; find bin -type f | tac) | tr "\n" "\0" | xargs -0 cat > /dev/null
find x86_64-linux-gnu -maxdepth 1 -type f -size -1000k -size +20k | head -60 > /tmp/j8-hot.txt
for i in 1 2 3; do echo 3 > /proc/sys/vm/drop_caches; cat $(cat /tmp/j8-hot.txt) > /dev/null; done
echo "hot before the scan: $($BIN where $(cat /tmp/j8-hot.txt) | awk '{for(i=1;i<=NF;i++){if($i=="resident")r+=$(i+1); if($i=="pages")p+=$(i-1)}} END{print r" of "p" pages resident"}')"
echo 3 > /proc/sys/vm/drop_caches
find bin doc -type f -print0 | xargs -0 cat > /dev/null
echo "hot after the scan:  $($BIN where $(cat /tmp/j8-hot.txt) | awk '{for(i=1;i<=NF;i++){if($i=="resident")r+=$(i+1); if($i=="pages")p+=$(i-1)}} END{print r" of "p" pages resident"}')"
grep -E "^(resident|kernel|memory_file|zip|ram_|small|main|charged|overhead|meta)" .memfs/stats/pager | tr "\n" " "; echo
$BIN where bin/* doc 2>/dev/null | awk '$0 ~ /resident [1-9]/' | sort -t"(" -k2 | head -30
echo "bin after the scan:  $($BIN where bin | tail -1)"
$BIN prime bin/bash 2>&1 | tail -1
echo "bash after prime:    $($BIN where bin/bash | tail -1)"
cd /; umount $M; rm -rf /tmp/j8 $B
