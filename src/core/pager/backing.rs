//! The backing store: where pages go when they leave RAM.
//!
//! Owns one kernel file or block device, split into page-sized slots, and
//! the allocation of those slots; nothing about files, policies or locks of
//! the core. A stored page is a [`DiskRef`]: its slot, how many bytes were
//! written (a compressed page is shorter than a slot), whether they are the
//! raw page or a compressed one, and their crc32c. `load` gives back those
//! bytes only if the checksum matches, so a bad disk can cost an EIO but
//! never wrong data. Freed slots are reused first (lowest number first,
//! which keeps the file compact).
//!
//! `backing=DIR` stores in an unnamed file created with O_TMPFILE in DIR
//! (or, where the file system lacks O_TMPFILE, one created and unlinked at
//! once): nothing of it can be opened by name, and the kernel frees it when
//! the daemon exits. `backing=/dev/BLOCKDEV` uses the device itself,
//! capacity = its size. The I/O goes through [`BackingIo`] so that tests can
//! inject errors.
//!
//! The store is opened with O_DIRECT and every read and write is one whole,
//! aligned slot: pages that left RAM must not come back into RAM as the
//! kernel's page cache of the store (that would make `ram=` a fiction).
//! Where the file system refuses O_DIRECT, the store is buffered and says
//! so in its description (`stats/pager`'s log line, docs/PAGER.md).

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileExt, FileTypeExt, OpenOptionsExt};
use std::os::unix::io::FromRawFd;
use std::path::Path;

use crate::sync::Mutex;

use super::super::types::PAGE_SIZE;

/// Reads and writes at byte offsets of the store (a file, a device, or a
/// test double that fails on purpose).
pub trait BackingIo: Send + Sync + std::fmt::Debug {
    fn read_at(&self, buf: &mut [u8], off: u64) -> io::Result<()>;
    fn write_at(&self, buf: &[u8], off: u64) -> io::Result<()>;
}

#[derive(Debug)]
struct FileIo(File);

impl BackingIo for FileIo {
    fn read_at(&self, buf: &mut [u8], off: u64) -> io::Result<()> {
        self.0.read_exact_at(buf, off)
    }
    fn write_at(&self, buf: &[u8], off: u64) -> io::Result<()> {
        self.0.write_all_at(buf, off)
    }
}

/// Where one page is on the backing store.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DiskRef {
    pub slot: u32,
    /// Bytes stored (at most a page).
    pub len: u16,
    /// The bytes are the page itself, not a compressed page.
    pub raw: bool,
    pub crc: u32,
}

/// Why a page could not be read back.
#[derive(Debug, PartialEq, Eq)]
pub enum LoadError {
    /// The bytes read do not match the checksum taken when they were written.
    Checksum,
    /// The store reported an I/O error.
    Io,
}

#[derive(Debug, Default)]
struct Slots {
    /// Freed slots, lowest first.
    free: BinaryHeap<Reverse<u32>>,
    /// Slots ever handed out: every slot below this is in use or free.
    high: u32,
    in_use: u64,
}

/// A backing store of page slots.
#[derive(Debug)]
pub struct Backing {
    io: Box<dyn BackingIo>,
    /// Slots available (a device's size); `u32::MAX` for a file, which
    /// grows until its file system says ENOSPC.
    capacity: u32,
    slots: Mutex<Slots>,
    describe: String,
}

impl Backing {
    /// Open `backing=PATH`: a directory (an unnamed file in it) or a block device.
    pub fn open(path: &Path) -> Result<Backing, String> {
        let meta = std::fs::metadata(path).map_err(|e| format!("{}: {e}", path.display()))?;
        if meta.is_dir() {
            let (file, direct) =
                unnamed_file(path).map_err(|e| format!("cannot create a file in {}: {e}", path.display()))?;
            let how = if direct { "unnamed file, O_DIRECT" } else { "unnamed file, buffered: no O_DIRECT there" };
            return Ok(Backing::with_io(Box::new(FileIo(file)), u32::MAX, format!("{} ({how})", path.display())));
        }
        if meta.file_type().is_block_device() {
            let file = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .custom_flags(libc::O_DIRECT)
                .open(path)
                .map_err(|e| format!("{}: {e}", path.display()))?;
            let bytes = file.metadata().map(|m| m.len()).ok().filter(|&n| n > 0).or_else(|| device_size(&file));
            let slots = bytes.unwrap_or(0) / PAGE_SIZE;
            if slots == 0 {
                return Err(format!("{}: the device has no room for a page", path.display()));
            }
            let capacity = slots.min(u64::from(u32::MAX)) as u32;
            return Ok(Backing::with_io(Box::new(FileIo(file)), capacity, path.display().to_string()));
        }
        Err(format!("{} is neither a directory nor a block device", path.display()))
    }

