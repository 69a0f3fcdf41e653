//! Counting and timing of every FUSE operation, as a layer around the
//! adapter: [`Counted`] implements fuser's `Filesystem` by starting a timer,
//! delegating to the inner file system, and recording the time when the
//! handler returns (the reply has been sent by then). Operations the inner
//! file system does not implement reach fuser's defaults and are counted
//! too. BATCH_FORGET is counted as one FORGET per inode (fuser does not
//! export its argument type, so its default splits it).
//!
//! It also catches a panic in any handler (see [`Counted::serve`]), so a
//! bug costs one request an EIO instead of ending the mount, and tells
//! [`Health`] (`errors=`); after an internal error under `remount-ro`,
//! every operation that changes anything (marked `#[changes(reply)]` below,
//! and OPEN for writing) gets EROFS here, before it reaches memfs.
//!
//! Every request also touches the [`Poller`] (poll.rs), which keeps the
//! worker polling the device while requests keep coming.
//!
//! Owns nothing but the wrapping; the counters are `ctl::stats::Stats`,
//! shared with the control directory. Cost per request: two clock reads
//! and four relaxed atomic adds.

use std::ffi::OsStr;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::time::SystemTime;

use fuser::{
    AccessFlags, BsdFileFlags, CopyFileRangeFlags, Errno, FileHandle, Filesystem, INodeNo, IoctlFlags, KernelConfig,
    LockOwner, OpenFlags, PollEvents, PollFlags, PollNotifier, RenameFlags, ReplyAttr, ReplyBmap, ReplyCreate,
    ReplyData, ReplyDirectory, ReplyDirectoryPlus, ReplyEmpty, ReplyEntry, ReplyIoctl, ReplyLock, ReplyLseek,
    ReplyOpen, ReplyPoll, ReplyStatfs, ReplyStatx, ReplyWrite, ReplyXattr, Request, TimeOrNow, WriteFlags,
};

use super::health::{panic_message, Health};
use super::poll::Polling;
use crate::ctl::stats::{Op, Stats};
use crate::sync::{Arc, OnceLock};

/// A file system whose every operation is counted and timed in `stats`.
pub struct Counted<F> {
    inner: F,
    stats: Arc<Stats>,
    /// Set once the session (and so the device) exists.
    poller: Arc<OnceLock<Arc<dyn Polling>>>,
    health: Arc<Health>,
}

impl<F> Counted<F> {
    pub fn new(
        inner: F,
        stats: Arc<Stats>,
        poller: Arc<OnceLock<Arc<dyn Polling>>>,
        health: Arc<Health>,
    ) -> Counted<F> {
        Counted { inner, stats, poller, health }
    }

    /// Count and time one request of `op`, served by `serve`.
    fn serve(&self, op: Op, serve: impl FnOnce()) {
        let _timer = self.stats.time(op);
        if let Some(p) = self.poller.get() {
            p.touch();
        }
        // Last line of defence: a bug that panics must cost one request,
        // not the mount. Unwinding drops the unsent reply, which makes
        // fuser answer EIO; parking_lot locks do not poison, so later
        // requests proceed; Health decides what else follows (errors=).
        if let Err(payload) = catch_unwind(AssertUnwindSafe(serve)) {
            self.health.failed(op.name(), &panic_message(&*payload));
        }
    }
}

