//! Inode flags, as `lsattr`/`chattr` see them (FS_IOC_GETFLAGS/SETFLAGS).
//!
//! tmpfs keeps four: append-only, immutable, no-dump and no-atime, and new
//! inodes inherit no-dump and no-atime from their directory (mm/shmem.c,
//! SHMEM_FL_INHERITED). memfs keeps no-dump and no-atime the same way: a
//! no-atime inode's reads never update its access time. Immutable and
//! append-only are refused with EOPNOTSUPP (as tmpfs refuses any flag it
//! does not keep): the kernel enforces them at open(2) from the inode's
//! i_flags, which FUSE never sets, and memfs gets no OPEN requests to
//! refuse a write-open itself (docs/SEMANTICS.md). Who may change flags
//! (the owner; CAP_LINUX_IMMUTABLE for i/a) the kernel checks before asking.

use super::inode::{Inode, Meta};
use super::types::{Ino, Kind, Timespec};
use super::{Fs, FsError, FsResult};
use crate::sync::Arc;

/// FS_APPEND_FL, FS_IMMUTABLE_FL, FS_NODUMP_FL, FS_NOATIME_FL (linux/fs.h).
pub const FS_IMMUTABLE_FL: u32 = 0x10;
pub const FS_APPEND_FL: u32 = 0x20;
pub const FS_NODUMP_FL: u32 = 0x40;
pub const FS_NOATIME_FL: u32 = 0x80;

/// Flags memfs keeps; setting any other fails with EOPNOTSUPP.
pub const KEPT: u32 = FS_NODUMP_FL | FS_NOATIME_FL;
/// Flags a new inode takes from its directory.
pub const INHERITED: u32 = FS_NODUMP_FL | FS_NOATIME_FL;

/// The flags a new inode in a directory with `parent` flags starts with.
pub fn inherit(parent: u32) -> u32 {
    parent & INHERITED
}

/// Whether a read of this inode may update its access time (per-inode rule).
pub fn atime_allowed(m: &Meta) -> bool {
    m.fsflags & FS_NOATIME_FL == 0
}

impl Fs {
    /// The inode's flags (regular files and directories only: ENOTTY otherwise).
    pub fn fsflags(&self, ino: Ino) -> FsResult<u32> {
        Ok(self.flagged(ino)?.meta().fsflags)
    }

    /// Replace the inode's flags; sets ctime, as tmpfs does.
    pub fn set_fsflags(&self, ino: Ino, flags: u32) -> FsResult<()> {
        let inode = self.flagged(ino)?;
        if flags & !KEPT != 0 {
            return Err(FsError::NotSupported);
        }
        let mut m = inode.meta();
        m.fsflags = flags;
        m.ctime = Timespec::now();
        Ok(())
    }

    /// An inode that can have flags: a regular file or a directory.
    fn flagged(&self, ino: Ino) -> FsResult<Arc<Inode>> {
        let inode = self.get(ino)?;
        match inode.kind {
            Kind::File | Kind::Dir => Ok(inode),
            _ => Err(FsError::NoIoctl),
        }
    }
}
