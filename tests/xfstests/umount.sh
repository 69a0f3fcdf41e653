#!/bin/bash
# umount(8) as xfstests calls it, in both halves (memfs and tmpfs): the
# real umount, tried again for up to UMOUNT_RETRY_S seconds (default 3)
# while it says "target is busy", as tests/mounts.py does for the mounted
# tests. Why a memfs mount is busy for a moment: a `df` of every mount
# (xfstests runs one in places: _df_device) holds a reference to the mount
# while memfs answers its STAT and STATFS, a FUSE round trip (30-50 us,
# 100 us to over 1 ms on a mount just made) where tmpfs answers in about a
# microsecond. Measured: mount, rm -rf, umount 100 times beside a `df`
# loop: memfs was busy 17 times, tmpfs never (docs/SEMANTICS.md). The
# project's CI once saw this at check's start, and the whole memfs half
# ran nothing. Each busy answer is logged to UMOUNT_LOG, the first with
# what held the mount (processes whose cwd, root or open files are under
# it: none, in the cases seen), and run.py reports the count. A test that
# expects EBUSY still gets it, later.
set -u
real=/usr/bin/umount
log=${UMOUNT_LOG:-/dev/null}
deadline=$((SECONDS + ${UMOUNT_RETRY_S:-3}))
holders() {
	# The mount point: the last argument, or where the source is mounted.
	local arg=${!#} dir p f
	dir=$(findmnt -n -o TARGET --mountpoint "$arg" 2>/dev/null || findmnt -n -o TARGET --source "$arg" 2>/dev/null | head -1)
	[ -n "$dir" ] || return
	for p in /proc/[0-9]*; do
		for f in "$p/cwd" "$p/root" "$p"/fd/*; do
			case "$(readlink "$f" 2>/dev/null)" in
			"$dir" | "$dir"/*) echo "  held by pid ${p#/proc/} ($(tr '\0' ' ' <"$p/cmdline" 2>/dev/null | cut -c1-80)): $f -> $(readlink "$f")" ;;
			esac
		done
	done
	findmnt -n -R -o TARGET "$dir" 2>/dev/null | tail -n +2 | sed 's/^/  submount: /'
}
while :; do
	err=$("$real" "$@" 2>&1)
	rc=$?
	[ $rc -eq 0 ] && exit 0
	case "$err" in
	*"target is busy"*)
		# What held it, the first time only (the scan takes most of a second).
		{ echo "$(date +%T.%N) umount $*: busy"; [ -n "${seen:-}" ] || holders "$@"; } >>"$log" 2>/dev/null
		seen=1
		if [ $SECONDS -lt $deadline ]; then
			sleep 0.1
			continue
		fi
		;;
	esac
	echo "$err" >&2
	exit $rc
done
