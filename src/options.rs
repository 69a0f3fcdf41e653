//! Mount options: one table, tmpfs's names and meanings.
//!
//! Every option memfs accepts is a row of [`OPTIONS`]: its name, whether it
//! takes a value, a one-line description and how it is applied. Anything
//! else is refused with a message that names it. Sizes accept k, m, g, t
//! suffixes (powers of 1024, as tmpfs's memparse) and, for `size=`, a
//! percentage of RAM; `nr_inodes=0` and `size=0` mean unlimited.

use fuser::{MountOption, UringMode};

use std::path::{Path, PathBuf};

use crate::core::arena::Huge;
use crate::core::cache::CachePolicy;
use crate::core::numa::Policy;
use crate::core::pager::backing::Backing;
use crate::core::pager::codec::Codec;
use crate::core::pager::{PagerConfig, DEFAULT_READAHEAD_PAGES, MIN_CEILING};
use crate::core::types::PAGE_SIZE;
use crate::core::DirIndex;

/// Default and largest `poll_us=` (microseconds), docs/TUNABLES.md.
pub const DEFAULT_POLL_US: u64 = 200;
pub const MAX_POLL_US: u64 = 1_000_000;

/// Default name of the control directory (`ctldir=`).
pub const DEFAULT_CTLDIR: &str = ".memfs";

/// Options after parsing, with defaults filled in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MountOptions {
    /// Data limit in bytes (0 = unlimited).
    pub size: u64,
    /// Inode limit (0 = unlimited).
    pub nr_inodes: u64,
    /// Root directory mode (permission bits, sticky etc.).
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    /// FUSE worker threads.
    pub threads: usize,
    /// How long the worker polls the device after a request (0 = never).
    pub poll_us: u64,
    pub noatime: bool,
    /// Update atime on every read (`strictatime`).
    pub strictatime: bool,
    /// Name shown as the source in /proc/mounts.
    pub fsname: String,
    /// VFS flags passed to the kernel (nosuid, nodev, noexec, ...).
    pub flags: Vec<MountOption>,
    /// Name of the hidden control directory in the root; `None` = disabled.
    pub ctldir: Option<String>,
    /// How directories index names.
    pub dir_index: DirIndex,
    /// `ram=`: RAM ceiling for file data in bytes (0 = no pager).
    pub ram: u64,
    /// `swappct=`: the ceiling as a percentage of `size=` (when `ram=` is not given).
    pub swappct: Option<u64>,
    /// `compress=` (lz4 when a ceiling is set and this is not given).
    pub compress: Option<Codec>,
    /// `backing=`: a directory or block device for pages evicted from RAM.
    pub backing: Option<PathBuf>,
    /// `meta=`: ceiling on metadata bytes (0 = none).
    pub meta: u64,
    /// `metapct=`: the metadata ceiling as a percentage of `ram=` (or of `size=` without one).
    pub metapct: Option<u64>,
    /// `cache=`: the kernel page-cache policy (`None`: not given, OPEN not answered).
    pub cache: Option<CachePolicy>,
    /// `readahead=`: bytes the pager loads ahead of a sequential reader (`None`: default).
    pub readahead: Option<u64>,
    /// `passthrough=`: hand large files' opens to the kernel.
    pub passthrough: PassthroughMode,
    /// `passthrough_min=`: size from which a file's bytes live in a kernel memory file.
    pub passthrough_min: u64,
    /// `passthrough_create=`: files made by a creating open start in a
    /// kernel memory file (and move back at close if small).
    pub passthrough_create: bool,
    /// `huge=`: transparent huge pages for the page arenas and memory files.
    pub huge: Huge,
    /// `uring=`: serve requests over FUSE-over-io_uring queues (docs/TRANSPORT.md).
    pub uring: UringMode,
    /// `mpol=`: NUMA placement of file pages (tmpfs's syntax; docs/NUMA.md).
    pub mpol: Policy,
    /// `errors=`: what an internal error does to the mount.
    pub errors: ErrorsMode,
}

/// `passthrough=auto|on|off`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PassthroughMode {
    /// Where the kernel and the daemon's privileges allow it.
    #[default]
    Auto,
    /// Or the mount fails.
    On,
    Off,
}

/// `errors=continue|remount-ro|panic`: what a panic inside a request does
/// to the mount (ext4's names; fuse/health.rs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ErrorsMode {
    /// Log it; the request gets EIO; serve on.
    Continue,
    /// Log it; the request gets EIO; refuse every change from then on.
    #[default]
    RemountRo,
    /// Log it and end the daemon (the mount then answers ENOTCONN).
    Panic,
}

/// `passthrough_min=` when not given.
pub const DEFAULT_PASSTHROUGH_MIN: u64 = 1 << 20;