/// One delegating method per operation: `op, name(arg: type, ...)`;
/// `#[changes(reply)]` marks those refused with EROFS once the mount is
/// read-only after an internal error.
macro_rules! counted {
    ($($(#[changes($reply:ident)])? $op:ident, $name:ident($($arg:ident: $ty:ty),* $(,)?);)*) => {
        $(
            fn $name(&self, $($arg: $ty),*) {
                $(
                    if self.health.read_only() {
                        return self.serve(Op::$op, || $reply.error(Errno::EROFS));
                    }
                )?
                let inner = &self.inner;
                self.serve(Op::$op, || inner.$name($($arg),*));
            }
        )*
    };
}

impl<F: Filesystem> Filesystem for Counted<F> {
    fn init(&mut self, req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        self.inner.init(req, config)
    }

    fn destroy(&mut self) {
        self.inner.destroy()
    }

    /// OPEN: for writing, refused with EROFS once the mount is read-only.
    fn open(&self, req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        if self.health.read_only() && flags.0 & libc::O_ACCMODE != libc::O_RDONLY {
            return self.serve(Op::Open, || reply.error(Errno::EROFS));
        }
        let inner = &self.inner;
        self.serve(Op::Open, || inner.open(req, ino, flags, reply));
    }

    counted! {
        Lookup, lookup(req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry);
        Forget, forget(req: &Request, ino: INodeNo, nlookup: u64);
        Getattr, getattr(req: &Request, ino: INodeNo, fh: Option<FileHandle>, reply: ReplyAttr);
        #[changes(reply)]
        Setattr, setattr(req: &Request, ino: INodeNo, mode: Option<u32>, uid: Option<u32>, gid: Option<u32>,
            size: Option<u64>, atime: Option<TimeOrNow>, mtime: Option<TimeOrNow>, ctime: Option<SystemTime>,
            fh: Option<FileHandle>, crtime: Option<SystemTime>, chgtime: Option<SystemTime>,
            bkuptime: Option<SystemTime>, flags: Option<BsdFileFlags>, reply: ReplyAttr);
        Readlink, readlink(req: &Request, ino: INodeNo, reply: ReplyData);
        #[changes(reply)]
        Mknod, mknod(req: &Request, parent: INodeNo, name: &OsStr, mode: u32, umask: u32, rdev: u32, reply: ReplyEntry);
        #[changes(reply)]
        Mkdir, mkdir(req: &Request, parent: INodeNo, name: &OsStr, mode: u32, umask: u32, reply: ReplyEntry);
        #[changes(reply)]
        Unlink, unlink(req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty);
        #[changes(reply)]
        Rmdir, rmdir(req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty);
        #[changes(reply)]
        Symlink, symlink(req: &Request, parent: INodeNo, link_name: &OsStr, target: &Path, reply: ReplyEntry);
        #[changes(reply)]
        Rename, rename(req: &Request, parent: INodeNo, name: &OsStr, newparent: INodeNo, newname: &OsStr,
            flags: RenameFlags, reply: ReplyEmpty);
        #[changes(reply)]
        Link, link(req: &Request, ino: INodeNo, newparent: INodeNo, newname: &OsStr, reply: ReplyEntry);
        Read, read(req: &Request, ino: INodeNo, fh: FileHandle, offset: u64, size: u32, flags: OpenFlags,
            lock_owner: Option<LockOwner>, reply: ReplyData);
        #[changes(reply)]
        Write, write(req: &Request, ino: INodeNo, fh: FileHandle, offset: u64, data: &[u8], write_flags: WriteFlags,
            flags: OpenFlags, lock_owner: Option<LockOwner>, reply: ReplyWrite);
        Flush, flush(req: &Request, ino: INodeNo, fh: FileHandle, lock_owner: LockOwner, reply: ReplyEmpty);
        Release, release(req: &Request, ino: INodeNo, fh: FileHandle, flags: OpenFlags, lock_owner: Option<LockOwner>,
            flush: bool, reply: ReplyEmpty);
        Fsync, fsync(req: &Request, ino: INodeNo, fh: FileHandle, datasync: bool, reply: ReplyEmpty);
        Opendir, opendir(req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen);
        Readdir, readdir(req: &Request, ino: INodeNo, fh: FileHandle, offset: u64, reply: ReplyDirectory);
        Readdirplus, readdirplus(req: &Request, ino: INodeNo, fh: FileHandle, offset: u64, reply: ReplyDirectoryPlus);
        Releasedir, releasedir(req: &Request, ino: INodeNo, fh: FileHandle, flags: OpenFlags, reply: ReplyEmpty);
        Fsyncdir, fsyncdir(req: &Request, ino: INodeNo, fh: FileHandle, datasync: bool, reply: ReplyEmpty);
        Statfs, statfs(req: &Request, ino: INodeNo, reply: ReplyStatfs);
        #[changes(reply)]
        Setxattr, setxattr(req: &Request, ino: INodeNo, name: &OsStr, value: &[u8], flags: i32, position: u32,
            reply: ReplyEmpty);
        Getxattr, getxattr(req: &Request, ino: INodeNo, name: &OsStr, size: u32, reply: ReplyXattr);
        Listxattr, listxattr(req: &Request, ino: INodeNo, size: u32, reply: ReplyXattr);
        #[changes(reply)]
        Removexattr, removexattr(req: &Request, ino: INodeNo, name: &OsStr, reply: ReplyEmpty);
        Access, access(req: &Request, ino: INodeNo, mask: AccessFlags, reply: ReplyEmpty);
        #[changes(reply)]
        Create, create(req: &Request, parent: INodeNo, name: &OsStr, mode: u32, umask: u32, flags: i32,
            reply: ReplyCreate);
        Statx, statx(req: &Request, ino: INodeNo, fh: Option<FileHandle>, flags: u32, mask: u32, reply: ReplyStatx);
        #[changes(reply)]
        Tmpfile, tmpfile(req: &Request, parent: INodeNo, mode: u32, umask: u32, flags: i32, reply: ReplyCreate);
        Getlk, getlk(req: &Request, ino: INodeNo, fh: FileHandle, lock_owner: LockOwner, start: u64, end: u64,
            typ: i32, pid: u32, reply: ReplyLock);
        Setlk, setlk(req: &Request, ino: INodeNo, fh: FileHandle, lock_owner: LockOwner, start: u64, end: u64,
            typ: i32, pid: u32, sleep: bool, reply: ReplyEmpty);
        Bmap, bmap(req: &Request, ino: INodeNo, blocksize: u32, idx: u64, reply: ReplyBmap);
        Ioctl, ioctl(req: &Request, ino: INodeNo, fh: FileHandle, flags: IoctlFlags, cmd: u32, in_data: &[u8],
            out_size: u32, reply: ReplyIoctl);
        Poll, poll(req: &Request, ino: INodeNo, fh: FileHandle, ph: PollNotifier, events: PollEvents,
            flags: PollFlags, reply: ReplyPoll);
        #[changes(reply)]
        Fallocate, fallocate(req: &Request, ino: INodeNo, fh: FileHandle, offset: u64, length: u64, mode: i32,
            reply: ReplyEmpty);
        Lseek, lseek(req: &Request, ino: INodeNo, fh: FileHandle, offset: i64, whence: i32, reply: ReplyLseek);
        #[changes(reply)]
        CopyFileRange, copy_file_range(req: &Request, ino_in: INodeNo, fh_in: FileHandle, offset_in: u64,
            ino_out: INodeNo, fh_out: FileHandle, offset_out: u64, len: u64, flags: CopyFileRangeFlags,
            reply: ReplyWrite);
    }
}
