//! The core's one error type. Every failure a client can provoke is a value
//! here; the FUSE adapter maps each to an errno in a single exhaustive match.

use std::fmt;

/// Why a core operation failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FsError {
    /// No such inode or directory entry (ENOENT).
    NotFound,
    /// The name already exists (EEXIST).
    Exists,
    /// A path component or target is not a directory (ENOTDIR).
    NotDir,
    /// The operation needs a non-directory (EISDIR).
    IsDir,
    /// Directory still has entries (ENOTEMPTY).
    NotEmpty,
    /// `size=` or `nr_inodes=` would be exceeded (ENOSPC, never ENOMEM:
    /// a full file system is an error, not an OOM kill).
    NoSpace,
    /// A name is longer than 255 bytes, or a symlink target than 4095 (ENAMETOOLONG).
    NameTooLong,
    /// Argument out of range, or rename into its own subtree (EINVAL).
    Invalid,
    /// Operation not permitted for this caller or this file type (EPERM).
    NotPermitted,
    /// Permission denied (EACCES).
    Access,
    /// Extended attribute does not exist (ENODATA).
    NoXattr,
    /// Caller's buffer is too small (ERANGE).
    Range,
    /// Offset or size beyond the maximum file size (EFBIG).
    FileTooBig,
    /// Extended attribute value or list too large (E2BIG).
    TooBig,
    /// Not supported by this file system (EOPNOTSUPP).
    NotSupported,
    /// Link count would overflow (EMLINK).
    TooManyLinks,
    /// Seek past the end for SEEK_DATA / SEEK_HOLE (ENXIO).
    NoDataAtOffset,
    /// The kernel referred to an inode we no longer know (ESTALE).
    Stale,
    /// No such ioctl for this file (ENOTTY).
    NoIoctl,
    /// A paged-out page could not be read back intact: the backing store
    /// failed or its checksum did not match (EIO, for that request only).
    Io,
    /// One is running already (EBUSY: a second `migrate`).
    Busy,
}

impl fmt::Display for FsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self:?}")
    }
}

impl std::error::Error for FsError {}

/// Result of a core operation.
pub type FsResult<T> = Result<T, FsError>;