/// How one row applies its value.
type Apply = fn(&mut MountOptions, &str) -> Result<(), String>;

/// One accepted option.
pub struct OptionSpec {
    pub name: &'static str,
    /// Whether the option is written `name=value`.
    pub takes_value: bool,
    pub help: &'static str,
    apply: Apply,
}

/// The value of an `auto|on|off` option, as `[auto, on, off]` name it.
fn auto_on_off<T: Copy>(v: &str, [auto, on, off]: [T; 3]) -> Result<T, String> {
    match v {
        "auto" => Ok(auto),
        "on" => Ok(on),
        "off" => Ok(off),
        _ => Err("must be auto, on or off".into()),
    }
}

fn flag(o: &mut MountOptions, f: MountOption) {
    o.flags.retain(|x| !conflicts(x, &f));
    o.flags.push(f);
}

fn conflicts(a: &MountOption, b: &MountOption) -> bool {
    use MountOption::*;
    matches!(
        (a, b),
        (Dev | NoDev, Dev | NoDev)
            | (Suid | NoSuid, Suid | NoSuid)
            | (Exec | NoExec, Exec | NoExec)
            | (Atime | NoAtime | StrictAtime, Atime | NoAtime | StrictAtime)
            | (Sync | Async, Sync | Async)
    )
}

