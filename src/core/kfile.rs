//! Data operations on files whose bytes live in a kernel memory file
//! (core/memfile.rs), and the move of a growing file into one.
//!
//! These are the same operations as rw.rs's, with the same locks (the
//! file's data lock, then its metadata) and the same accounting, done on
//! the memory file with system calls. What differs: the kernel may change
//! such a file behind memfs's back (FUSE passthrough reads and writes go
//! straight to it), so every operation first takes in what changed
//! ([`Fs::sync_kernel`]): size, pages (charged to `size=` and the owner
//! even past the limit: they exist), mtime/ctime of a write, atime of a
//! read under the mount's atime rule. After changing the file itself memfs
//! records the result as its own (`MemFile::absorb`), so only foreign
//! changes are ever taken in.
//!
//! Limits: memory files in a private tmpfs instance are written after
//! setting that instance's limit to what `size=` leaves (so the kernel
//! stops the write exactly where memfs would) and charged for what they
//! added afterwards. memfd files cannot be limited that way: a write is
//! charged the whole range first (memfs cannot see which pages of a memory
//! file exist without a system call per page) and what it did not add is
//! given back at once; near a full `size=` an overwrite of such a file may
//! come back short where a heap file's would not.

use super::data::FileData;
use super::inode::{Inode, Meta};
use super::memfile::{KernelStat, MemFile};
use super::rw::{data_lock, FallocMode, Whence};
use super::types::{Caller, Ino, Timespec, PAGE_SIZE};
use super::{Fs, FsError, FsResult};
use crate::sync::Ordering;

/// Pages spanned by `[off, off+len)` (len > 0).
fn pages_spanned(off: u64, len: u64) -> u64 {
    (off + len - 1) / PAGE_SIZE - off / PAGE_SIZE + 1
}

impl Fs {
    /// Bring `m`'s size and page charge to what the kernel file says (`st`);
    /// returns the change in pages.
    fn settle_pages(&self, m: &mut Meta, st: &KernelStat) -> i64 {
        let delta = st.pages as i64 - m.pages as i64;
        if delta > 0 {
            self.usage.charge_existing(delta as u64);
        } else {
            self.usage.uncharge_pages(delta.unsigned_abs());
        }
        self.usage.account_uid(m.uid, delta, 0);
        m.pages = st.pages;
        m.size = st.size;
        delta
    }

    /// Take in what others (passthrough opens) did to `f` since memfs last
    /// looked: size, pages, and the times their I/O set.
    pub(super) fn sync_kernel(&self, inode: &Inode, f: &MemFile) {
        let Ok(Some((old, new))) = f.changes() else { return };
        let mut m = inode.meta();
        self.settle_pages(&mut m, &new);
        if new.mtime != old.mtime {
            // A write: the kernel set the memory file's mtime and ctime.
            m.mtime = new.mtime;
            m.ctime = m.ctime.max(new.mtime);
        }
        if new.atime != old.atime && !self.noatime.load(Ordering::Relaxed) {
            m.touch_accessed(new.atime);
        }
    }

    /// Take in foreign changes of `ino` if its bytes are in a kernel file.
    pub fn sync_kernel_file(&self, ino: Ino) {
        let Ok(inode) = self.get(ino) else { return };
        let Some(lock) = inode.file() else { return };
        let data = lock.read();
        if let Some(f) = data.kernel() {
            self.sync_kernel(&inode, f);
        }
    }

    /// Take in foreign changes of every file held in a kernel file (statfs:
    /// so `df` counts what passthrough writers added).
    pub(super) fn sync_all_kernel_files(&self) {
        let inos: Vec<Ino> = self.kernel_inos.lock().iter().copied().collect();
        for ino in inos {
            if self.get(ino).is_err() {
                self.kernel_inos.lock().remove(&ino);
                continue;
            }
            self.sync_kernel_file(ino);
        }
        self.rebalance_kernel_limit();
    }

