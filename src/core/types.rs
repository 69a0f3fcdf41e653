//! Plain value types the core exchanges with its callers: inode numbers,
//! file kinds, timestamps, attributes, the caller's identity and the
//! requests for setattr. No locking and no FUSE types here.

use std::time::{SystemTime, UNIX_EPOCH};

/// Inode number. The root is [`ROOT_INO`]; numbers are never reused.
pub type Ino = u64;
/// The root directory's inode number (FUSE requires 1).
pub const ROOT_INO: Ino = 1;
/// Page size: the unit of data storage, of `size=` accounting and of `st_blocks`.
pub const PAGE_SIZE: u64 = 4096;
/// Longest name in a directory, in bytes (NAME_MAX).
pub const NAME_MAX: usize = 255;
/// Longest symlink target in bytes, without the terminating NUL (as tmpfs: one page).
pub const SYMLINK_MAX: usize = PAGE_SIZE as usize - 1;
/// Largest file size (MAX_LFS_FILESIZE, as tmpfs).
pub const MAX_FILE_SIZE: u64 = i64::MAX as u64;

/// Mode bits.
pub mod mode {
    pub const S_ISUID: u32 = 0o4000;
    pub const S_ISGID: u32 = 0o2000;
    pub const S_ISVTX: u32 = 0o1000;
    pub const S_IRWXU: u32 = 0o700;
    pub const S_IRWXG: u32 = 0o070;
    pub const S_IRWXO: u32 = 0o007;
    pub const S_IXGRP: u32 = 0o010;
    /// Permission bits plus suid/sgid/sticky.
    pub const PERM_MASK: u32 = 0o7777;
}

/// File type of an inode. Fixed at creation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    File,
    Dir,
    Symlink,
    Fifo,
    Socket,
    CharDev,
    BlockDev,
}

impl Kind {
    /// The kind encoded in the S_IFMT bits of a mode, if any.
    pub fn from_mode(mode: u32) -> Option<Kind> {
        match mode & libc::S_IFMT {
            libc::S_IFREG | 0 => Some(Kind::File),
            libc::S_IFDIR => Some(Kind::Dir),
            libc::S_IFLNK => Some(Kind::Symlink),
            libc::S_IFIFO => Some(Kind::Fifo),
            libc::S_IFSOCK => Some(Kind::Socket),
            libc::S_IFCHR => Some(Kind::CharDev),
            libc::S_IFBLK => Some(Kind::BlockDev),
            _ => None,
        }
    }
}

/// A point in time with nanosecond resolution; may be before 1970.
///
/// Packed to 12 bytes (4-byte aligned): an inode holds four of them, and
/// 16 bytes each made every inode 16 bytes larger (issue 14). Read fields
/// by value (`t.sec`); a reference to `sec` is not allowed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Default)]
#[repr(C, packed(4))]
pub struct Timespec {
    pub sec: i64,
    pub nsec: u32,
}

impl Timespec {
    /// The current wall-clock time.
    pub fn now() -> Timespec {
        Timespec::from(SystemTime::now())
    }
}

impl From<SystemTime> for Timespec {
    fn from(t: SystemTime) -> Timespec {
        match t.duration_since(UNIX_EPOCH) {
            Ok(d) => Timespec { sec: i64::try_from(d.as_secs()).unwrap_or(i64::MAX), nsec: d.subsec_nanos() },
            Err(e) => {
                let d = e.duration();
                let sec = i64::try_from(d.as_secs()).unwrap_or(i64::MAX);
                if d.subsec_nanos() == 0 {
                    Timespec { sec: -sec, nsec: 0 }
                } else {
                    Timespec { sec: -sec - 1, nsec: 1_000_000_000 - d.subsec_nanos() }
                }
            }
        }
    }
}

impl From<Timespec> for SystemTime {
    fn from(t: Timespec) -> SystemTime {
        let nanos = std::time::Duration::from_nanos(u64::from(t.nsec));
        if t.sec >= 0 {
            UNIX_EPOCH + std::time::Duration::from_secs(t.sec as u64) + nanos
        } else {
            UNIX_EPOCH - std::time::Duration::from_secs(t.sec.unsigned_abs()) + nanos
        }
    }
}

/// A timestamp in 8 bytes, as an inode keeps it: seconds in 34 bits
/// (signed: years 1697 to 2242) and nanoseconds in 30 (issue 14: four of
/// them in every inode). A time outside that range is kept whole
/// elsewhere (the inode's `Extra`) and this holds [`Stamp::WIDE`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stamp(u64);