/// The table. Adding an option is adding a row.
pub const OPTIONS: &[OptionSpec] = &[
    OptionSpec {
        name: "size",
        takes_value: true,
        help: "data limit: bytes, k/m/g/t suffix, or N% of RAM; 0 = unlimited (default 50%)",
        apply: |o, v| {
            o.size = parse_size_option(v)?;
            Ok(())
        },
    },
    OptionSpec {
        name: "nr_inodes",
        takes_value: true,
        help: "inode limit, k/m/g suffix allowed; 0 = unlimited (default: RAM pages / 2)",
        apply: |o, v| {
            o.nr_inodes = parse_count(v)?;
            Ok(())
        },
    },
    OptionSpec {
        name: "mode",
        takes_value: true,
        help: "permission bits of the root directory, octal (default 1777)",
        apply: |o, v| {
            o.mode =
                u32::from_str_radix(v, 8).ok().filter(|m| *m <= 0o7777).ok_or("must be an octal mode up to 7777")?;
            Ok(())
        },
    },
    OptionSpec {
        name: "uid",
        takes_value: true,
        help: "owner of the root directory (default: who mounts)",
        apply: |o, v| {
            o.uid = parse_id(v)?;
            Ok(())
        },
    },
    OptionSpec {
        name: "gid",
        takes_value: true,
        help: "group of the root directory (default: who mounts)",
        apply: |o, v| {
            o.gid = parse_id(v)?;
            Ok(())
        },
    },
    OptionSpec {
        name: "threads",
        takes_value: true,
        help: "FUSE worker threads, 1-64 (default 1: measured fastest on 2 vCPUs, docs/TUNABLES.md)",
        apply: |o, v| {
            o.threads = v.parse().ok().filter(|n| (1..=64).contains(n)).ok_or("must be a number from 1 to 64")?;
            Ok(())
        },
    },
    OptionSpec {
        name: "poll_us",
        takes_value: true,
        help: "microseconds the worker polls for the next request before sleeping, 0-1000000, 0 = never \
               (default 200, docs/TUNABLES.md)",
        apply: |o, v| {
            o.poll_us = v
                .parse()
                .ok()
                .filter(|&us| us <= MAX_POLL_US)
                .ok_or("must be a number of microseconds from 0 to 1000000")?;
            Ok(())
        },
    },
    OptionSpec {
        name: "fsname",
        takes_value: true,
        help: "source name shown in /proc/mounts (default memfs)",
        apply: |o, v| {
            if !valid_fsname(v) {
                return Err("must be non-empty without commas or spaces".into());
            }
            o.fsname = v.to_string();
            Ok(())
        },
    },
    OptionSpec {
        name: "noatime",
        takes_value: false,
        help: "never update access times",
        apply: |o, _| {
            o.noatime = true;
            o.strictatime = false;
            flag(o, MountOption::NoAtime);
            Ok(())
        },
    },
    OptionSpec {
        name: "strictatime",
        takes_value: false,
        help: "update access times on every read, as tmpfs does (reads of files below \
               passthrough_min then all reach memfs: docs/SEMANTICS.md)",
        apply: |o, _| {
            o.noatime = false;
            o.strictatime = true;
            flag(o, MountOption::StrictAtime);
            Ok(())
        },
    },
    OptionSpec {
        name: "atime",
        takes_value: false,
        help: "update access times (relatime rules; default)",
        apply: |o, _| {
            o.noatime = false;
            o.strictatime = false;
            flag(o, MountOption::Atime);
            Ok(())
        },
    },
    OptionSpec {
        name: "relatime",
        takes_value: false,
        help: "same as atime: relatime rules (the default)",
        apply: |o, _| {
            o.noatime = false;
            o.strictatime = false;
            o.flags.retain(|x| !conflicts(x, &MountOption::Atime));
            Ok(())
        },
    },
    OptionSpec {
        name: "nosuid",
        takes_value: false,
        help: "ignore set-user/group-id bits on execution",
        apply: |o, _| {
            flag(o, MountOption::NoSuid);
            Ok(())
        },
    },
    OptionSpec {
        name: "suid",
        takes_value: false,
        help: "honour set-user/group-id bits (default for root)",
        apply: |o, _| {
            flag(o, MountOption::Suid);
            Ok(())
        },
    },
    OptionSpec {
        name: "nodev",
        takes_value: false,
        help: "do not interpret device nodes",
        apply: |o, _| {
            flag(o, MountOption::NoDev);
            Ok(())
        },
    },
    OptionSpec {
        name: "dev",
        takes_value: false,
        help: "interpret device nodes (default for root)",
        apply: |o, _| {
            flag(o, MountOption::Dev);
            Ok(())
        },
    },
    OptionSpec {
        name: "noexec",
        takes_value: false,
        help: "do not allow execution of programs",
        apply: |o, _| {
            flag(o, MountOption::NoExec);
            Ok(())
        },
    },
    OptionSpec {
        name: "exec",
        takes_value: false,
        help: "allow execution of programs (default)",
        apply: |o, _| {
            flag(o, MountOption::Exec);
            Ok(())
        },
    },
    OptionSpec {
        name: "sync",
        takes_value: false,
        help: "accepted; memory is always synchronous",
        apply: |o, _| {
            flag(o, MountOption::Sync);
            Ok(())
        },
    },
    OptionSpec {
        name: "async",
        takes_value: false,
        help: "accepted (default)",
        apply: |o, _| {
            flag(o, MountOption::Async);
            Ok(())
        },
    },
    OptionSpec {
        name: "dirsync",
        takes_value: false,
        help: "accepted; memory is always synchronous",
        apply: |o, _| {
            flag(o, MountOption::DirSync);
            Ok(())
        },
    },
    OptionSpec {
        name: "ctldir",
        takes_value: true,
        help: "name of the hidden control directory in the root (tunables, statistics), or `off` (default .memfs)",
        apply: |o, v| {
            o.ctldir = parse_ctldir(v)?;
            Ok(())
        },
    },
    OptionSpec {
        name: "ram",
        takes_value: true,
        help: "RAM ceiling for file data (resident and compressed pages together, with their index): bytes, k/m/g/t suffix, \
               or N% of RAM; colder pages are compressed, then paged to backing= (default: none, all in RAM)",
        apply: |o, v| {
            o.ram = parse_size_option(v)?;
            Ok(())
        },
    },
    OptionSpec {
        name: "swappct",
        takes_value: true,
        help: "the RAM ceiling as N% (1-100) of size= (MemFS's name), instead of ram=",
        apply: |o, v| {
            o.swappct =
                Some(v.parse().ok().filter(|p| (1..=100).contains(p)).ok_or("must be a percentage from 1 to 100")?);
            Ok(())
        },
    },
    OptionSpec {
        name: "compress",
        takes_value: true,
        help: "how pages leaving RAM are compressed: lz4, zstd, zstd:LEVEL (1-19) or off \
               (default lz4 when ram= or swappct= is set)",
        apply: |o, v| {
            o.compress = Some(Codec::parse(v)?);
            Ok(())
        },
    },
    OptionSpec {
        name: "backing",
        takes_value: true,
        help: "directory (an unnamed file is made there) or block device for pages evicted from RAM \
               (default: none; compressed RAM is the last tier)",
        apply: |o, v| {
            if v.is_empty() || !v.starts_with('/') {
                return Err("must be an absolute path to a directory or block device".into());
            }
            // Other options take the last value given, as tmpfs's do; two
            // stores are a mistake (a mount pages to one), and taking the
            // last silently paged to a path the user may not have meant.
            if let Some(was) = o.backing.as_ref().filter(|was| **was != Path::new(v)) {
                return Err(format!("given twice, {} and {v}: a mount pages to one store", was.display()));
            }
            o.backing = Some(PathBuf::from(v));
            Ok(())
        },
    },
    OptionSpec {
        name: "cache",
        takes_value: true,
        help: "kernel page cache for file data: all, metadata (data held once, in memfs) or none (nor attributes); \
               per tree with the user.memfs.cache xattr (default: all, and OPEN not answered)",
        apply: |o, v| {
            o.cache = Some(CachePolicy::parse(v.as_bytes()).ok_or("must be all, metadata or none")?);
            Ok(())
        },
    },
    OptionSpec {
        name: "passthrough",
        takes_value: true,
        help: "auto, on or off: files of passthrough_min or more keep their bytes in a kernel memory file and \
               are opened with FUSE passthrough (kernel speed, held once; needs CAP_SYS_ADMIN; under ram= such files \
               are paged like any other). \
               auto: where possible (default); on: or the mount fails",
        apply: |o, v| {
            o.passthrough = auto_on_off(v, [PassthroughMode::Auto, PassthroughMode::On, PassthroughMode::Off])?;
            Ok(())
        },
    },
    OptionSpec {
        name: "passthrough_min",
        takes_value: true,
        help: "size from which a file moves into a kernel memory file for passthrough, k/m/g suffix \
               (default 1m; 0 = every file)",
        apply: |o, v| {
            o.passthrough_min = parse_count(v)?;
            Ok(())
        },
    },
    OptionSpec {
        name: "passthrough_create",
        takes_value: true,
        help: "on or off: where passthrough works, a file's creating open (O_CREAT) makes it in a kernel \
               memory file and passes through, so that its first writes run at kernel speed too; one that \
               ends below passthrough_min moves back into memfs's heap when last closed (default on)",
        apply: |o, v| {
            o.passthrough_create = match v {
                "on" => true,
                "off" => false,
                _ => return Err("must be on or off".into()),
            };
            Ok(())
        },
    },
    OptionSpec {
        name: "huge",
        takes_value: true,
        help: "never, always, within_size or advise (tmpfs's names): transparent huge pages for the memory \
               files of large files (the private tmpfs's huge=) and, with always, for the daemon's page \
               arenas too; live in .memfs/opts/huge and through remount (default never, as tmpfs: blocks and \
               df as tmpfs counts them)",
        apply: |o, v| {
            o.huge = Huge::parse(v)?;
            Ok(())
        },
    },
    OptionSpec {
        name: "errors",
        takes_value: true,
        help: "continue, remount-ro or panic (ext4's names): what an internal error (a panic inside a request) \
               does: the request gets EIO and it is logged; remount-ro then refuses every change (EROFS) and \
               remounts read-only, so nothing stored is damaged further; panic ends the daemon \
               (default remount-ro)",
        apply: |o, v| {
            o.errors = match v {
                "continue" => ErrorsMode::Continue,
                "remount-ro" => ErrorsMode::RemountRo,
                "panic" => ErrorsMode::Panic,
                _ => return Err("must be continue, remount-ro or panic".into()),
            };
            Ok(())
        },
    },
    OptionSpec {
        name: "mpol",
        takes_value: true,
        help: "NUMA placement of file pages, tmpfs's syntax: default, prefer:N, bind:LIST, interleave[:LIST] \
               or local (LIST as 0-1,3); a node without memory is refused; live in .memfs/opts/mpol and \
               nodemask, and through remount (default: default)",
        apply: |o, v| {
            o.mpol = Policy::parse(v)?;
            Ok(())
        },
    },
    OptionSpec {
        name: "uring",
        takes_value: true,
        help: "auto, on or off: requests over FUSE-over-io_uring, a queue per CPU (Linux 6.14+, and root must \
               write Y to /sys/module/fuse/parameters/enable_uring). auto: when the kernel offers it (default); \
               on: or the mount fails; off: /dev/fuse only",
        apply: |o, v| {
            o.uring = auto_on_off(v, [UringMode::Auto, UringMode::On, UringMode::Off])?;
            Ok(())
        },
    },
    OptionSpec {
        name: "readahead",
        takes_value: true,
        help: "bytes the pager loads ahead when a sequential reader needs a paged-out page, k/m suffix; \
               0 = off (default 512k)",
        apply: |o, v| {
            o.readahead = Some(parse_readahead(v)?);
            Ok(())
        },
    },
    OptionSpec {
        name: "meta",
        takes_value: true,
        help: "ceiling on metadata (inodes, names, xattrs, symlink targets; never paged): bytes with k/m/g/t \
               or N% of RAM; past it, creating names and xattrs gets ENOSPC (default: none)",
        apply: |o, v| {
            o.meta = parse_size_option(v)?;
            Ok(())
        },
    },
    OptionSpec {
        name: "metapct",
        takes_value: true,
        help: "the metadata ceiling as N% (1-100) of ram= (of size= without ram=), MemFS's name, instead of meta=",
        apply: |o, v| {
            o.metapct =
                Some(v.parse().ok().filter(|p| (1..=100).contains(p)).ok_or("must be a percentage from 1 to 100")?);
            Ok(())
        },
    },
    OptionSpec {
        name: "dirindex",
        takes_value: true,
        help: "how directories index names: hash or btree (default hash, see docs/TUNABLES.md)",
        apply: |o, v| {
            o.dir_index = match v {
                "hash" => DirIndex::Hash,
                "btree" => DirIndex::BTree,
                _ => return Err("must be hash or btree".into()),
            };
            Ok(())
        },
    },
    OptionSpec {
        name: "rw",
        takes_value: false,
        help: "read-write (every new mount is; `mount -o remount,ro` makes it read-only)",
        apply: |_, _| Ok(()),
    },
    OptionSpec {
        name: "ro",
        takes_value: false,
        help: "refused for a new mount (it is empty, so read-only is useless); fine with remount",
        apply: |_, _| {
            Err("memfs cannot be mounted read-only: it starts empty, so a read-only mount could never hold anything"
                .into())
        },
    },
    OptionSpec {
        name: "default_permissions",
        takes_value: false,
        help: "accepted; the kernel always checks permissions",
        apply: |_, _| Ok(()),
    },
    OptionSpec {
        name: "allow_other",
        takes_value: false,
        help: "accepted; a mount by root is always open to all users (as tmpfs)",
        apply: |_, _| Ok(()),
    },
];

