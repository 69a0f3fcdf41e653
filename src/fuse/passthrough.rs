//! Passthrough opens (`passthrough=`): which open of a file is handed to
//! the kernel, and the backing ids that make that possible.
//!
//! A file whose bytes are in a kernel memory file (core/memfile.rs) is
//! opened with FOPEN_PASSTHROUGH: its reads, writes and mmap then go
//! straight to that file inside the kernel. The kernel refuses to mix
//! cached and passthrough opens of one inode (fs/fuse/iomode.c), so the
//! choice is made per inode, under one lock, from the opens this table
//! counts (every OPEN answered, and O_TMPFILE's implicit open, until its
//! RELEASE):
//! - no cached open of the inode, and its bytes are (or now move) in a
//!   memory file: passthrough, all such opens sharing one backing id that
//!   lives as long as the memory file, and at least until the last of
//!   them is released ([`Opens`]);
//! - otherwise a cached open, as memfs's opens always were, except that a
//!   memory-file file's cached open drops the kernel's page cache of it
//!   first (a passthrough writer may have changed the bytes under it).
//!
//! While an inode has passthrough opens, every open of it is passthrough
//! (the kernel refuses any other kind with EINVAL). Direct-I/O opens
//! (`cache=metadata|none`) are neither kind; strictatime's direct-I/O
//! opens (every open that is not passthrough, under strictatime) are
//! counted as cached (safe: they only keep a later open from being
//! passthrough until released).
//! Cached opens also keep access times (`cached_open_flags`).
//! Counting errs safe: the kernel drops an open before its RELEASE reaches
//! us, so this table can only think an open still exists, never miss one.

use std::collections::HashMap;
use std::os::fd::BorrowedFd;
use std::sync::atomic::AtomicUsize;
use std::sync::LazyLock;
use std::time::Duration;

use fuser::{BackingId, Errno, FileAttr, FileHandle, FopenFlags, Generation, INodeNo, ReplyCreate, ReplyOpen};

use super::invalidate::AttrDropper;
use super::settle::Settler;
use crate::core::memfile::MemFile;
use crate::core::{AtimeReads, Fs};
use crate::ctl::stats::Stats;
use crate::sync::{Arc, AtomicBool, Mutex, Ordering};

/// File handles say which kind of open a RELEASE ends.
pub const FH_CACHED: FileHandle = FileHandle(1);
pub const FH_PASSTHROUGH: FileHandle = FileHandle(2);
/// A passthrough open for reading and writing: one that can write through
/// a shared mapping (`attrs_volatile`).
pub const FH_PASSTHROUGH_RW: FileHandle = FileHandle(3);
/// A direct-I/O open (`cache=metadata|none`) on a mount with passthrough:
/// counted by the core until its RELEASE ([`Passthrough::opened_direct`]).
pub const FH_DIRECT: FileHandle = FileHandle(4);
/// A passthrough open for writing only: the core counts the opens that may
/// write (they may grow a file behind memfs's back, `Fs::unpin_kernel_file`).
pub const FH_PASSTHROUGH_WO: FileHandle = FileHandle(5);

/// Inodes with passthrough opens for reading and writing, by count. Through
/// such an open a process can write into the memory file by a shared
/// mapping, and a write fault updates the memory file's mtime and ctime
/// without a word to the FUSE inode (fs/fuse/passthrough.c has no hook for
/// it, where write(2) has `fuse_passthrough_end_write`, which drops the
/// cached attributes): while one lasts, the file's attributes and name are
/// answered uncached, so that each stat asks memfs, which takes the memory
/// file's times in (xfstests generic/215: mtime after a mapped write).
/// Process-wide, as the TTL it changes is (one mount a daemon).
static RW_OPENS: LazyLock<std::sync::Mutex<HashMap<u64, u32>>> = LazyLock::new(Default::default);
/// Entries in [`RW_OPENS`]: the common case (none) costs one load.
static RW_FILES: AtomicUsize = AtomicUsize::new(0);