impl Stamp {
    const NSEC_BITS: u32 = 30;
    /// A nanosecond field no real time has: the time is kept whole elsewhere.
    const WIDE_NSEC: u64 = (1 << Stamp::NSEC_BITS) - 1;
    pub const WIDE: Stamp = Stamp(Stamp::WIDE_NSEC);
    const MAX_SEC: i64 = (1 << 33) - 1;
    const MIN_SEC: i64 = -(1 << 33);

    /// `t` in 8 bytes, or `None` when it is outside the range.
    pub fn pack(t: Timespec) -> Option<Stamp> {
        let (sec, nsec) = (t.sec, t.nsec);
        if !(Stamp::MIN_SEC..=Stamp::MAX_SEC).contains(&sec) || u64::from(nsec) >= Stamp::WIDE_NSEC {
            return None;
        }
        Some(Stamp(((sec as u64) << Stamp::NSEC_BITS) | u64::from(nsec)))
    }

    /// The time, or `None` for [`Stamp::WIDE`].
    pub fn unpack(self) -> Option<Timespec> {
        let nsec = self.0 & Stamp::WIDE_NSEC;
        if nsec == Stamp::WIDE_NSEC {
            return None;
        }
        // An arithmetic shift brings the sign of the 34-bit seconds back.
        Some(Timespec { sec: (self.0 as i64) >> Stamp::NSEC_BITS, nsec: nsec as u32 })
    }
}

/// Everything `stat` shows about an inode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Attr {
    pub ino: Ino,
    pub kind: Kind,
    /// Permission bits plus suid/sgid/sticky (no S_IFMT bits).
    pub perm: u32,
    pub nlink: u32,
    pub uid: u32,
    pub gid: u32,
    pub rdev: u32,
    pub size: u64,
    /// Allocated 512-byte blocks.
    pub blocks: u64,
    pub atime: Timespec,
    pub mtime: Timespec,
    pub ctime: Timespec,
    /// Birth time.
    pub btime: Timespec,
}

/// Who is asking. Permission checks on paths are the kernel's (mounted with
/// `default_permissions`); the core uses the caller for ownership of new
/// inodes and for the few rules the kernel leaves to the file system
/// (clearing set-id bits on write, truncate and chown, trusted xattrs in
/// listings, the control files' owner).
///
/// A daemon that allows idmapped mounts (FUSE_ALLOW_IDMAP) is sent the
/// caller's ids only with requests that create an inode (mapped through the
/// mount's idmap: the owner to give it); every other request carries
/// [`Caller::WITHHELD`]. The rules above then read the caller's fsuid,
/// fsgid and groups from /proc/PID/status, on those rare paths only.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Caller {
    pub uid: u32,
    pub gid: u32,
    pub pid: u32,
}

impl Caller {
    /// The superuser, for internal use and tests.
    pub const ROOT: Caller = Caller { uid: 0, gid: 0, pid: 0 };

    /// The id FUSE sends when it keeps the caller's ids to itself
    /// (FUSE_INVALID_UIDGID).
    pub const WITHHELD: u32 = u32::MAX;

    /// Whether the request came without the caller's ids: the kernel has
    /// checked it (and applied the rules it can) through the mount's idmap.
    pub fn ids_withheld(&self) -> bool {
        self.uid == Self::WITHHELD || self.gid == Self::WITHHELD
    }

    /// The caller's fsuid: from the request, or from /proc when withheld
    /// (None when the process is gone).
    pub fn fsuid(&self) -> Option<u32> {
        if self.uid != Self::WITHHELD {
            return Some(self.uid);
        }
        id_field(&self.status()?, "Uid:")
    }

    /// Whether the caller acts as the superuser (fsuid 0).
    pub fn is_root(&self) -> bool {
        self.fsuid() == Some(0)
    }

    /// Whether the caller is in group `gid` (its fsgid or a supplementary
    /// group). Supplementary groups come from /proc, read only on this
    /// rare path.
    pub fn in_group(&self, gid: u32) -> bool {
        if self.gid == gid {
            return true;
        }
        let Some(status) = self.status() else {
            return false;
        };
        if self.gid == Self::WITHHELD && id_field(&status, "Gid:") == Some(gid) {
            return true;
        }
        status
            .lines()
            .find_map(|l| l.strip_prefix("Groups:"))
            .is_some_and(|groups| groups.split_whitespace().any(|g| g.parse() == Ok(gid)))
    }

    fn status(&self) -> Option<String> {
        std::fs::read_to_string(format!("/proc/{}/status", self.pid)).ok()
    }
}