/// Options that belong to mount(8) or fstab rather than to the file system;
/// mount(8) may pass them to a helper, and they are ignored.
const MOUNT_LEVEL: &[&str] = &[
    "defaults",
    "auto",
    "noauto",
    "user",
    "nouser",
    "users",
    "owner",
    "group",
    "nofail",
    "_netdev",
    "loud",
    "silent",
    "nodiratime",
    "diratime",
    "lazytime",
    "nolazytime",
];

/// Parse a comma-separated option string over `defaults`.
pub fn parse(opts: &str, defaults: MountOptions) -> Result<MountOptions, String> {
    let mut o = defaults;
    for item in opts.split(',').filter(|s| !s.is_empty()) {
        let (name, value) = match item.split_once('=') {
            Some((n, v)) => (n, Some(v)),
            None => (item, None),
        };
        if MOUNT_LEVEL.contains(&name) || name.starts_with("x-") || name == "comment" {
            continue;
        }
        let spec = OPTIONS
            .iter()
            .find(|s| s.name == name)
            .ok_or_else(|| format!("unknown mount option '{item}' (see memfs --help for the list)"))?;
        let value = match (spec.takes_value, value) {
            (true, Some(v)) => v,
            (true, None) => return Err(format!("mount option '{name}' needs a value: {name}=VALUE")),
            (false, None) => "",
            (false, Some(_)) => return Err(format!("mount option '{name}' takes no value")),
        };
        (spec.apply)(&mut o, value).map_err(|why| format!("invalid mount option '{item}': {why}"))?;
    }
    o.ram_ceiling()?;
    o.meta_ceiling()?;
    Ok(o)
}

