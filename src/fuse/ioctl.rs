//! The ioctls memfs answers: the kernel's FUSE turns FS_IOC_GETFLAGS /
//! SETFLAGS (lsattr, chattr) and FS_IOC_FSGETXATTR / FSSETXATTR (xfs_io)
//! into FUSE_IOCTL requests with these commands; memfs's own (type 0xE7)
//! serve `memfs where|evict|prime` (ctl/pages.rs). This file only decodes
//! and encodes their arguments; which flags exist is the core's
//! (core/fileattr.rs), and so is the pager. Every other command is ENOTTY,
//! as on tmpfs.

use crate::core::fileattr::{FS_APPEND_FL, FS_IMMUTABLE_FL, FS_NOATIME_FL, FS_NODUMP_FL};
use crate::core::{Fs, FsError, FsResult, Ino};
use crate::ctl::pages::{MEMFS_IOC_EVICT, MEMFS_IOC_PRIME, MEMFS_IOC_WHERE};

// _IOR('f', 1, long), _IOW('f', 2, long), their 32-bit forms, and
// _IOR('X', 31, struct fsxattr), _IOW('X', 32, struct fsxattr).
const FS_IOC_GETFLAGS: u32 = 0x8008_6601;
const FS_IOC_SETFLAGS: u32 = 0x4008_6602;
const FS_IOC32_GETFLAGS: u32 = 0x8004_6601;
const FS_IOC32_SETFLAGS: u32 = 0x4004_6602;
const FS_IOC_FSGETXATTR: u32 = 0x801c_581f;
const FS_IOC_FSSETXATTR: u32 = 0x401c_5820;

/// Pages one evict or prime request handles (16 MiB), so one call never
/// holds the FUSE worker for long.
const PAGES_PER_CALL: usize = 4096;

/// struct fsxattr: xflags, extsize, nextents, projid, cowextsize, 8 pad bytes.
const FSXATTR_LEN: usize = 28;

/// FS_XFLAG_* for the FS_*_FL flags memfs can hold (fileattr_fill_flags).
const XFLAGS: [(u32, u32); 4] =
    [(FS_IMMUTABLE_FL, 0x08), (FS_APPEND_FL, 0x10), (FS_NOATIME_FL, 0x40), (FS_NODUMP_FL, 0x80)];

/// Answer one ioctl: the bytes to send back (at most `out_size`).
pub fn ioctl(fs: &Fs, ino: Ino, cmd: u32, input: &[u8], out_size: u32) -> FsResult<Vec<u8>> {
    let mut out = match cmd {
        FS_IOC_GETFLAGS | FS_IOC32_GETFLAGS => fs.fsflags(ino)?.to_ne_bytes().to_vec(),
        FS_IOC_SETFLAGS | FS_IOC32_SETFLAGS => {
            fs.set_fsflags(ino, u32_at(input, 0)?)?;
            vec![]
        }
        FS_IOC_FSGETXATTR => {
            let flags = fs.fsflags(ino)?;
            let xflags = XFLAGS.iter().filter(|(fl, _)| flags & fl != 0).fold(0, |acc, (_, x)| acc | x);
            let mut fsx = vec![0u8; FSXATTR_LEN];
            fsx[..4].copy_from_slice(&xflags.to_ne_bytes());
            fsx
        }
        FS_IOC_FSSETXATTR => {
            let xflags = u32_at(input, 0)?;
            // Extent size, project id, CoW extent size (bytes 4, 12, 16; 8 is
            // nextents, output only): tmpfs has none of them.
            for at in [4, 12, 16] {
                if u32_at(input, at)? != 0 {
                    return Err(FsError::NotSupported);
                }
            }
            let known: u32 = XFLAGS.iter().map(|(_, x)| x).sum();
            if xflags & !known != 0 {
                return Err(FsError::NotSupported);
            }
            let flags = XFLAGS.iter().filter(|(_, x)| xflags & x != 0).fold(0, |acc, (fl, _)| acc | fl);
            fs.set_fsflags(ino, flags)?;
            vec![]
        }
        MEMFS_IOC_WHERE => {
            let (resident, zip, disk) = fs.tiers(ino)?;
            let allocated = fs.getattr(ino)?.blocks / 8;
            [resident, zip, disk, allocated].iter().flat_map(|n| n.to_ne_bytes()).collect()
        }
        MEMFS_IOC_EVICT | MEMFS_IOC_PRIME => {
            let from = u64_at(input, 0)?;
            let (n, next) = if cmd == MEMFS_IOC_EVICT {
                fs.evict_file(ino, from, PAGES_PER_CALL)?
            } else {
                fs.prime_file(ino, from, PAGES_PER_CALL)?
            };
            fs.trim_after_bulk_move();
            [n, next.unwrap_or(u64::MAX)].iter().flat_map(|n| n.to_ne_bytes()).collect()
        }
        _ => return Err(FsError::NoIoctl),
    };
    out.truncate(out_size as usize);
    Ok(out)
}