    /// Move `inode`'s bytes into a kernel memory file if it has grown to
    /// `passthrough_min=` and can move; whether it is in one now.
    pub(super) fn move_to_kernel(&self, inode: &Inode, data: &mut FileData) -> bool {
        if data.kernel().is_some() {
            return true;
        }
        let Some(store) = &self.kernel_store else { return false };
        let size = inode.meta().size;
        if size < self.passthrough_min.load(Ordering::Relaxed) || !data.can_move_to_kernel() || self.no_data() {
            return false;
        }
        // The memory files' limit makes room for this file's pages first.
        self.rebalance_kernel_limit_moving(inode.meta().pages);
        let moved = store.create().and_then(|f| data.move_to_kernel(f, size));
        match moved {
            Ok(pages) => {
                let st = KernelStat { size, pages, atime: Timespec::default(), mtime: Timespec::default() };
                self.settle_pages(&mut inode.meta(), &st);
                self.kernel_inos.lock().insert(inode.ino);
                true
            }
            Err(e) => {
                log::warn!("inode {}: stays in the heap, no kernel memory file: {e}", inode.ino);
                false
            }
        }
    }

    /// Call `f` with the kernel memory file of regular file `ino`, moving
    /// the file there first if it qualifies; `None` if it does not.
    pub fn with_kernel_file<R>(&self, ino: Ino, f: impl FnOnce(&MemFile) -> R) -> Option<R> {
        let inode = self.file(ino).ok()?;
        let lock = data_lock(&inode);
        {
            let data = lock.read();
            if let Some(k) = data.kernel() {
                return Some(f(k));
            }
        }
        let mut data = lock.write();
        if !self.move_to_kernel(&inode, &mut data) {
            return None;
        }
        data.kernel().map(f)
    }

    /// No file moves into a kernel memory file from now on (the kernel
    /// turned passthrough down at INIT).
    pub fn stop_kernel_files(&self) {
        self.passthrough_min.store(u64::MAX, Ordering::Relaxed);
    }

    /// Give the kernel's own limit on memory files what `size=` leaves after
    /// the heap's pages, so passthrough writers get ENOSPC where memfs's
    /// writers do. Between two calls they can pass `size=` by at most what
    /// heap files grew meanwhile (docs/TUNABLES.md). Called at each
    /// passthrough open and release, statfs and `size=` changes. `moving`:
    /// pages of a heap file about to move into a memory file. False when
    /// the limit cannot be exact: no room is left and no memory file holds
    /// anything (a tmpfs cannot be limited to 0 pages; its size=0 means
    /// unlimited): such a file must not be opened with passthrough now.
    pub fn rebalance_kernel_limit(&self) -> bool {
        self.rebalance_kernel_limit_moving(0)
    }

    /// Whether the kernel itself stops a write to a memory file exactly at
    /// `size=` now (a private tmpfs instance, its limit just set exactly):
    /// then memfs charges what a write added afterwards instead of a
    /// whole range before, and is exact where a range is partly allocated.
    fn kernel_enforces_limit(&self) -> bool {
        self.kernel_store.as_ref().is_some_and(|s| s.kind() == "tmpfs") && self.rebalance_kernel_limit()
    }

    fn rebalance_kernel_limit_moving(&self, moving: u64) -> bool {
        let Some(store) = &self.kernel_store else { return true };
        let u = self.usage.snapshot();
        let (pages, exact) = if u.max_pages == 0 {
            (0, true)
        } else {
            let (_, kernel) = self.kernel_file_usage();
            let kernel = kernel + moving;
            let heap = u.used_pages.saturating_sub(kernel);
            let pages = u.max_pages.saturating_sub(heap).max(kernel);
            (pages.max(1), pages > 0)
        };
        if let Err(e) = store.set_size(pages * PAGE_SIZE) {
            log::warn!("passthrough: cannot set the memory files' limit to {pages} pages: {e}");
        }
        exact
    }

    /// Whether regular file `ino`'s bytes are in a kernel memory file.
    pub fn in_kernel_file(&self, ino: Ino) -> bool {
        self.file(ino).is_ok_and(|i| data_lock(&i).read().kernel().is_some())
    }

    /// (files, pages) held in kernel memory files, as last taken in.
    pub fn kernel_file_usage(&self) -> (u64, u64) {
        let inos: Vec<Ino> = self.kernel_inos.lock().iter().copied().collect();
        let pages = inos.iter().filter_map(|&i| self.get(i).ok()).map(|i| i.meta().pages).sum();
        (inos.len() as u64, pages)
    }