/// `readahead=` (and `opts/readahead`): bytes, k/m suffix, at most 64m.
pub fn parse_readahead(v: &str) -> Result<u64, String> {
    let n = parse_count(v)?;
    if n > 64 << 20 {
        return Err("at most 64m".into());
    }
    Ok(n)
}

/// Physical memory in bytes.
pub fn ram_bytes() -> u64 {
    // SAFETY: sysconf has no memory-safety preconditions.
    let (pages, page) = unsafe { (libc::sysconf(libc::_SC_PHYS_PAGES), libc::sysconf(libc::_SC_PAGESIZE)) };
    (pages.max(0) as u64).saturating_mul(page.max(0) as u64)
}

impl MountOptions {
    /// tmpfs's defaults: half of RAM, RAM pages / 2 inodes, mode 1777, owned by the mounter.
    pub fn defaults(uid: u32, gid: u32) -> MountOptions {
        let ram = ram_bytes();
        MountOptions {
            // tmpfs: half of RAM in whole pages, rounded down.
            size: ram / PAGE_SIZE / 2 * PAGE_SIZE,
            nr_inodes: ram / PAGE_SIZE / 2,
            mode: 0o1777,
            uid,
            gid,
            threads: 1,
            poll_us: DEFAULT_POLL_US,
            noatime: false,
            strictatime: false,
            fsname: "memfs".into(),
            flags: vec![],
            ctldir: Some(DEFAULT_CTLDIR.into()),
            dir_index: DirIndex::default(),
            ram: 0,
            swappct: None,
            compress: None,
            backing: None,
            meta: 0,
            metapct: None,
            cache: None,
            readahead: None,
            passthrough: PassthroughMode::default(),
            passthrough_min: DEFAULT_PASSTHROUGH_MIN,
            passthrough_create: true,
            huge: Huge::Never,
            uring: UringMode::Auto,
            mpol: Policy::Default,
            errors: ErrorsMode::default(),
        }
    }