/// Whether a successful `cmd` changed the inode's ctime.
pub fn changes_attrs(cmd: u32) -> bool {
    matches!(cmd, FS_IOC_SETFLAGS | FS_IOC32_SETFLAGS | FS_IOC_FSSETXATTR)
}

fn u64_at(input: &[u8], at: usize) -> FsResult<u64> {
    let bytes = input.get(at..at + 8).ok_or(FsError::Invalid)?;
    Ok(u64::from_ne_bytes(bytes.try_into().map_err(|_| FsError::Invalid)?))
}

fn u32_at(input: &[u8], at: usize) -> FsResult<u32> {
    let bytes = input.get(at..at + 4).ok_or(FsError::Invalid)?;
    Ok(u32::from_ne_bytes(bytes.try_into().map_err(|_| FsError::Invalid)?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::{Caller, FsConfig, ROOT_INO};

    fn fsx(xflags: u32, extsize: u32) -> Vec<u8> {
        let mut v = vec![0u8; FSXATTR_LEN];
        v[..4].copy_from_slice(&xflags.to_ne_bytes());
        v[4..8].copy_from_slice(&extsize.to_ne_bytes());
        v
    }

    #[test]
    fn flags_round_trip_through_both_interfaces() {
        let fs = Fs::new(FsConfig::with_limits(0, 0));
        let f = fs.mknod(ROOT_INO, b"f", 0o100644, 0, 0, &Caller::ROOT).unwrap().ino;
        assert_eq!(ioctl(&fs, f, FS_IOC_GETFLAGS, &[], 4).unwrap(), 0u32.to_ne_bytes());
        ioctl(&fs, f, FS_IOC_SETFLAGS, &(FS_NODUMP_FL | FS_NOATIME_FL).to_ne_bytes(), 0).unwrap();
        assert_eq!(fs.fsflags(f).unwrap(), FS_NODUMP_FL | FS_NOATIME_FL);
        let out = ioctl(&fs, f, FS_IOC_FSGETXATTR, &[], FSXATTR_LEN as u32).unwrap();
        assert_eq!(out, fsx(0xc0, 0));
        ioctl(&fs, f, FS_IOC_FSSETXATTR, &fsx(0x80, 0), 0).unwrap();
        assert_eq!(fs.fsflags(f).unwrap(), FS_NODUMP_FL);
    }

    #[test]
    fn what_memfs_cannot_keep_is_refused_and_changes_nothing() {
        let fs = Fs::new(FsConfig::with_limits(0, 0));
        let f = fs.mknod(ROOT_INO, b"f", 0o100644, 0, 0, &Caller::ROOT).unwrap().ino;
        ioctl(&fs, f, FS_IOC_SETFLAGS, &FS_NODUMP_FL.to_ne_bytes(), 0).unwrap();
        for bad in [FS_IMMUTABLE_FL, FS_APPEND_FL, 0x0080_0000 /* FS_NOCOW_FL */] {
            assert_eq!(ioctl(&fs, f, FS_IOC_SETFLAGS, &bad.to_ne_bytes(), 0), Err(FsError::NotSupported));
        }
        assert_eq!(ioctl(&fs, f, FS_IOC_FSSETXATTR, &fsx(0x08, 0), 0), Err(FsError::NotSupported));
        assert_eq!(ioctl(&fs, f, FS_IOC_FSSETXATTR, &fsx(0, 4096), 0), Err(FsError::NotSupported));
        assert_eq!(ioctl(&fs, f, FS_IOC_SETFLAGS, &[1, 2], 0), Err(FsError::Invalid));
        assert_eq!(fs.fsflags(f).unwrap(), FS_NODUMP_FL);
        assert_eq!(ioctl(&fs, f, 0x5401 /* TCGETS */, &[], 64), Err(FsError::NoIoctl));
        let s = fs.symlink(ROOT_INO, b"s", b"f", &Caller::ROOT).unwrap().ino;
        assert_eq!(ioctl(&fs, s, FS_IOC_GETFLAGS, &[], 4), Err(FsError::NoIoctl));
    }

    #[test]
    fn pager_ioctls_encode_as_the_kernel_does_and_need_a_pager() {
        // _IOR(0xE7, 1, [u64; 4]) and _IOWR(0xE7, 2/3, [u64; 2]).
        assert_eq!((MEMFS_IOC_WHERE, MEMFS_IOC_EVICT, MEMFS_IOC_PRIME), (0x8020_e701, 0xc010_e702, 0xc010_e703));
        let fs = Fs::new(FsConfig::with_limits(0, 0));
        let f = fs.mknod(ROOT_INO, b"f", 0o100644, 0, 0, &Caller::ROOT).unwrap().ino;
        fs.write(f, 0, &[1u8; 5000], &Caller::ROOT).unwrap();
        let out = ioctl(&fs, f, MEMFS_IOC_WHERE, &[], 32).unwrap();
        let n = |i: usize| u64::from_ne_bytes(out[i * 8..i * 8 + 8].try_into().unwrap());
        assert_eq!((n(0), n(1), n(2), n(3)), (2, 0, 0, 2)); // no pager: all in RAM
        assert_eq!(ioctl(&fs, f, MEMFS_IOC_EVICT, &[0u8; 16], 16), Err(FsError::NotSupported));
        assert_eq!(ioctl(&fs, f, MEMFS_IOC_PRIME, &[0u8; 4], 16), Err(FsError::Invalid));
    }

    #[test]
    fn new_inodes_inherit_nodump_and_noatime() {
        let fs = Fs::new(FsConfig::with_limits(0, 0));
        let d = fs.mkdir(ROOT_INO, b"d", 0o755, 0, &Caller::ROOT).unwrap().ino;
        fs.set_fsflags(d, FS_NODUMP_FL | FS_NOATIME_FL).unwrap();
        let f = fs.mknod(d, b"f", 0o100644, 0, 0, &Caller::ROOT).unwrap().ino;
        let sub = fs.mkdir(d, b"sub", 0o755, 0, &Caller::ROOT).unwrap().ino;
        assert_eq!(fs.fsflags(f).unwrap(), FS_NODUMP_FL | FS_NOATIME_FL);
        assert_eq!(fs.fsflags(sub).unwrap(), FS_NODUMP_FL | FS_NOATIME_FL);
        let other = fs.mknod(ROOT_INO, b"g", 0o100644, 0, 0, &Caller::ROOT).unwrap().ino;
        assert_eq!(fs.fsflags(other).unwrap(), 0);
    }

    #[test]
    fn a_noatime_file_keeps_its_access_time_on_reads() {
        let fs = Fs::new(FsConfig::with_limits(0, 0));
        let f = fs.mknod(ROOT_INO, b"f", 0o100644, 0, 0, &Caller::ROOT).unwrap().ino;
        fs.write(f, 0, b"data", &Caller::ROOT).unwrap();
        fs.set_fsflags(f, FS_NOATIME_FL).unwrap();
        let before = fs.getattr(f).unwrap().atime;
        fs.read(f, 0, 4).unwrap();
        assert_eq!(fs.getattr(f).unwrap().atime, before);
    }
}