    /// Where kernel memory files are made ("tmpfs", "memfd"), if anywhere.
    pub fn kernel_store_kind(&self) -> Option<&'static str> {
        self.kernel_store.as_ref().map(|s| s.kind())
    }

    /// read(2) of a kernel-file file.
    pub(super) fn kread(&self, inode: &Inode, f: &MemFile, off: u64, size: u32) -> FsResult<Vec<u8>> {
        self.sync_kernel(inode, f);
        let mut m = inode.meta();
        let n = m.size.saturating_sub(off).min(u64::from(size)) as usize;
        self.read_accessed(&mut m);
        drop(m);
        f.read(off, n).map_err(|_| FsError::Io)
    }

    /// write(2) of a kernel-file file: as [`Fs::write`], short or ENOSPC at `size=`.
    pub(super) fn kwrite(&self, inode: &Inode, f: &MemFile, off: u64, buf: &[u8], caller: &Caller) -> FsResult<usize> {
        self.sync_kernel(inode, f);
        let (written, err, granted) = if buf.is_empty() {
            (0, None, 0)
        } else if self.no_data() {
            // Bytes discarded, size kept (tunable no_data).
            let end = off + buf.len() as u64;
            let grow = f.stat().is_ok_and(|st| st.size < end);
            (buf.len(), if grow { f.set_len(end).err() } else { None }, 0)
        } else if self.kernel_enforces_limit() {
            let (w, e) = f.write(off, buf);
            (w, e, 0)
        } else {
            let want = pages_spanned(off, buf.len() as u64);
            let granted = self.usage.charge_up_to(want);
            let len = if granted == want {
                buf.len()
            } else {
                // Only as far as the granted pages reach (as if each were new).
                ((off / PAGE_SIZE + granted) * PAGE_SIZE).saturating_sub(off).min(buf.len() as u64) as usize
            };
            let (w, e) = if len > 0 { f.write(off, &buf[..len]) } else { (0, None) };
            (w, e, granted)
        };
        let st = f.absorb();
        let mut m = inode.meta();
        // The granted charge is replaced by the pages the write really added.
        self.usage.uncharge_pages(granted);
        if let Ok(st) = &st {
            self.settle_pages(&mut m, st);
        }
        if !buf.is_empty() {
            m.touch_modified(Timespec::now());
            m.kill_privs(caller);
        }
        drop(m);
        match (written, err) {
            (0, Some(e)) if e.raw_os_error() != Some(libc::ENOSPC) => Err(FsError::Io),
            (0, _) if !buf.is_empty() => Err(FsError::NoSpace),
            (w, _) => Ok(w),
        }
    }

    /// fallocate(2) of a kernel-file file.
    pub(super) fn kfallocate(&self, inode: &Inode, f: &MemFile, off: u64, len: u64, mode: FallocMode) -> FsResult<()> {
        self.sync_kernel(inode, f);
        let end = off + len;
        let result = if mode.punch_hole {
            f.punch_hole(off, len).map_err(|_| FsError::Io)
        } else {
            let want = if self.kernel_enforces_limit() { 0 } else { pages_spanned(off, len) };
            if !self.usage.charge_pages(want) {
                return Err(FsError::NoSpace);
            }
            let r = (|| {
                if mode.zero_range {
                    f.punch_hole(off, len)?;
                }
                f.allocate(off, len)?;
                if !mode.keep_size && end > f.stat()?.size {
                    f.set_len(end)?;
                }
                Ok(())
            })();
            self.usage.uncharge_pages(want);
            r.map_err(|e: std::io::Error| match e.raw_os_error() {
                Some(libc::ENOSPC) => FsError::NoSpace,
                _ => FsError::Io,
            })
        };
        let st = f.absorb();
        let mut m = inode.meta();
        if let Ok(st) = &st {
            self.settle_pages(&mut m, st);
        }
        if result.is_ok() {
            m.touch_modified(Timespec::now());
        }
        result
    }

    /// truncate/ftruncate of a kernel-file file, under the caller's data
    /// and metadata locks; the caller sets the times.
    pub(super) fn ktruncate(&self, m: &mut Meta, f: &MemFile, size: u64) -> FsResult<()> {
        let r = f.set_len(size).map_err(|_| FsError::Io);
        if let Ok(st) = f.absorb() {
            self.settle_pages(m, &st);
        }
        r
    }

    /// SEEK_DATA / SEEK_HOLE of a kernel-file file.
    pub(super) fn kseek(&self, inode: &Inode, f: &MemFile, off: u64, whence: Whence) -> FsResult<u64> {
        self.sync_kernel(inode, f);
        if off >= inode.meta().size {
            return Err(FsError::NoDataAtOffset);
        }
        match f.seek(off, whence == Whence::Data) {
            Ok(Some(at)) => Ok(at),
            Ok(None) => Err(FsError::NoDataAtOffset),
            Err(_) => Err(FsError::Io),
        }
    }
}