    /// `size=` in whole pages, rounded up (as tmpfs).
    pub fn max_pages(&self) -> u64 {
        self.size.div_ceil(PAGE_SIZE)
    }

    /// `huge=` for the private tmpfs of memory files: never under a RAM
    /// ceiling, whatever was asked. The pager pages memory files out a
    /// page at a time by punching holes, and a hole in a large folio gives
    /// no memory back unless the kernel can split the folio (measured: with
    /// within_size, paged-out memory files kept their RAM and writes got
    /// ENOSPC at twice the ceiling).
    pub fn memory_file_huge(&self) -> Huge {
        if self.ram > 0 || self.swappct.is_some() {
            Huge::Never
        } else {
            self.huge
        }
    }

    /// The pager's RAM ceiling in bytes from `ram=` or `swappct=` (0: no
    /// pager), or why the pager options do not fit together.
    pub fn ram_ceiling(&self) -> Result<u64, String> {
        let ceiling = match (self.ram, self.swappct) {
            (r, Some(_)) if r > 0 => return Err("give ram= or swappct=, not both".into()),
            (_, Some(_)) if self.size == 0 => {
                return Err("invalid mount option 'swappct': needs a size= limit (it is a percentage of size=)".into())
            }
            (_, Some(pct)) => (self.size.saturating_mul(pct) / 100).max(PAGE_SIZE),
            (r, None) => r.div_ceil(PAGE_SIZE) * PAGE_SIZE,
        };
        // What the user gave, not rounded up to whole pages: ram=63k is
        // below the least, and ram=10 is 10 bytes, not 4096.
        let (name, given) = match self.swappct {
            Some(pct) => ("swappct", format!("{pct}% of size=, {ceiling} bytes,")),
            None => ("ram", format!("{} bytes", self.ram)),
        };
        let asked = if self.swappct.is_some() { ceiling } else { self.ram };
        if asked > 0 && asked < MIN_CEILING {
            return Err(format!(
                "invalid mount option '{name}': a RAM ceiling of {given} is too small to hold anything; \
                 the least is {}k",
                MIN_CEILING >> 10
            ));
        }
        if ceiling == 0 {
            let needs = "needs a RAM ceiling: ram=SIZE (64k or more; ram=0 means none) or swappct=N";
            if self.compress.is_some() {
                return Err(format!("invalid mount option 'compress': {needs}"));
            }
            if self.backing.is_some() {
                return Err(format!("invalid mount option 'backing': {needs}"));
            }
        }
        Ok(ceiling)
    }

    /// The metadata ceiling in bytes (0: none), or why `meta=`/`metapct=` do not fit.
    pub fn meta_ceiling(&self) -> Result<u64, String> {
        match (self.meta, self.metapct) {
            (m, Some(_)) if m > 0 => Err("give meta= or metapct=, not both".into()),
            (_, Some(pct)) => {
                let base = match self.ram_ceiling()? {
                    0 => self.size,
                    ram => ram,
                };
                if base == 0 {
                    return Err("invalid mount option 'metapct': needs a ram= or size= limit to take a share of".into());
                }
                Ok((base.saturating_mul(pct) / 100).max(64 << 10))
            }
            // As metapct='s floor: less does not hold the root directory's
            // first entries (meta=10 was taken, and every create got ENOSPC).
            (m, None) if m > 0 && m < 64 << 10 => Err(format!(
                "invalid mount option 'meta': a metadata ceiling of {m} bytes is too small; the least is 64k"
            )),
            (m, None) => Ok(m),
        }
    }

    /// The pager's settings, opening the backing store; `None` without a ceiling.
    pub fn pager_config(&self) -> Result<Option<PagerConfig>, String> {
        let ram = self.ram_ceiling()?;
        if ram == 0 {
            return Ok(None);
        }
        let backing = match &self.backing {
            Some(path) => Some(Backing::open(path).map_err(|e| format!("invalid mount option 'backing': {e}"))?),
            None => None,
        };
        let readahead = self.readahead.unwrap_or(DEFAULT_READAHEAD_PAGES * PAGE_SIZE).div_ceil(PAGE_SIZE);
        Ok(Some(PagerConfig { ram, codec: self.compress.unwrap_or(Codec::Lz4), backing, readahead }))
    }
}

/// Whether `v` can be the source name shown in /proc/mounts (`fsname=`).
pub fn valid_fsname(v: &str) -> bool {
    !v.is_empty() && !v.contains([',', ' ', '\n'])
}