fn rw_opens() -> std::sync::MutexGuard<'static, HashMap<u64, u32>> {
    RW_OPENS.lock().unwrap_or_else(|e| e.into_inner())
}

/// Whether `ino`'s attributes must not be cached by the kernel now.
pub fn attrs_volatile(ino: u64) -> bool {
    RW_FILES.load(Ordering::Relaxed) > 0 && rw_opens().contains_key(&ino)
}

/// One more (`true`) or one fewer passthrough open for reading and writing
/// of `ino`; whether it was the first.
fn count_rw(ino: u64, on: bool) -> bool {
    let mut m = rw_opens();
    if on {
        let n = m.entry(ino).or_insert(0);
        *n += 1;
        if *n == 1 {
            RW_FILES.fetch_add(1, Ordering::Relaxed);
        }
        return *n == 1;
    }
    if let Some(n) = m.get_mut(&ino) {
        *n -= 1;
        if *n == 0 {
            m.remove(&ino);
            RW_FILES.fetch_sub(1, Ordering::Relaxed);
        }
    }
    false
}

/// What answers an open: an OPEN's reply, or a CREATE's, which opens the
/// file it made (one round trip where MKNOD then OPEN took two).
pub trait OpenReply {
    /// Register `fd` as a backing file for passthrough opens.
    fn open_backing(&self, fd: BorrowedFd<'_>) -> std::io::Result<BackingId>;
    /// Answer with an open through the kernel's page cache, or direct I/O.
    fn opened(self, fh: FileHandle, flags: FopenFlags);
    /// Answer with a passthrough open of backing file `id`.
    fn opened_passthrough(self, fh: FileHandle, flags: FopenFlags, id: &BackingId);
    /// Answer with an error.
    fn error(self, err: Errno);
}

impl OpenReply for ReplyOpen {
    fn open_backing(&self, fd: BorrowedFd<'_>) -> std::io::Result<BackingId> {
        ReplyOpen::open_backing(self, fd)
    }
    fn opened(self, fh: FileHandle, flags: FopenFlags) {
        ReplyOpen::opened(self, fh, flags)
    }
    fn opened_passthrough(self, fh: FileHandle, flags: FopenFlags, id: &BackingId) {
        ReplyOpen::opened_passthrough(self, fh, flags, id)
    }
    fn error(self, err: Errno) {
        ReplyOpen::error(self, err)
    }
}

/// A CREATE's reply with the entry of the file it made.
pub struct Created {
    pub reply: ReplyCreate,
    pub ttl: &'static Duration,
    pub attr: FileAttr,
    pub generation: Generation,
}

impl OpenReply for Created {
    fn open_backing(&self, fd: BorrowedFd<'_>) -> std::io::Result<BackingId> {
        self.reply.open_backing(fd)
    }
    fn opened(self, fh: FileHandle, flags: FopenFlags) {
        self.reply.created(self.ttl, &self.attr, self.generation, fh, flags)
    }
    fn opened_passthrough(self, fh: FileHandle, flags: FopenFlags, id: &BackingId) {
        // Decided only now: a creating open for reading and writing.
        let ttl = if fh == FH_PASSTHROUGH_RW { &Duration::ZERO } else { self.ttl };
        self.reply.created_passthrough(ttl, &self.attr, self.generation, fh, flags, id)
    }
    fn error(self, err: Errno) {
        self.reply.error(err)
    }
}

/// The flags of a cached open of `ino` (open(2) flags `open_flags`) that
/// keep its access time as the mount's rule says, though reads the kernel
/// serves from its page cache never reach memfs. `keep`: the open keeps
/// the kernel's page cache (FOPEN_KEEP_CACHE); otherwise the kernel drops
/// it at this open and the first read comes here anyway.
/// - strictatime: direct I/O, so that every read reaches memfs;
/// - relatime with atime due (not after mtime or ctime, or a day old):
///   without FOPEN_KEEP_CACHE, so that the kernel drops its copy at this
///   open and the first read, if there is one, reaches memfs and updates
///   atime (the first read after a write would otherwise be a hit in the
///   cache the write filled); later opens keep the cache again. Counting
///   the open itself as the read was tried and dropped: an open that never
///   reads (go-fuse's posixtest FstatDeleted) must leave atime alone.
///
/// Write-only opens read nothing and change nothing.
pub fn cached_open_flags(fs: &Fs, ino: u64, open_flags: i32, keep: bool) -> FopenFlags {
    let reads = if open_flags & libc::O_ACCMODE == libc::O_WRONLY { AtimeReads::None } else { fs.atime_reads(ino) };
    match reads {
        AtimeReads::Every => FopenFlags::FOPEN_DIRECT_IO | FopenFlags::FOPEN_NOFLUSH,
        AtimeReads::None if keep => FopenFlags::FOPEN_KEEP_CACHE | FopenFlags::FOPEN_NOFLUSH,
        _ => FopenFlags::FOPEN_NOFLUSH,
    }
}

/// The opens of one inode that constrain the next one.
/// `backing` is shared with the memory file it registers (core:
/// `MemFile::attach`): the id stays registered as long as that kernel file
/// lives, through the pool and on to the next new file made from it, so
/// that a small new file's open and release need not register and
/// unregister it (about 5 µs each). The opens' share keeps it registered
/// until the last RELEASE even when the core drops the file before (a
/// deleted file whose FORGET comes first: [`Passthrough::holds_forgotten`]).
#[derive(Default)]
struct Opens {
    cached: u32,
    passthrough: u32,
    backing: Option<Arc<BackingId>>,
}

/// Passthrough state of a mount.
pub struct Passthrough {
    /// Where the counts are shown (stats/passthrough).
    stats: Arc<Stats>,
    /// The kernel granted FUSE_PASSTHROUGH and the mount wants it.
    enabled: AtomicBool,
    opens: Mutex<HashMap<u64, Opens>>,
    /// Backing files the kernel refused to register (logged once).
    refused: AtomicBool,
    /// Drops a file's cached attributes at its first passthrough open for
    /// reading and writing ([`RW_OPENS`]).
    attrs: AttrDropper,
    /// Moves a small new file back into the heap after its last RELEASE,
    /// off the request path (fuse/settle.rs).
    settler: Settler,
}

impl Passthrough {
    pub fn new(stats: Arc<Stats>, attrs: AttrDropper, settler: Settler) -> Passthrough {
        Passthrough {
            stats,
            enabled: AtomicBool::new(false),
            opens: Mutex::default(),
            refused: AtomicBool::new(false),
            attrs,
            settler,
        }
    }

