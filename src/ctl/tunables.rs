//! The live tunables: one row per file in `opts/`. Adding a tunable is
//! adding a row to [`TUNABLES`] (and a paragraph to docs/TUNABLES.md).
//!
//! Owns parsing and applying written values, as fs/fuse/control.c does:
//! one value per file, bounds checked, `FsError::Invalid` (EINVAL) for
//! anything out of range, and nothing changes when a write is refused.
//! Values are parsed by the same functions as the mount options.

use crate::core::arena::Huge;
use crate::core::numa::{self, Policy};
use crate::core::pager::codec::Codec;
use crate::core::types::PAGE_SIZE;
use crate::core::{Fs, FsError, FsResult};
use crate::options::{parse_count, parse_readahead, parse_size_option, size_in_pages, MAX_POLL_US};
use crate::sync::{Arc, AtomicU64, Ordering};

/// Live settings of the layers above the core (the FUSE transport), read
/// by those layers on every use and changed here.
#[derive(Debug)]
pub struct Knobs {
    /// How long the FUSE worker keeps polling the device after a request,
    /// in microseconds; 0 = never poll (fuse/poll.rs).
    pub poll_us: AtomicU64,
}

impl Knobs {
    pub const fn new(poll_us: u64) -> Knobs {
        Knobs { poll_us: AtomicU64::new(poll_us) }
    }
}

/// What a tunable reads and changes.
pub struct Target<'a> {
    pub fs: &'a Arc<Fs>,
    pub knobs: &'a Knobs,
}

/// One live tunable: a file in `opts/`.
pub struct Tunable {
    /// File name in `opts/`.
    pub name: &'static str,
    /// One line, shown in `opts/README` and docs/TUNABLES.md.
    pub help: &'static str,
    /// The current value, as a read shows it (without the newline).
    pub get: fn(&Target) -> String,
    /// Parse and apply a value (already trimmed); `Invalid` changes nothing.
    pub set: fn(&Target, &str) -> FsResult<()>,
}