/// `size=` in whole pages, rounded up as tmpfs rounds it (the mount option,
/// the control file `opts/size`, a remount).
pub fn size_in_pages(v: &str) -> Result<u64, String> {
    Ok(parse_size_option(v)?.div_ceil(PAGE_SIZE))
}

/// A byte count with k/m/g/t/p/e suffix (1024-based), or N% of RAM (`size=`,
/// and the control file `opts/size`).
pub fn parse_size_option(v: &str) -> Result<u64, String> {
    if let Some(pct) = v.strip_suffix('%') {
        let pct: u64 = pct.parse().map_err(|_| "percentage must be a whole number".to_string())?;
        if pct == 0 || pct > 100 {
            return Err("percentage must be between 1 and 100".into());
        }
        // As tmpfs: RAM bytes * pct / 100, later rounded up to whole pages.
        return Ok(ram_bytes().saturating_mul(pct) / 100);
    }
    parse_count(v)
}

/// A count with an optional k/m/g/t/p/e suffix (powers of 1024) (`nr_inodes=`,
/// and the control file `opts/nr_inodes`). Strict, like the kernel's
/// memparse as tmpfs uses it: digits, then at most one suffix letter.
pub fn parse_count(v: &str) -> Result<u64, String> {
    const HELP: &str = "must be a whole number, optionally followed by k, m, g or t";
    let digits = v.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    let suffix = &v[digits.len()..];
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(HELP.into());
    }
    let shift = match suffix.to_ascii_lowercase().as_str() {
        "" => 0,
        "k" => 10,
        "m" => 20,
        "g" => 30,
        "t" => 40,
        "p" => 50,
        "e" => 60,
        _ => return Err(HELP.into()),
    };
    let n: u64 = digits.parse().map_err(|_| "too large".to_string())?;
    n.checked_mul(1 << shift).ok_or_else(|| "too large".to_string())
}

/// `ctldir=`: `off`, or a name usable in a directory (not `.` or `..`, no
/// `/`, at most 255 bytes; commas cannot occur, they separate options).
fn parse_ctldir(v: &str) -> Result<Option<String>, String> {
    match v {
        "off" => Ok(None),
        "" | "." | ".." => Err("must be a file name, or off".into()),
        v if v.contains('/') || v.len() > 255 => Err("must be a file name (no '/', at most 255 bytes), or off".into()),
        v => Ok(Some(v.to_string())),
    }
}

fn parse_id(v: &str) -> Result<u32, String> {
    v.parse().map_err(|_| "must be a numeric id".to_string())
}