    /// The file handle of a passthrough open of `ino` with open(2) flags
    /// `flags`, counting one for reading and writing ([`RW_OPENS`]): the
    /// attributes the kernel caches from before go, before the reply.
    fn passthrough_fh(&self, ino: u64, flags: i32) -> FileHandle {
        match flags & libc::O_ACCMODE {
            libc::O_RDWR => {}
            libc::O_WRONLY => return FH_PASSTHROUGH_WO,
            _ => return FH_PASSTHROUGH,
        }
        if count_rw(ino, true) {
            self.attrs.drop_attrs(ino);
        }
        FH_PASSTHROUGH_RW
    }

    pub fn enable(&self) {
        self.enabled.store(true, Ordering::Relaxed);
        self.stats.passthrough_on.store(1, Ordering::Relaxed);
    }

    pub fn enabled(&self) -> bool {
        self.enabled.load(Ordering::Relaxed)
    }

    /// Answer an OPEN of regular file `ino` with page-cache policy `all`:
    /// passthrough when the rules above allow, a cached open otherwise.
    /// `new`: the creating open of a file CREATE just made, which under
    /// `passthrough_create=` starts in a memory file whatever its size
    /// will be (core: `Fs::pin_new_kernel_file`).
    pub fn open(&self, fs: &Fs, ino: INodeNo, flags: i32, new: bool, reply: impl OpenReply) {
        let mut opens = self.opens.lock();
        let e = opens.entry(ino.0).or_default();
        // O_NONBLOCK on a regular file means nothing to the kernel; memfs's
        // own tools (`memfs where|evict|prime`) open with it, and so do
        // tools that must not hang on a FIFO (tar, test harnesses). Such an
        // open does not pin the file (which would page it in whole under
        // ram=): it is cached, unless passthrough opens exist already.
        let look_only = flags & libc::O_NONBLOCK != 0;
        // A write-only open reads nothing: the access time needs no arming.
        let reads = flags & libc::O_ACCMODE != libc::O_WRONLY;
        // While an inode has passthrough opens, the kernel takes no other
        // kind (fs/fuse/iomode.c: EINVAL): every open shares its backing id.
        // (Access mode 3, which Linux takes for ioctls, neither reads nor
        // writes through the open: counted as a reader, as its handle says.)
        let writes = matches!(flags & libc::O_ACCMODE, libc::O_WRONLY | libc::O_RDWR);
        if let (true, Some(id)) = (e.passthrough > 0, &e.backing) {
            fs.pin_held(ino.0, writes);
            // The limit was last set for the opens before, which may all
            // have been readers' (core: `Fs::rebalance_after_moving`).
            if writes {
                fs.rebalance_kernel_limit();
            }
            if reads {
                fs.arm_kernel_atime(ino.0);
            }
            e.passthrough += 1;
            self.stats.passthrough_opens.fetch_add(1, Ordering::Relaxed);
            self.stats.passthrough_opens_total.fetch_add(1, Ordering::Relaxed);
            return reply.opened_passthrough(self.passthrough_fh(ino.0, flags), FopenFlags::FOPEN_NOFLUSH, id);
        }
        // Pinning moves the file into a memory file if it qualifies, pages
        // it in whole under ram=, and keeps its pages in RAM while open.
        // An empty file opened for writing starts in one as a new file does
        // (`passthrough_create=`): fio, and many a tool, creates a file,
        // closes it and opens it again to write it (it had moved back into
        // the heap at that close), and every write then took the daemon
        // path (2 GiB in 1 MiB writes: 387-509 MiB/s, tmpfs 984-1098).
        // Under a RAM ceiling below size= a writer goes through the daemon,
        // which pages out as it writes (core: `Fs::passthrough_may_write`).
        if e.cached == 0
            && !look_only
            && (!writes || fs.passthrough_may_write())
            && (((new || writes) && fs.pin_new_kernel_file(ino.0, writes)) || fs.pin_kernel_file(ino.0, writes))
        {
            if e.backing.is_none() {
                let registered = |f: &MemFile| -> std::io::Result<Arc<BackingId>> {
                    if let Some(id) = f.attached().and_then(|a| a.downcast::<BackingId>().ok()) {
                        return Ok(id);
                    }
                    let id = Arc::new(reply.open_backing(f.fd())?);
                    f.attach(id.clone());
                    Ok(id)
                };
                match fs.with_kernel_file(ino.0, registered) {
                    Some(Ok(id)) => e.backing = Some(id),
                    Some(Err(err)) if !self.refused.swap(true, Ordering::Relaxed) => {
                        log::warn!("passthrough: the kernel refused a backing file ({err}); cached opens instead");
                    }
                    _ => {}
                }
            }
            // The kernel enforces size= on passthrough writers: only with an
            // exact limit (rebalance_kernel_limit).
            if e.backing.is_some() && e.passthrough == 0 && !fs.rebalance_kernel_limit() {
                e.backing = None;
            }
            if let Some(id) = &e.backing {
                if reads {
                    fs.arm_kernel_atime(ino.0);
                }
                e.passthrough += 1;
                if e.passthrough == 1 {
                    self.stats.passthrough_files.fetch_add(1, Ordering::Relaxed);
                }
                self.stats.passthrough_opens.fetch_add(1, Ordering::Relaxed);
                self.stats.passthrough_opens_total.fetch_add(1, Ordering::Relaxed);
                return reply.opened_passthrough(self.passthrough_fh(ino.0, flags), FopenFlags::FOPEN_NOFLUSH, id);
            }
            fs.unpin_kernel_file(ino.0, writes);
        }
        e.cached += 1;
        let keep = !fs.cached_open(ino.0);
        reply.opened(FH_CACHED, cached_open_flags(fs, ino.0, flags, keep));
    }