/// The table.
pub const TUNABLES: &[Tunable] = &[
    Tunable {
        name: "size",
        help: "data limit in bytes (reads back in bytes); write bytes, a k/m/g/t suffix or N% of RAM; 0 = unlimited; \
               growing always works, shrinking below the data in use fails with EINVAL",
        get: |t| t.fs.usage().max_pages.saturating_mul(PAGE_SIZE).to_string(),
        set: |t, v| t.fs.set_max_pages(size_in_pages(v).map_err(|_| FsError::Invalid)?),
    },
    Tunable {
        name: "nr_inodes",
        help: "inode limit; write a number with an optional k/m/g suffix; 0 = unlimited; \
               shrinking below the inodes in use fails with EINVAL",
        get: |t| t.fs.usage().max_inodes.to_string(),
        set: |t, v| t.fs.set_max_inodes(parse_count(v).map_err(|_| FsError::Invalid)?),
    },
    Tunable {
        name: "ram",
        help: "RAM ceiling for file data in bytes (ram=); write bytes, a k/m/g/t suffix or N% of RAM; \
               lowering it pages out at once as far as it can; 0 = no ceiling; EINVAL on a mount without ram= \
               and below the least it takes now (stats/pager: ram_least_bytes, at least 64k)",
        get: |t| t.fs.pager_stats().map_or(0, |p| p.ram_limit_bytes).to_string(),
        set: |t, v| {
            // The value as written is checked, as the mount option's is:
            // 63k, rounded up to whole pages, would pass as 64k.
            let asked = parse_size_option(v).map_err(|_| FsError::Invalid)?;
            if asked > 0 && asked < crate::core::pager::MIN_CEILING {
                return Err(FsError::Invalid); // too small to hold anything
            }
            let ram = asked.div_ceil(PAGE_SIZE).saturating_mul(PAGE_SIZE);
            t.fs.set_ram_limit(ram)?;
            // A write has no terminal to warn on: the daemon's log has it,
            // and `memfs -o remount,ram=` prints it from stats/pager.
            let size = t.fs.usage().max_pages.saturating_mul(PAGE_SIZE);
            let warnings = [
                crate::sysmem::ceiling_warning(ram, crate::sysmem::usable_memory()),
                crate::sysmem::ceiling_above_size_warning(size, ram),
            ];
            for line in warnings.into_iter().flatten() {
                log::warn!("{line}");
            }
            Ok(())
        },
    },
    Tunable {
        name: "meta",
        help: "ceiling on metadata in bytes (meta=, metapct=; inodes, names, xattrs, symlink targets, never paged); \
               write bytes, a k/m/g/t suffix or N% of RAM; 0 = none; below the metadata in use (stats: \
               metadata_bytes) fails with EINVAL",
        get: |t| t.fs.max_meta_bytes().to_string(),
        set: |t, v| t.fs.set_max_meta_bytes(parse_size_option(v).map_err(|_| FsError::Invalid)?),
    },
    Tunable {
        name: "compress",
        help: "how cold pages are compressed (compress=): lz4, zstd, zstd:LEVEL (1-19) or off; pages compressed \
               before stay readable; `off` on a mount without ram=, where a write is EINVAL",
        get: |t| t.fs.pager_stats().map_or_else(|| "off".to_string(), |p| p.codec),
        set: |t, v| t.fs.set_compress(Codec::parse(v).map_err(|_| FsError::Invalid)?),
    },
    Tunable {
        name: "readahead",
        help: "bytes the pager loads ahead of a sequential reader that needs a paged-out page (readahead=), \
               reads back in whole pages; write bytes or a k/m suffix, at most 64m; 0 = off; EINVAL without ram=",
        get: |t| t.fs.readahead_bytes().to_string(),
        set: |t, v| t.fs.set_readahead(parse_readahead(v).map_err(|_| FsError::Invalid)?),
    },
    Tunable {
        name: "no_data",
        help: "1 = discard written bytes but keep file sizes (reads of them return zeros), \
               for benchmarking metadata alone; 0 = store data (default)",
        get: |t| u64::from(t.fs.no_data()).to_string(),
        set: |t, v| {
            t.fs.set_no_data(switch(v)?);
            Ok(())
        },
    },
    Tunable {
        name: "noatime",
        help: "1 = never update access times (as the noatime mount option), 0 = relatime rules; \
               `mount -o remount,noatime` sets it",
        get: |t| u64::from(t.fs.noatime()).to_string(),
        set: |t, v| {
            t.fs.set_noatime(switch(v)?);
            Ok(())
        },
    },
    Tunable {
        name: "strictatime",
        help: "1 = every read updates the access time (as the strictatime mount option), 0 = relatime \
               rules; noatime wins; `mount -o remount,strictatime` sets it",
        get: |t| u64::from(t.fs.strictatime()).to_string(),
        set: |t, v| {
            t.fs.set_strictatime(switch(v)?);
            Ok(())
        },
    },
    Tunable {
        name: "poll_us",
        help: "microseconds the FUSE worker keeps polling for the next request before it sleeps, \
               while a CPU is idle to spare (0-1000000; 0 = never poll)",
        get: |t| t.knobs.poll_us.load(Ordering::Relaxed).to_string(),
        set: |t, v| {
            let us = v.parse::<u64>().ok().filter(|&us| us <= MAX_POLL_US).ok_or(FsError::Invalid)?;
            t.knobs.poll_us.store(us, Ordering::Relaxed);
            Ok(())
        },
    },
    Tunable {
        name: "huge",
        help: "transparent huge pages (huge=): never, always, within_size or advise; for arena chunks mapped \
               from now on and for new folios of memory files (under ram= memory files stay never)",
        get: |_| crate::core::arena::huge().to_string(),
        set: |t, v| t.fs.set_huge(Huge::parse(v).map_err(|_| FsError::Invalid)?),
    },
    Tunable {
        name: "passthrough_create",
        help: "on or off (passthrough_create=): a file's creating open makes it in a kernel memory file and \
               passes through (off by itself under ram=, huge=always, near full, or without passthrough)",
        get: |t| if t.fs.kernel_new_files() { "on" } else { "off" }.to_string(),
        set: |t, v| {
            let on = match v {
                "on" => true,
                "off" => false,
                _ => return Err(FsError::Invalid),
            };
            t.fs.set_kernel_new_files(on);
            Ok(())
        },
    },
    Tunable {
        name: "mpol",
        help: "NUMA placement of file pages (mpol=, tmpfs's syntax): default, prefer:N, bind:LIST, \
               interleave[:LIST] or local; new pages follow a change at once, `migrate` moves the others; \
               a node without memory is EINVAL",
        get: |t| t.fs.placement().policy().to_string(),
        set: |t, v| set_policy(t, Policy::parse(v)),
    },
    Tunable {
        name: "nodemask",
        help: "the nodes new file pages may go to, as a hex nodemask (00000000,00000003 = nodes 0 and 1); \
               writing one keeps mpol's mode (default and local become bind; prefer takes one node); \
               a node without memory is EINVAL",
        get: |t| t.fs.placement().nodemask(),
        set: |t, v| {
            let nodes = numa::parse_mask(v).map_err(|e| refused("nodemask", &e))?;
            set_policy(t, t.fs.placement().policy().with_nodes(nodes))
        },
    },
    Tunable {
        name: "migrate",
        help: "write 1 to move the pages of file data that mpol does not allow onto nodes it does, on a \
               thread of its own (EBUSY while one runs); reads 1 while one runs; progress and counts in \
               stats/migrate (`memfs migrate MOUNTPOINT` does all this)",
        get: |t| u64::from(t.fs.migration().running).to_string(),
        set: |t, v| match v {
            "1" if t.fs.start_migration() => Ok(()),
            "1" => Err(FsError::Busy),
            _ => Err(FsError::Invalid),
        },
    },
];