    /// A store over `io` with `capacity` slots (tests use this to inject faults).
    pub fn with_io(io: Box<dyn BackingIo>, capacity: u32, describe: String) -> Backing {
        Backing { io, capacity, slots: Mutex::new(Slots::default()), describe }
    }

    pub fn describe(&self) -> &str {
        &self.describe
    }

    /// Slots in use.
    pub fn used(&self) -> u64 {
        self.slots.lock().in_use
    }

    /// Slot capacity, `None` when the store grows until its file system is full.
    pub fn capacity(&self) -> Option<u64> {
        (self.capacity != u32::MAX).then_some(u64::from(self.capacity))
    }

    fn alloc(&self) -> io::Result<u32> {
        let mut s = self.slots.lock();
        let slot = match s.free.pop() {
            Some(Reverse(slot)) => slot,
            None if s.high < self.capacity => {
                s.high += 1;
                s.high - 1
            }
            None => return Err(io::Error::from_raw_os_error(libc::ENOSPC)),
        };
        s.in_use += 1;
        Ok(slot)
    }

    /// Give a slot back for reuse.
    pub fn free(&self, r: &DiskRef) {
        let mut s = self.slots.lock();
        s.free.push(Reverse(r.slot));
        s.in_use -= 1;
    }

    /// Write `bytes` (at most a page) to a fresh slot. ENOSPC when the store
    /// is full; the slot is not kept when the write fails.
    pub fn store(&self, bytes: &[u8], raw: bool) -> io::Result<DiskRef> {
        debug_assert!(!bytes.is_empty() && bytes.len() <= PAGE_SIZE as usize);
        let slot = self.alloc()?;
        let r = DiskRef { slot, len: bytes.len() as u16, raw, crc: crc32c::crc32c(bytes) };
        let mut buf = Box::new(SlotBuf([0; SLOT]));
        buf.0[..bytes.len()].copy_from_slice(bytes);
        match self.io.write_at(&buf.0, u64::from(slot) * PAGE_SIZE) {
            Ok(()) => Ok(r),
            Err(e) => {
                self.free(&r);
                Err(e)
            }
        }
    }

    /// The bytes stored at `r`, checked against their checksum.
    pub fn load(&self, r: &DiskRef) -> Result<Vec<u8>, LoadError> {
        let mut buf = Box::new(SlotBuf([0; SLOT]));
        self.io.read_at(&mut buf.0, u64::from(r.slot) * PAGE_SIZE).map_err(|_| LoadError::Io)?;
        let bytes = buf.0.get(..usize::from(r.len)).ok_or(LoadError::Checksum)?;
        if crc32c::crc32c(bytes) != r.crc {
            return Err(LoadError::Checksum);
        }
        Ok(bytes.to_vec())
    }
}

/// One slot's worth of bytes, aligned for O_DIRECT.
const SLOT: usize = PAGE_SIZE as usize;
#[repr(C, align(4096))]
struct SlotBuf([u8; SLOT]);