/// The option table as text, for --help.
pub fn help_table() -> String {
    let mut s = String::new();
    for o in OPTIONS {
        let name = if o.takes_value { format!("{}=", o.name) } else { o.name.to_string() };
        s.push_str(&format!("  {name:<20} {}\n", o.help));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d() -> MountOptions {
        MountOptions::defaults(0, 0)
    }

    #[test]
    fn sizes_and_suffixes() {
        let o = parse("size=1G,nr_inodes=1k,mode=755,uid=5,gid=6", d()).unwrap();
        assert_eq!((o.size, o.nr_inodes, o.mode, o.uid, o.gid), (1 << 30, 1024, 0o755, 5, 6));
        assert_eq!(parse("size=100m", d()).unwrap().size, 100 << 20);
        assert_eq!(parse("size=4097", d()).unwrap().max_pages(), 2);
        let half = parse("size=50%", d()).unwrap().size;
        assert!(half > 0 && half <= ram_bytes() / 2);
        assert_eq!(parse("nr_inodes=0", d()).unwrap().nr_inodes, 0);
        assert_eq!(parse("nr_inodes=5K", d()).unwrap().nr_inodes, 5 << 10);
        assert_eq!(parse("size=1t", d()).unwrap().size, 1 << 40);
        assert_eq!(parse_count("16e"), Err("too large".into()));
        assert_eq!(parse_count("99999999999999999999"), Err("too large".into()));
        for bad in ["", "k", "1 2", " 1", "1.5G", "1GB", "1KiB", "0x10", "+1", "1g2"] {
            assert!(parse_count(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn uring_is_auto_on_or_off() {
        assert_eq!(d().uring, UringMode::Auto);
        assert_eq!(parse("uring=on", d()).unwrap().uring, UringMode::On);
        assert_eq!(parse("uring=off", d()).unwrap().uring, UringMode::Off);
        assert_eq!(parse("uring=auto", d()).unwrap().uring, UringMode::Auto);
        assert!(parse("uring=yes", d()).unwrap_err().contains("uring"));
    }

    #[test]
    fn refusals_name_the_option() {
        for bad in [
            "size=abc",
            "size=-1",
            "size=1x",
            "size=0%",
            "size=101%",
            "mode=999",
            "threads=0",
            "uid=x",
            "bogus",
            "size",
            "noatime=1",
            "ctldir=",
            "ctldir=a/b",
            "ctldir=..",
            "dirindex=list",
            "dirindex",
            "poll_us=-1",
            "poll_us=1000001",
            "poll_us=1ms",
            "poll_us",
            "ram=lots",
            "ram=101%",
            "ram=1",
            "ram=60k",
            "ram=63k",
            "meta=10",
            "swappct=1,size=1M",
            "swappct=0",
            "swappct=150",
            "compress=gzip",
            "compress=zstd:99",
            "backing=relative/dir",
            "ram=1G,swappct=50",
            "compress=lz4",
            "backing=/var/tmp",
            "size=0,swappct=50",
            "meta=lots",
            "metapct=0",
            "metapct=101",
            "meta=1M,metapct=5",
            "size=0,metapct=5",
            "cache=some",
            "readahead=lots",
            "readahead=1g",
            "cache",
            "huge=yes",
            "huge",
        ] {
            let err = parse(bad, d()).unwrap_err();
            let name = bad.split('=').next().unwrap();
            assert!(err.contains(name), "{bad}: {err}");
        }
        assert!(parse("ro", d()).unwrap_err().contains("read-only"));
        // The value given, not the whole pages it rounds to; ram=0 is no ceiling.
        assert!(parse("ram=10", d()).unwrap_err().contains("10 bytes"));
        assert!(parse("ram=0,backing=/var/tmp", d()).unwrap_err().contains("ram=0 means none"));
        assert!(parse("ram=64k,meta=64k", d()).is_ok());
        // Two stores are refused, naming both; the same one twice is one.
        let err = parse("ram=1m,backing=/var/tmp,backing=/tmp", d()).unwrap_err();
        assert!(err.contains("'backing=/tmp'") && err.contains("/var/tmp and /tmp"), "{err}");
        assert_eq!(parse("ram=1m,backing=/tmp,backing=/tmp", d()).unwrap().backing, Some(PathBuf::from("/tmp")));
    }

    #[test]
    fn huge() {
        assert_eq!(d().huge, Huge::Never, "tmpfs's default: docs/TUNABLES.md says why");
        assert_eq!(parse("huge=within_size", d()).unwrap().memory_file_huge(), Huge::WithinSize);
        let paged = parse("ram=64M,huge=always", d()).unwrap();
        assert_eq!((paged.huge, paged.memory_file_huge()), (Huge::Always, Huge::Never), "the arenas keep it");
        for (v, h) in [("always", Huge::Always), ("within_size", Huge::WithinSize), ("advise", Huge::Advise)] {
            assert_eq!(parse(&format!("huge={v}"), d()).unwrap().huge, h);
        }
    }

    #[test]
    fn poll_us() {
        assert_eq!(d().poll_us, DEFAULT_POLL_US);
        assert_eq!(parse("poll_us=0", d()).unwrap().poll_us, 0);
        assert_eq!(parse("poll_us=1000000", d()).unwrap().poll_us, MAX_POLL_US);
    }

    #[test]
    fn ctldir_and_dirindex() {
        let o = d();
        assert_eq!((o.ctldir.as_deref(), o.dir_index), (Some(".memfs"), DirIndex::Hash));
        let o = parse("ctldir=.ctl,dirindex=btree", d()).unwrap();
        assert_eq!((o.ctldir.as_deref(), o.dir_index), (Some(".ctl"), DirIndex::BTree));
        assert_eq!(parse("ctldir=off", d()).unwrap().ctldir, None);
        assert_eq!(parse("dirindex=hash", d()).unwrap().dir_index, DirIndex::Hash);
        assert!(parse(&format!("ctldir={}", "x".repeat(256)), d()).is_err());
    }

    #[test]
    fn mount_level_options_are_ignored_and_flags_do_not_conflict() {
        let o = parse("defaults,noauto,x-systemd.automount,nodev,dev,noatime", d()).unwrap();
        assert_eq!(o.flags, vec![MountOption::Dev, MountOption::NoAtime]);
        assert!(o.noatime);
    }

    #[test]
    fn the_last_atime_mode_named_wins() {
        let o = parse("noatime,strictatime", d()).unwrap();
        assert!(o.strictatime && !o.noatime);
        assert_eq!(o.flags, vec![MountOption::StrictAtime]);
        let o = parse("strictatime,noatime", d()).unwrap();
        assert!(o.noatime && !o.strictatime);
        assert_eq!(o.flags, vec![MountOption::NoAtime]);
        let o = parse("strictatime,relatime", d()).unwrap();
        assert!(!o.noatime && !o.strictatime);
        assert!(o.flags.is_empty());
    }
}
