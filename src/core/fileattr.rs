//! Inode flags, as `lsattr`/`chattr` see them (FS_IOC_GETFLAGS/SETFLAGS).
//!
//! tmpfs keeps four: append-only, immutable, no-dump and no-atime, and new
//! inodes inherit no-dump and no-atime from their directory (mm/shmem.c,
//! SHMEM_FL_INHERITED). memfs keeps no-dump and no-atime the same way: a
//! no-atime inode's reads never update its access time.
//!
//! Immutable and append-only: the kernel enforces them from the inode's
//! i_flags, which FUSE never sets, so memfs enforces them itself, as the
//! VFS does for tmpfs ([`Fs::check_flags`] at each operation, the FUSE
//! layer at OPEN): no write-open of an immutable file, no write-open
//! without O_APPEND of an append-only one, no truncate, chmod, chown,
//! explicit times, xattr change, link, unlink or rename of either, no
//! entry made in or removed from an immutable directory, none removed
//! from an append-only one. As on tmpfs, writes through a file opened
//! before the flag was set still work. That needs OPEN requests: on a
//! mount that answers none (`passthrough=off` without `cache=`), i and a
//! are refused with EOPNOTSUPP, as tmpfs refuses flags it does not keep
//! (docs/SEMANTICS.md). Who may change flags (the owner;
//! CAP_LINUX_IMMUTABLE for i/a) the kernel checks before asking.

use super::inode::{Inode, InodeRef, Meta};
use super::types::{Ino, Kind, Timespec};
use super::{Fs, FsError, FsResult};

/// FS_APPEND_FL, FS_IMMUTABLE_FL, FS_NODUMP_FL, FS_NOATIME_FL (linux/fs.h).
pub const FS_IMMUTABLE_FL: u32 = 0x10;
pub const FS_APPEND_FL: u32 = 0x20;
pub const FS_NODUMP_FL: u32 = 0x40;
pub const FS_NOATIME_FL: u32 = 0x80;

/// Flags memfs keeps on every mount; setting any other fails with EOPNOTSUPP.
pub const KEPT: u32 = FS_NODUMP_FL | FS_NOATIME_FL;
/// Flags memfs keeps where it answers OPEN (and so can refuse write-opens).
pub const ENFORCED: u32 = FS_IMMUTABLE_FL | FS_APPEND_FL;

/// What an operation does to an inode, for [`Fs::check_flags`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Change {
    /// Its attributes, xattrs or names (link, unlink, rename of it): EPERM
    /// if immutable or append-only.
    Inode,
    /// A directory gets a new entry: EPERM if immutable.
    AddEntry,
    /// A directory loses an entry: EPERM if immutable or append-only.
    RemoveEntry,
    /// Its bytes through an open file (fallocate): EPERM if immutable,
    /// or if append-only and not a plain allocation.
    Bytes { plain: bool },
}
/// Flags a new inode takes from its directory.
pub const INHERITED: u32 = FS_NODUMP_FL | FS_NOATIME_FL;

/// The flags a new inode in a directory with `parent` flags starts with.
pub fn inherit(parent: u32) -> u32 {
    parent & INHERITED
}

/// Whether a read of this inode may update its access time (per-inode rule).
pub fn atime_allowed(m: &Meta) -> bool {
    m.fsflags() & FS_NOATIME_FL == 0
}

impl Fs {
    /// Whether i and a are kept here (the FUSE layer says at init whether
    /// it answers OPEN, where write-opens can be refused).
    pub fn set_flags_enforceable(&self, on: bool) {
        self.flags_enforceable.store(on, crate::sync::Ordering::Relaxed);
    }

    fn kept_flags(&self) -> u32 {
        if self.flags_enforceable.load(crate::sync::Ordering::Relaxed) {
            KEPT | ENFORCED
        } else {
            KEPT
        }
    }

    /// EPERM if `inode`'s immutable or append-only flag forbids `change`.
    pub(super) fn check_flags(&self, inode: &Inode, change: Change) -> FsResult<()> {
        let f = inode.meta().fsflags();
        let (imm, app) = (f & FS_IMMUTABLE_FL != 0, f & FS_APPEND_FL != 0);
        let refused = match change {
            Change::Inode | Change::RemoveEntry => imm || app,
            Change::AddEntry => imm,
            Change::Bytes { plain } => imm || (app && !plain),
        };
        if refused {
            Err(FsError::NotPermitted)
        } else {
            Ok(())
        }
    }

    /// Whether an OPEN of `ino` with `flags` is refused (EPERM): writing an
    /// immutable file, or an append-only one without O_APPEND.
    pub fn open_refused(&self, ino: Ino, flags: i32) -> bool {
        let Ok(inode) = self.get(ino) else { return false };
        let f = inode.meta().fsflags();
        let writes = flags & libc::O_ACCMODE != libc::O_RDONLY || flags & libc::O_TRUNC != 0;
        writes && (f & FS_IMMUTABLE_FL != 0 || (f & FS_APPEND_FL != 0 && flags & libc::O_APPEND == 0))
    }

    /// The inode's flags (regular files and directories only: ENOTTY otherwise).
    pub fn fsflags(&self, ino: Ino) -> FsResult<u32> {
        Ok(self.flagged(ino)?.meta().fsflags())
    }

    /// Replace the inode's flags; sets ctime, as tmpfs does.
    pub fn set_fsflags(&self, ino: Ino, flags: u32) -> FsResult<()> {
        let inode = self.flagged(ino)?;
        if flags & !self.kept_flags() != 0 {
            return Err(FsError::NotSupported);
        }
        let mut m = inode.meta();
        let before = super::inode::extra_bytes(m.extra.as_deref());
        m.set_fsflags(flags); // may make the inode's Extra: counted as metadata
        self.usage.account_meta(super::inode::extra_bytes(m.extra.as_deref()) as i64 - before as i64);
        m.set_ctime(Timespec::now());
        Ok(())
    }

    /// An inode that can have flags: a regular file or a directory.
    fn flagged(&self, ino: Ino) -> FsResult<InodeRef> {
        let inode = self.get(ino)?;
        match inode.kind() {
            Kind::File | Kind::Dir => Ok(inode),
            _ => Err(FsError::NoIoctl),
        }
    }
}