    /// A direct-I/O open of regular file `ino` (its policy is `metadata`
    /// or `none`) is answered: the handle its RELEASE will carry. On a
    /// mount with passthrough the core counts it until then, since a
    /// deleted memory file held open this way must keep its pages' room
    /// (`Fs::lent_pages`); without passthrough there are no memory files.
    pub fn opened_direct(&self, fs: &Fs, ino: u64) -> FileHandle {
        if !self.enabled() {
            return FileHandle(0);
        }
        fs.direct_open(ino);
        FH_DIRECT
    }

    /// A cached open the kernel made without an OPEN request (O_TMPFILE).
    pub fn opened_cached(&self, fs: &Fs, ino: u64) {
        if self.enabled() {
            self.opens.lock().entry(ino).or_default().cached += 1;
            fs.cached_open(ino);
        }
    }

    /// RELEASE of an open made with file handle `fh`. True when that was
    /// the last cached open of a file whose bytes are in a memory file: the
    /// kernel's page cache of it is a second copy now, for the caller to drop.
    /// Whether a backing file is still registered for an inode the core
    /// has let go (deleted, and its FORGET handled before this RELEASE:
    /// over io_uring the two come on different threads). Its memory file's
    /// pages stay in the private tmpfs until that RELEASE closes the
    /// backing id, so an ENOSPC meanwhile may be space on its way back
    /// (parked.rs).
    pub fn holds_forgotten(&self, fs: &Fs) -> bool {
        self.opens.lock().iter().any(|(ino, e)| e.backing.is_some() && !fs.exists(*ino))
    }

