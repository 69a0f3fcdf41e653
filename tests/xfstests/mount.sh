#!/bin/bash
# mount(8) as xfstests calls it, for a memfs run: a mount of type
# fuse.memfs, or a remount of one, goes to the memfs binary under test
# (MEMFS_BIN) the way mount(8) calls its /sbin/mount.fuse.memfs helper, so
# that the tier needs nothing installed; every other call goes to mount(8).
set -u
memfs=${MEMFS_BIN:?MEMFS_BIN: the memfs binary under test}
real=/usr/bin/mount
type="" opts="" pos=()
args=("$@")
while [ $# -gt 0 ]; do
	case "$1" in
	-t|--types) type=${2:-}; shift 2 || shift ;;
	-t*) type=${1#-t}; shift ;;
	--types=*) type=${1#--types=}; shift ;;
	-o|--options) opts=${opts:+$opts,}${2:-}; shift 2 || shift ;;
	-o*) opts=${opts:+$opts,}${1#-o}; shift ;;
	--options=*) opts=${opts:+$opts,}${1#--options=}; shift ;;
	-*) shift ;;
	*) pos+=("$1"); shift ;;
	esac
done
n=${#pos[@]}
[ "$n" -ge 1 ] || exec "$real" "${args[@]}"
dir=${pos[$((n - 1))]}
remount=false
case ",$opts," in *,remount,*) remount=true ;; esac
if [ -z "$type" ] && $remount && [ -d "$dir" ] && \
	[ "$(findmnt -n -o FSTYPE --mountpoint "$dir" 2>/dev/null)" = fuse.memfs ]; then
	type=fuse.memfs
fi
[ "$type" = fuse.memfs ] || exec "$real" "${args[@]}"
if $remount; then
	exec "$memfs" -o "$opts" "$dir"
fi
[ "$n" -ge 2 ] || { echo "mount: memfs: a source and a mount point are needed" >&2; exit 1; }
exec "$memfs" "${pos[$((n - 2))]}" "$dir" ${opts:+-o "$opts"}
