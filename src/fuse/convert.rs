//! Translations between the core's types and fuser's: errors to errnos (one
//! exhaustive match), attributes, file kinds, times and flags.

use std::time::SystemTime;

use fuser::{Errno, FileAttr, FileType, INodeNo, TimeOrNow};

use crate::core::{Attr, FsError, Kind, SetTime, Timespec};

/// The errno for each core error.
pub fn errno(e: FsError) -> Errno {
    Errno::from_i32(match e {
        FsError::NotFound => libc::ENOENT,
        FsError::Exists => libc::EEXIST,
        FsError::NotDir => libc::ENOTDIR,
        FsError::IsDir => libc::EISDIR,
        FsError::NotEmpty => libc::ENOTEMPTY,
        FsError::NoSpace => libc::ENOSPC,
        FsError::NameTooLong => libc::ENAMETOOLONG,
        FsError::Invalid => libc::EINVAL,
        FsError::NotPermitted => libc::EPERM,
        FsError::Access => libc::EACCES,
        FsError::NoXattr => libc::ENODATA,
        FsError::Range => libc::ERANGE,
        FsError::FileTooBig => libc::EFBIG,
        FsError::TooBig => libc::E2BIG,
        FsError::NotSupported => libc::EOPNOTSUPP,
        FsError::TooManyLinks => libc::EMLINK,
        FsError::NoDataAtOffset => libc::ENXIO,
        FsError::Stale => libc::ESTALE,
        FsError::NoIoctl => libc::ENOTTY,
        FsError::Io => libc::EIO,
        FsError::Busy => libc::EBUSY,
    })
}

pub fn file_type(k: Kind) -> FileType {
    match k {
        Kind::File => FileType::RegularFile,
        Kind::Dir => FileType::Directory,
        Kind::Symlink => FileType::Symlink,
        Kind::Fifo => FileType::NamedPipe,
        Kind::Socket => FileType::Socket,
        Kind::CharDev => FileType::CharDevice,
        Kind::BlockDev => FileType::BlockDevice,
    }
}

pub fn file_attr(a: &Attr) -> FileAttr {
    FileAttr {
        ino: INodeNo(a.ino),
        size: a.size,
        blocks: a.blocks,
        atime: a.atime.into(),
        mtime: a.mtime.into(),
        ctime: a.ctime.into(),
        crtime: a.btime.into(),
        kind: file_type(a.kind),
        perm: (a.perm & 0o7777) as u16,
        nlink: a.nlink,
        uid: a.uid,
        gid: a.gid,
        rdev: a.rdev,
        blksize: crate::core::types::PAGE_SIZE as u32,
        flags: 0,
    }
}

/// The attributes of a negative dentry (inode 0): lets the kernel cache "no such name".
pub fn negative_attr() -> FileAttr {
    let zero = SystemTime::UNIX_EPOCH;
    FileAttr {
        ino: INodeNo(0),
        size: 0,
        blocks: 0,
        atime: zero,
        mtime: zero,
        ctime: zero,
        crtime: zero,
        kind: FileType::RegularFile,
        perm: 0,
        nlink: 0,
        uid: 0,
        gid: 0,
        rdev: 0,
        blksize: 0,
        flags: 0,
    }
}

/// A setattr time from fuser. fuser 0.18 turns a pre-1970 (sec, nsec) into
/// EPOCH - (|sec| + nsec) instead of EPOCH - |sec| + nsec (its TODO in
/// time.rs); undo that here, which is why fuser is pinned to =0.18.0.
pub fn set_time(t: TimeOrNow) -> SetTime {
    match t {
        TimeOrNow::Now => SetTime::Now,
        TimeOrNow::SpecificTime(t) => SetTime::At(from_fuser_time(t)),
    }
}

fn from_fuser_time(t: SystemTime) -> Timespec {
    match SystemTime::UNIX_EPOCH.duration_since(t) {
        Ok(before) if !before.is_zero() => {
            Timespec { sec: -i64::try_from(before.as_secs()).unwrap_or(i64::MAX), nsec: before.subsec_nanos() }
        }
        _ => t.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn pre_epoch_times_from_fuser_are_corrected() {
        // fuser hands (-1 s, 500 ns) over as EPOCH - 1.0000005 s.
        let t = SystemTime::UNIX_EPOCH - Duration::new(1, 500);
        assert_eq!(from_fuser_time(t), Timespec { sec: -1, nsec: 500 });
        let after = SystemTime::UNIX_EPOCH + Duration::new(5, 7);
        assert_eq!(from_fuser_time(after), Timespec { sec: 5, nsec: 7 });
    }
}