    pub fn release(&self, fs: &Fs, ino: INodeNo, fh: FileHandle) -> bool {
        if fh == FH_DIRECT {
            fs.cached_close(ino.0);
            return false;
        }
        let mut opens = self.opens.lock();
        let Some(e) = opens.get_mut(&ino.0) else { return false };
        match fh {
            FH_CACHED => {
                e.cached = e.cached.saturating_sub(1);
                fs.cached_close(ino.0);
            }
            FH_PASSTHROUGH | FH_PASSTHROUGH_RW | FH_PASSTHROUGH_WO if e.passthrough > 0 => {
                if fh == FH_PASSTHROUGH_RW {
                    count_rw(ino.0, false);
                }
                e.passthrough -= 1;
                self.stats.passthrough_opens.fetch_sub(1, Ordering::Relaxed);
                if e.passthrough == 0 {
                    e.backing = None; // the memory file keeps the id registered while it lives
                    self.stats.passthrough_files.fetch_sub(1, Ordering::Relaxed);
                }
            }
            _ => return false,
        }
        let last_cached = fh == FH_CACHED && e.cached == 0;
        let closed = e.cached == 0 && e.passthrough == 0;
        if closed {
            opens.remove(&ino.0);
        }
        drop(opens);
        let passthrough = fh == FH_PASSTHROUGH || fh == FH_PASSTHROUGH_RW || fh == FH_PASSTHROUGH_WO;
        if passthrough {
            // What the passthrough writers did shows in stats and df now,
            // and the pager may page the file out again.
            fs.unpin_kernel_file(ino.0, fh != FH_PASSTHROUGH);
        }
        // A small new file moves back into the heap, off the request path
        // (fuse/settle.rs: the kernel still holds its memory file now).
        if closed && fs.moves_back(ino.0) {
            self.settler.later(fs, ino.0);
        }
        // The kernel's limit on memory files matters to passthrough writers
        // only: with none left, the next passthrough open sets it.
        if passthrough && self.stats.passthrough_opens.load(Ordering::Relaxed) > 0 {
            fs.rebalance_kernel_limit();
        }
        last_cached && fs.in_kernel_file(ino.0)
    }
}