/// The fs id (the fourth) of a `Uid:` or `Gid:` line of /proc/PID/status.
fn id_field(status: &str, key: &str) -> Option<u32> {
    status.lines().find_map(|l| l.strip_prefix(key))?.split_whitespace().nth(3)?.parse().ok()
}

/// A timestamp to set: a given time or "now".
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SetTime {
    Now,
    At(Timespec),
}

/// The changes a setattr asks for; `None` leaves a field alone.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SetAttr {
    pub mode: Option<u32>,
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    pub size: Option<u64>,
    pub atime: Option<SetTime>,
    pub mtime: Option<SetTime>,
    /// The request names an open file (ftruncate, futimens): the VFS then
    /// always sets mtime/ctime on a truncate.
    pub via_open_file: bool,
}

impl SetAttr {
    /// Whether the request sets nothing at all.
    pub fn is_empty(&self) -> bool {
        self.mode.is_none()
            && self.uid.is_none()
            && self.gid.is_none()
            && self.size.is_none()
            && self.atime.is_none()
            && self.mtime.is_none()
    }
}

/// File system totals, as statfs shows them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StatFs {
    /// Total data pages (0 = unlimited).
    pub blocks: u64,
    /// Pages free under `size=` (`df`'s used = blocks - bfree).
    pub bfree: u64,
    /// Pages a writer may still fill (`df`'s avail): `bfree`, or less under
    /// a ceiling whose backing store bounds what more fits.
    pub bavail: u64,
    /// Total inodes (0 = unlimited).
    pub files: u64,
    pub ffree: u64,
    pub bsize: u32,
    pub namelen: u32,
}

/// Check a directory-entry name: not empty, no '/', no NUL, at most NAME_MAX bytes.
pub fn check_name(name: &[u8]) -> crate::core::FsResult<()> {
    if name.len() > NAME_MAX {
        return Err(crate::core::FsError::NameTooLong);
    }
    if name.is_empty() || name.contains(&b'/') || name.contains(&0) {
        return Err(crate::core::FsError::Invalid);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stamp_holds_34_bits_of_seconds_and_the_nanoseconds_or_says_it_cannot() {
        let max = (1i64 << 33) - 1;
        for (sec, nsec) in
            [(0, 0), (1, 999_999_999), (-1, 1), (-1, 999_999_999), (max, 5), (-max - 1, 7), (1_700_000_000, 123)]
        {
            let t = Timespec { sec, nsec };
            assert_eq!(Stamp::pack(t).and_then(Stamp::unpack), Some(t), "{sec} {nsec}");
        }
        for (sec, nsec) in [(max + 1, 0), (-max - 2, 0), (i64::MAX, 0), (i64::MIN, 0)] {
            assert_eq!(Stamp::pack(Timespec { sec, nsec }), None, "{sec}");
        }
        assert_eq!(Stamp::WIDE.unpack(), None);
        assert_eq!(Stamp::default().unpack(), Some(Timespec::default()));
    }

    fn withheld(pid: u32) -> Caller {
        Caller { uid: Caller::WITHHELD, gid: Caller::WITHHELD, pid }
    }

    #[test]
    fn withheld_ids_are_read_from_proc() {
        // SAFETY: geteuid/getegid have no preconditions.
        let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
        let me = withheld(std::process::id());
        assert!(me.ids_withheld());
        assert_eq!(me.fsuid(), Some(uid));
        assert_eq!(me.is_root(), uid == 0);
        assert!(me.in_group(gid));
        assert!(!me.in_group(gid.wrapping_add(12345)));
    }

    #[test]
    fn a_gone_process_is_nobody_in_particular() {
        // pid_max is at most 2^22: this pid cannot exist.
        let gone = withheld(1 << 23);
        assert_eq!(gone.fsuid(), None);
        assert!(!gone.is_root());
        assert!(!gone.in_group(0));
    }

    #[test]
    fn known_ids_need_no_proc() {
        let c = Caller { uid: 7, gid: 8, pid: 1 << 23 };
        assert!(!c.ids_withheld());
        assert_eq!(c.fsuid(), Some(7));
        assert!(!c.is_root());
        assert!(c.in_group(8));
        assert!(Caller::ROOT.is_root());
    }

    #[test]
    fn the_fs_id_is_the_fourth() {
        let status = "Name:\tx\nUid:\t1\t2\t3\t4\nGid:\t5\t6\t7\t8\nGroups:\t9 10\n";
        assert_eq!(id_field(status, "Uid:"), Some(4));
        assert_eq!(id_field(status, "Gid:"), Some(8));
        assert_eq!(id_field("Uid:\t1\t2\n", "Uid:"), None);
    }
}