/// An unnamed read-write file in `dir`: O_TMPFILE, or create and unlink;
/// O_DIRECT where the file system takes it (the bool says whether).
fn unnamed_file(dir: &Path) -> io::Result<(File, bool)> {
    let c = CString::new(dir.as_os_str().as_bytes()).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    let mut last = io::Error::from_raw_os_error(libc::EINVAL);
    for direct in [libc::O_DIRECT, 0] {
        let flags = libc::O_TMPFILE | libc::O_RDWR | libc::O_CLOEXEC | direct;
        // SAFETY: c is a valid NUL-terminated path; the result is checked.
        let fd = unsafe { libc::open(c.as_ptr(), flags, 0o600) };
        if fd >= 0 {
            // SAFETY: open returned a new descriptor that we now own.
            return Ok((unsafe { File::from_raw_fd(fd) }, direct != 0));
        }
        last = io::Error::last_os_error();
        if !matches!(last.raw_os_error(), Some(libc::EOPNOTSUPP) | Some(libc::EISDIR) | Some(libc::EINVAL)) {
            return Err(last);
        }
    }
    let _ = last;
    for n in 0..100u32 {
        let path = dir.join(format!(".memfs-backing-{}-{n}", std::process::id()));
        let open = |direct: i32| {
            std::fs::OpenOptions::new().read(true).write(true).create_new(true).custom_flags(direct).open(&path)
        };
        match open(libc::O_DIRECT).map(|f| (f, true)).or_else(|_| open(0).map(|f| (f, false))) {
            Ok(f) => {
                std::fs::remove_file(&path)?;
                return Ok(f);
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::from_raw_os_error(libc::EEXIST))
}

/// A block device's size in bytes (BLKGETSIZE64).
fn device_size(file: &File) -> Option<u64> {
    use std::os::unix::io::AsRawFd;
    const BLKGETSIZE64: libc::c_ulong = 0x8008_1272;
    let mut size = 0u64;
    // SAFETY: BLKGETSIZE64 writes one u64 into `size`.
    let rc = unsafe { libc::ioctl(file.as_raw_fd(), BLKGETSIZE64 as _, &mut size) };
    (rc == 0).then_some(size)
}

#[cfg(test)]
pub mod tests {
    use super::*;
    use crate::sync::Arc;
    use std::sync::atomic::{AtomicI64, Ordering};

    /// A store in memory that fails reads and writes on request.
    #[derive(Debug, Default)]
    pub struct MemIo {
        pub bytes: Mutex<Vec<u8>>,
        /// Operations left before reads fail with EIO (negative: never).
        pub fail_reads_after: AtomicI64,
        pub fail_writes_after: AtomicI64,
    }

    impl MemIo {
        pub fn new() -> Arc<MemIo> {
            Arc::new(MemIo {
                fail_reads_after: AtomicI64::new(-1),
                fail_writes_after: AtomicI64::new(-1),
                ..Default::default()
            })
        }
    }

    fn countdown(c: &AtomicI64) -> io::Result<()> {
        match c.load(Ordering::SeqCst) {
            0 => Err(io::Error::from_raw_os_error(libc::EIO)),
            n if n > 0 => {
                c.store(n - 1, Ordering::SeqCst);
                Ok(())
            }
            _ => Ok(()),
        }
    }

    impl BackingIo for Arc<MemIo> {
        fn read_at(&self, buf: &mut [u8], off: u64) -> io::Result<()> {
            countdown(&self.fail_reads_after)?;
            let b = self.bytes.lock();
            let off = off as usize;
            let src = b.get(off..off + buf.len()).ok_or_else(|| io::Error::from_raw_os_error(libc::EIO))?;
            buf.copy_from_slice(src);
            Ok(())
        }
        fn write_at(&self, buf: &[u8], off: u64) -> io::Result<()> {
            countdown(&self.fail_writes_after)?;
            let mut b = self.bytes.lock();
            let end = off as usize + buf.len();
            if b.len() < end {
                b.resize(end, 0);
            }
            b[off as usize..end].copy_from_slice(buf);
            Ok(())
        }
    }

    #[test]
    fn slots_are_checked_reused_and_bounded() {
        let io = MemIo::new();
        let b = Backing::with_io(Box::new(io.clone()), 2, "test".into());
        let r1 = b.store(b"one", false).unwrap();
        let r2 = b.store(&[2u8; 4096], true).unwrap();
        assert_eq!(b.store(b"three", false).unwrap_err().raw_os_error(), Some(libc::ENOSPC));
        assert_eq!(b.load(&r1).unwrap(), b"one");
        assert_eq!(b.load(&r2).unwrap(), vec![2u8; 4096]);
        assert_eq!(io.bytes.lock().len(), 2 * 4096, "whole slots only");
        b.free(&r1);
        let r3 = b.store(b"three", false).unwrap();
        assert_eq!(r3.slot, r1.slot, "freed slot reused");
        assert_eq!(b.used(), 2);
        // Corrupt slot r2 behind the store's back: a checksum error, not data.
        io.bytes.lock()[4096 + 10] ^= 1;
        assert_eq!(b.load(&r2), Err(LoadError::Checksum));
        io.fail_reads_after.store(0, Ordering::SeqCst);
        assert_eq!(b.load(&r3), Err(LoadError::Io));
    }

    #[test]
    fn a_failed_write_keeps_no_slot() {
        let io = MemIo::new();
        let b = Backing::with_io(Box::new(io.clone()), 10, "test".into());
        io.fail_writes_after.store(0, Ordering::SeqCst);
        assert!(b.store(b"x", false).is_err());
        assert_eq!(b.used(), 0);
    }

    #[test]
    fn open_refuses_what_is_not_a_directory_or_device() {
        assert!(Backing::open(Path::new("/nonexistent/memfs")).unwrap_err().contains("/nonexistent/memfs"));
        assert!(Backing::open(Path::new("/proc/self/status")).unwrap_err().contains("neither"));
        let dir = std::env::temp_dir();
        let b = Backing::open(&dir).unwrap();
        let r = b.store(b"hello", false).unwrap();
        assert_eq!(b.load(&r).unwrap(), b"hello");
        let r2 = b.store(&[9u8; 4096], true).unwrap();
        assert_eq!(b.load(&r2).unwrap(), vec![9u8; 4096]);
        assert_eq!(b.load(&r).unwrap(), b"hello");
    }
}