/// Apply a parsed policy; a bad one is EINVAL, logged with why.
fn set_policy(t: &Target, p: Result<Policy, String>) -> FsResult<()> {
    let p = p.map_err(|e| refused("mpol", &e))?;
    t.fs.set_policy(p).map_err(|e| refused("mpol", &e))
}

fn refused(file: &str, why: &str) -> FsError {
    log::info!("opts/{file}: refused: {why}");
    FsError::Invalid
}

/// A 0/1 switch; anything else is EINVAL.
fn switch(v: &str) -> FsResult<bool> {
    match v {
        "0" => Ok(false),
        "1" => Ok(true),
        _ => Err(FsError::Invalid),
    }
}

/// Longest value accepted in one write; longer writes are EINVAL.
pub const MAX_VALUE_LEN: usize = 256;

/// The value in a write: UTF-8, surrounding whitespace (the shell's
/// newline) removed, not empty, not longer than [`MAX_VALUE_LEN`].
pub fn value_of(data: &[u8]) -> FsResult<&str> {
    if data.len() > MAX_VALUE_LEN {
        return Err(FsError::Invalid);
    }
    let v = std::str::from_utf8(data).map_err(|_| FsError::Invalid)?.trim_ascii();
    if v.is_empty() {
        return Err(FsError::Invalid);
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::{Caller, FsConfig, ROOT_INO};

    fn tunable(name: &str) -> &'static Tunable {
        TUNABLES.iter().find(|t| t.name == name).unwrap()
    }

    static KNOBS: Knobs = Knobs::new(0);

    fn target(fs: &Arc<Fs>) -> Target<'_> {
        Target { fs, knobs: &KNOBS }
    }

    fn set(fs: &Arc<Fs>, name: &str, raw: &[u8]) -> FsResult<()> {
        (tunable(name).set)(&target(fs), value_of(raw)?)
    }

    fn get(fs: &Arc<Fs>, name: &str) -> u64 {
        (tunable(name).get)(&target(fs)).parse().unwrap()
    }

    #[test]
    fn ram_moves_the_ceiling_and_pages_out_at_once() {
        use crate::core::pager::{codec::Codec, Pager, PagerConfig};
        let fs = Arc::new(Fs::new(FsConfig::with_limits(0, 0)));
        assert_eq!(set(&fs, "ram", b"1M"), Err(FsError::Invalid), "no pager on this mount");
        assert_eq!(get(&fs, "ram"), 0);
        let pager = std::sync::Arc::new(Pager::new(PagerConfig {
            ram: 1 << 20,
            codec: Codec::Lz4,
            backing: None,
            readahead: 0,
        }));
        let mut cfg = FsConfig::with_limits(0, 0);
        cfg.pager = Some(pager.clone());
        let fs = Arc::new(Fs::new(cfg));
        let me = Caller { uid: 0, gid: 0, pid: 0 };
        let f = fs.mknod(ROOT_INO, b"f", libc::S_IFREG | 0o644, 0, 0, &me).unwrap();
        fs.write(f.ino, 0, &vec![b'x'; 64 * PAGE_SIZE as usize], &me).unwrap();
        assert_eq!(pager.stats().resident_pages, 64);
        set(&fs, "ram", b"64k\n").unwrap();
        assert_eq!(get(&fs, "ram"), 64 << 10);
        assert!(pager.stats().ram_bytes() <= 64 << 10, "{:?}", pager.stats());
        assert_eq!(set(&fs, "ram", b"lots"), Err(FsError::Invalid));
        assert_eq!(set(&fs, "ram", b"60k"), Err(FsError::Invalid), "below the least ceiling");
        assert_eq!(set(&fs, "ram", b"63k"), Err(FsError::Invalid), "refused as the mount option is, not rounded up");
        assert_eq!(set(&fs, "ram", b"65535"), Err(FsError::Invalid), "refused as the mount option is, not rounded up");
        assert_eq!(get(&fs, "ram"), 64 << 10);
        assert_eq!(fs.read(f.ino, 0, 64 * PAGE_SIZE as u32).unwrap(), vec![b'x'; 64 * PAGE_SIZE as usize]);
    }

    #[test]
    fn size_parses_like_the_mount_option_and_reads_back_in_bytes() {
        let fs = Arc::new(Fs::new(FsConfig::with_limits(10, 100)));
        assert_eq!(get(&fs, "size"), 10 * PAGE_SIZE);
        set(&fs, "size", b"2G\n").unwrap();
        assert_eq!(get(&fs, "size"), 2 << 30);
        set(&fs, "size", b"4097").unwrap(); // rounded up to whole pages
        assert_eq!(get(&fs, "size"), 2 * PAGE_SIZE);
        set(&fs, "size", b"0").unwrap();
        assert_eq!(get(&fs, "size"), 0);
    }

    #[test]
    fn invalid_values_change_nothing() {
        let fs = Arc::new(Fs::new(FsConfig::with_limits(10, 100)));
        let bad: &[&[u8]] =
            &[b"", b"\n", b"abc", b"-1", b"1x", b"0%", b"101%", b"\xff\xfe", b"1 2", &[b'1'; MAX_VALUE_LEN + 1]];
        for raw in bad {
            assert_eq!(set(&fs, "size", raw), Err(FsError::Invalid), "{raw:?}");
            assert_eq!(set(&fs, "nr_inodes", raw), Err(FsError::Invalid), "{raw:?}");
            assert_eq!(set(&fs, "no_data", raw), Err(FsError::Invalid), "{raw:?}");
        }
        for raw in [&b"2"[..], b"yes", b"01", b"true"] {
            assert_eq!(set(&fs, "no_data", raw), Err(FsError::Invalid), "{raw:?}");
        }
        assert_eq!(get(&fs, "size"), 10 * PAGE_SIZE);
        assert_eq!(get(&fs, "nr_inodes"), 100);
        assert_eq!(get(&fs, "no_data"), 0);
    }

    #[test]
    fn poll_us_is_bounded_and_invalid_values_change_nothing() {
        let fs = Arc::new(Fs::new(FsConfig::with_limits(0, 0)));
        let knobs = Knobs::new(50);
        let t = Target { fs: &fs, knobs: &knobs };
        let poll = tunable("poll_us");
        for bad in ["-1", "1000001", "1k", "0x10", "abc", "1.5"] {
            assert_eq!((poll.set)(&t, bad), Err(FsError::Invalid), "{bad}");
            assert_eq!((poll.get)(&t), "50");
        }
        (poll.set)(&t, "1000000").unwrap();
        assert_eq!((poll.get)(&t), "1000000");
        (poll.set)(&t, "0").unwrap();
        assert_eq!(knobs.poll_us.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn no_data_toggles() {
        let fs = Arc::new(Fs::new(FsConfig::with_limits(0, 0)));
        set(&fs, "no_data", b"1\n").unwrap();
        assert!(fs.no_data());
        assert_eq!(get(&fs, "no_data"), 1);
        set(&fs, "no_data", b" 0 ").unwrap();
        assert!(!fs.no_data());
    }

    #[test]
    fn noatime_stops_and_restarts_atime_updates_by_reads() {
        let fs = Arc::new(Fs::new(FsConfig::with_limits(0, 0)));
        let f = fs.mknod(ROOT_INO, b"f", 0o100644, 0, 0, &Caller::ROOT).unwrap();
        fs.write(f.ino, 0, b"data", &Caller::ROOT).unwrap();
        set(&fs, "noatime", b"1\n").unwrap();
        assert_eq!(get(&fs, "noatime"), 1);
        let before = fs.getattr(f.ino).unwrap().atime;
        fs.read(f.ino, 0, 4).unwrap();
        assert_eq!(fs.getattr(f.ino).unwrap().atime, before);
        set(&fs, "noatime", b"0").unwrap();
        fs.read(f.ino, 0, 4).unwrap();
        let after = fs.getattr(f.ino).unwrap();
        assert!(after.atime > before && after.atime >= after.mtime);
        assert_eq!(set(&fs, "noatime", b"2"), Err(FsError::Invalid));
    }

    #[test]
    fn shrinking_below_use_is_refused_and_changes_nothing() {
        let fs = Arc::new(Fs::new(FsConfig::with_limits(100, 100)));
        let me = Caller { uid: 0, gid: 0, pid: 1 };
        for name in [&b"a"[..], b"b"] {
            let f = fs.mknod(ROOT_INO, name, libc::S_IFREG | 0o644, 0, 0, &me).unwrap();
            fs.write(f.ino, 0, &[7u8; 3 * PAGE_SIZE as usize], &me).unwrap();
        }
        // 6 pages and 3 inodes (the root counts) in use.
        assert_eq!(set(&fs, "size", b"20k"), Err(FsError::Invalid));
        assert_eq!(get(&fs, "size"), 100 * PAGE_SIZE);
        assert_eq!(set(&fs, "nr_inodes", b"2"), Err(FsError::Invalid));
        assert_eq!(get(&fs, "nr_inodes"), 100);
        assert_eq!(set(&fs, "size", b"24k"), Ok(()));
        assert_eq!(set(&fs, "nr_inodes", b"3"), Ok(()));
        assert_eq!(get(&fs, "nr_inodes"), 3);
    }

    #[test]
    fn meta_moves_the_metadata_ceiling_and_not_below_use() {
        let fs = Arc::new(Fs::new(FsConfig::with_limits(100, 0)));
        let me = Caller { uid: 0, gid: 0, pid: 1 };
        assert_eq!(get(&fs, "meta"), 0, "no ceiling given");
        fs.mknod(ROOT_INO, b"a", libc::S_IFREG | 0o644, 0, 0, &me).unwrap();
        let used = fs.usage().meta_bytes;
        assert!(used > 0);
        assert_eq!(set(&fs, "meta", (used - 1).to_string().as_bytes()), Err(FsError::Invalid));
        assert_eq!(get(&fs, "meta"), 0, "a refused value changes nothing");
        assert_eq!(set(&fs, "meta", b"lots"), Err(FsError::Invalid));
        set(&fs, "meta", used.to_string().as_bytes()).unwrap();
        assert_eq!(get(&fs, "meta"), used);
        let e = fs.mknod(ROOT_INO, b"b", libc::S_IFREG | 0o644, 0, 0, &me).map(|_| ());
        assert_eq!(e, Err(FsError::NoSpace), "no room for another inode");
        set(&fs, "meta", b"1m\n").unwrap();
        assert_eq!(get(&fs, "meta"), 1 << 20);
        fs.mknod(ROOT_INO, b"b", libc::S_IFREG | 0o644, 0, 0, &me).unwrap();
        set(&fs, "meta", b"0").unwrap();
        assert_eq!(get(&fs, "meta"), 0);
    }

    #[test]
    fn help_is_one_line_and_names_are_unique() {
        let mut names: Vec<_> = TUNABLES.iter().map(|t| t.name).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), TUNABLES.len());
        for t in TUNABLES {
            assert!(!t.help.contains('\n') && !t.help.contains("  "), "{}", t.name);
        }
    }
}
