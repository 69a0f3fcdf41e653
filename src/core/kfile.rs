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

use super::cache::CachePolicy;
use super::data::{copy_out, in_runs, FileData};
use super::inode::{Inode, Meta};
use super::memfile::{KernelStat, MemFile};
use super::rw::{data_lock, FallocMode, Whence};
use super::types::{Caller, Ino, Timespec, PAGE_SIZE};
use super::{Fs, FsError, FsResult};
use crate::sync::Ordering;

/// Bytes a write to a memory file does at a time (room is made for each).
const CHUNK: usize = 32 * PAGE_SIZE as usize;

/// Rounds in a row a writer at the ceiling waits for reclaim that reports
/// busy victims before it gives up (as rw.rs's writers).
const MAX_STALLED_ROUNDS: u32 = 1000;

/// Pages spanned by `[off, off+len)` (len > 0).
fn pages_spanned(off: u64, len: u64) -> u64 {
    (off + len - 1) / PAGE_SIZE - off / PAGE_SIZE + 1
}

impl Fs {
    /// Bring `m`'s size and page charge to what the kernel file says (`new`)
    /// plus `data`'s paged-out pages, and the pager's count of memory-file
    /// pages by what changed since `old`.
    fn settle(&self, m: &mut Meta, data: &FileData, old: &KernelStat, new: &KernelStat) {
        let delta = self.charge_to(m, new.pages + data.cold_count());
        self.usage.kernel_pages_changed(delta);
        m.size = new.size;
        if let Some(p) = data.pager() {
            p.kernel_pages_changed(new.pages as i64 - old.pages as i64);
        }
    }

    /// Charge or give back what brings `m.pages` to `total`; the change.
    fn charge_to(&self, m: &mut Meta, total: u64) -> i64 {
        let delta = total as i64 - m.pages as i64;
        if delta > 0 {
            self.usage.charge_existing(delta as u64);
        } else {
            self.usage.uncharge_pages(delta.unsigned_abs());
        }
        self.usage.account_uid(m.uid, delta, 0);
        m.pages = total;
        delta
    }

    /// After memfs itself changed `data`'s memory file: take the result as known.
    pub(super) fn absorb(&self, m: &mut Meta, data: &FileData) {
        if let Some(Ok((old, new))) = data.kernel().map(MemFile::absorb) {
            self.settle(m, data, &old, &new);
        }
    }

    /// Take in what others (passthrough opens) did to `data`'s memory file
    /// since memfs last looked: size, pages, and the times their I/O set.
    pub(super) fn sync_kernel(&self, inode: &Inode, data: &FileData) {
        let Some(f) = data.kernel() else { return };
        // The metadata lock before the changes are taken: two syncs (the
        // reclaimer's and a request's) under the shared data lock then
        // apply them in the order they took them, and a setattr that
        // syncs first cannot find them taken but not yet applied.
        let mut m = inode.meta();
        let Ok(Some((old, new))) = f.changes() else { return };
        self.settle(&mut m, data, &old, &new);
        // What the kernel did came after memfs's last change of this file
        // (every operation takes foreign changes in first), so its times are
        // at least that change's ctime. The kernel stamps them from its
        // coarse clock, which can lag memfs's fine one by a tick: without
        // the floor a passthrough write could leave mtime before btime, or
        // before the ctime of a chmod that preceded it.
        let floor = m.ctime();
        if new.mtime != old.mtime {
            // A write: the kernel set the memory file's mtime and ctime.
            let t = new.mtime.max(floor);
            m.set_mtime(t);
            m.set_ctime(t);
        }
        if new.atime != old.atime && !self.noatime.load(Ordering::Relaxed) && super::fileattr::atime_allowed(&m) {
            // The private tmpfs applied the mount's rule already
            // (strictatime or relatime): under strictatime take its time as
            // is; under relatime apply the rule to memfs's own times too.
            if self.strictatime() {
                m.set_atime(new.atime.max(floor));
            } else {
                m.touch_accessed(new.atime.max(floor));
            }
        }
    }

    /// Before a passthrough open of `ino`: when memfs's rule says its next
    /// read updates the access time (relatime, atime due), make the memory
    /// file's own atime due as well. The kernel applies relatime to the
    /// reads it serves against the memory file's own times, which memfs's
    /// chmod, chown and utimes never touch; the change is memfs's own.
    pub fn arm_kernel_atime(&self, ino: Ino) {
        if self.atime_reads(ino) != super::AtimeReads::Next {
            return;
        }
        let Ok(inode) = self.get(ino) else { return };
        let Some(lock) = inode.file() else { return };
        let data = lock.read();
        let Some(f) = data.kernel() else { return };
        self.sync_kernel(&inode, &data); // what others did first
        if self.atime_reads(ino) == super::AtimeReads::Next && f.arm_atime().is_ok() {
            self.absorb(&mut inode.meta(), &data);
        }
    }

    /// Take in foreign changes of `ino` if its bytes are in a kernel file.
    pub fn sync_kernel_file(&self, ino: Ino) {
        if let Ok(inode) = self.get(ino) {
            self.take_kernel_changes(&inode);
        }
    }

    /// Take in what passthrough writers did to `inode`'s memory file, if it
    /// has one, before memfs changes its metadata: every such change must
    /// come after them (their mtime is floored at memfs's last ctime).
    pub(super) fn take_kernel_changes(&self, inode: &Inode) {
        if let Some(lock) = inode.file() {
            self.sync_kernel(inode, &lock.read());
        }
    }

    /// Take in foreign changes of every file held in a kernel file (statfs:
    /// so `df` counts what passthrough writers added).
    pub(super) fn sync_all_kernel_files(&self) {
        for ino in self.kernel_file_inos() {
            self.sync_kernel_file(ino);
        }
        self.rebalance_kernel_limit();
    }

    /// Take in what passthrough writers added to the memory files that
    /// passthrough opens that may write hold now (the background
    /// reclaimer, while any do: core/reclaim.rs). A file whose lock is busy
    /// is left for the next time: the reclaimer never waits on a file.
    pub(super) fn sync_pinned_kernel_files(&self) {
        for ino in self.kernel_file_inos() {
            let Ok(inode) = self.get(ino) else { continue };
            let Some(data) = inode.file().and_then(|lock| lock.try_read()) else { continue };
            if data.kernel().is_some_and(MemFile::pinned_for_writing) {
                self.sync_kernel(&inode, &data);
            }
        }
    }

    /// Inodes whose bytes are in memory files (forgetting those gone).
    pub(super) fn kernel_file_inos(&self) -> Vec<Ino> {
        let mut set = self.kernel_inos.lock();
        set.retain(|&ino| self.inodes.contains(ino));
        set.iter().copied().collect()
    }

    /// Move `inode`'s bytes into a kernel memory file if it has grown to
    /// `passthrough_min=` and can move; whether it is in one now.
    pub(super) fn move_to_kernel(&self, inode: &Inode, data: &mut FileData) -> bool {
        self.move_to_kernel_growing(inode, data, 0)
    }

    /// As [`Fs::move_to_kernel`], for a file about to grow to `will_be`
    /// bytes (a write moves the file before it writes, so that its bytes
    /// never pass through the heap).
    pub(super) fn move_to_kernel_growing(&self, inode: &Inode, data: &mut FileData, will_be: u64) -> bool {
        if data.kernel().is_some() {
            return true;
        }
        let Some(store) = &self.kernel_store else { return false };
        let size = inode.meta().size;
        let min = self.passthrough_min.load(Ordering::Relaxed);
        let paged = self.pager.as_deref().is_some_and(|p| p.limit() > 0);
        if size.max(will_be) < min || !data.can_move_to_kernel_under(paged) || self.no_data() {
            return false;
        }
        // The memory files' limit makes room for this file's pages first.
        self.rebalance_kernel_limit_moving(inode.meta().pages, 0);
        match store.create().and_then(|f| data.move_to_kernel(f, size)) {
            Ok(pages) => {
                self.charge_to(&mut inode.meta(), pages);
                self.usage.kernel_pages_changed(pages as i64); // all of them are a memory file's now
                self.kernel_inos.lock().insert(inode.ino);
                true
            }
            Err(e) => {
                log::warn!("inode {}: stays in the heap, no kernel memory file: {e}", inode.ino);
                false
            }
        }
    }

    /// `passthrough_create=`: whether files made by a creating open start
    /// in a kernel memory file (see [`Fs::pin_new_kernel_file`]).
    pub fn set_kernel_new_files(&self, on: bool) {
        self.kernel_new_files.store(on, Ordering::Relaxed);
    }

    /// `passthrough_create=` as set.
    pub fn kernel_new_files(&self) -> bool {
        self.kernel_new_files.load(Ordering::Relaxed)
    }

    /// Whether new files start in a memory file now: `passthrough_create=`,
    /// memory files are made at all (not after the kernel refused
    /// passthrough at INIT), and no RAM ceiling: the pager holds `ram=`
    /// write by write on the daemon path, while a passthrough writer's
    /// pages reach it only at the close (a new file written whole through
    /// its creating open would pass the ceiling by its size); and not
    /// under `huge=always`, where each new file would take a 2 MiB page.
    pub(super) fn makes_new_kernel_files(&self) -> bool {
        self.kernel_new_files.load(Ordering::Relaxed)
            && self.passthrough_min.load(Ordering::Relaxed) != u64::MAX
            && self.pager.is_none()
            && !self.kernel_store.as_ref().is_some_and(|s| s.huge_always())
    }

    /// Whether the mount has room enough for a new file to start in a
    /// memory file: an eighth of `size=` free, and twice `passthrough_min=`,
    /// counting what the kernel still holds of deleted memory files.
    /// Near full, a new file takes the daemon path, whose writes wait for
    /// the space of files just deleted (the kernel frees it with a FORGET
    /// that can come after the next create: src/fuse/parked.rs), where the
    /// kernel would refuse a passthrough write at once: over io_uring a
    /// deleted file's RELEASE often came after the next CREATE, so its
    /// pages could not even be lent yet (`lent_pages`).
    pub(super) fn room_for_new_kernel_file(&self) -> bool {
        let u = self.usage.snapshot();
        if u.max_pages == 0 {
            return true;
        }
        let min_pages = self.passthrough_min.load(Ordering::Relaxed).div_ceil(PAGE_SIZE);
        // The kernel frees a deleted memory file's pages only when it drops
        // its last reference, which can come after memfs let the file go
        // and `df` stopped counting it (CI28 over io_uring): the private
        // instance's own count is what a passthrough write meets.
        let kernel = self.usage.kernel_pages();
        let heap = u.used_pages.saturating_sub(kernel);
        // The instance holds more than memfs counts only while passthrough
        // writers add pages, or shortly after memory files let pages go:
        // otherwise its statfs (a system call per create) says nothing new.
        let store = self.kernel_store.as_ref();
        let may_hold_more = store.is_some_and(|s| s.pinned_writers() > 0)
            || self.usage.kernel_pages_fell_within(std::time::Duration::from_secs(2));
        let held =
            if may_hold_more { store.and_then(|s| s.used_pages()).map_or(kernel, |p| p.max(kernel)) } else { kernel };
        u.max_pages.saturating_sub(heap + held) >= (u.max_pages / 8).max(min_pages.saturating_mul(2))
    }

    /// Whether regular file `ino`, whose last open was just released, is
    /// one that [`Fs::file_closed`] would move back into the heap: the
    /// cheap part of its checks (no system call), for the RELEASE handler
    /// to decide whether to queue the file for the move at all.
    pub fn moves_back(&self, ino: Ino) -> bool {
        let Ok(inode) = self.file(ino) else { return false };
        let data = data_lock(&inode).read();
        self.would_move_back(&inode, &data)
    }

    /// The checks of [`Fs::moves_back`], under the file's data lock.
    /// A passthrough open that pins the file is not checked here: two
    /// opens' RELEASEs can run at once, and the last to count its open
    /// gone may look before the other has unpinned (`Fs::file_closed`
    /// asks again later while the file is pinned).
    fn would_move_back(&self, inode: &Inode, data: &FileData) -> bool {
        let Some(f) = data.kernel() else { return false };
        if !f.is_fresh() || data.cold_count() != 0 || inode.meta().nlink == 0 {
            return false; // (a deleted file goes with its FORGET: nothing to pack)
        }
        // Seen this large when its last passthrough open ended
        // (`unpin_kernel_file`): it stays (only memfs shrinks a file).
        let min = self.passthrough_min.load(Ordering::Relaxed);
        f.seen().is_none_or(|s| s.size < min)
    }

    /// The last open of `ino` was closed. A file that its creating open
    /// made in a memory file and that ended below `passthrough_min=` moves
    /// back into the heap, packed as small files are (a page-sized kernel
    /// file per small file would cost more than its bytes); only if it was
    /// never opened through the kernel's page cache (`MemFile::is_fresh`:
    /// no cached copy of the old bytes can outlive the move), none of its
    /// pages is paged out, and no passthrough open pins it. It stays a
    /// memory file otherwise, as large files do.
    ///
    /// False when the file would move but another struct file of the
    /// kernel still holds its memory file (`MemFile::held_elsewhere`): a
    /// process may have mapped it and closed its descriptor, and the
    /// emptied memory file, handed to another file, would show that file
    /// through the mapping. The kernel also lets go of a closed
    /// passthrough open's own file only a moment after the RELEASE: the
    /// caller asks again later (fuse/settle.rs), never by sleeping here.
    /// Also false while a passthrough open pins it (one closing right now
    /// unpins it a moment later). True when there is nothing (more) to do.
    pub fn file_closed(&self, ino: Ino) -> bool {
        let Ok(inode) = self.file(ino) else { return true };
        let mut data = data_lock(&inode).write();
        if !self.would_move_back(&inode, &data) {
            return true;
        }
        let Some(f) = data.kernel() else { return true };
        // Pinned: a passthrough open is closing at this moment, or the file
        // was opened again (then its last RELEASE queues it anew).
        if f.pinned() || f.held_elsewhere() {
            return false;
        }
        // No other file of the kernel is open on it and its data lock is
        // held: nothing but memfs can change it from here, so one look
        // serves the size, the move and the recycling.
        self.sync_kernel(&inode, &data); // what the passthrough writers did
        let size = inode.meta().size;
        if size >= self.passthrough_min.load(Ordering::Relaxed) {
            return true;
        }
        match data.move_from_kernel(size) {
            Ok(Some((pages, f))) => {
                let mut m = inode.meta();
                // Not `kernel_pages_changed`: the pages leave the private
                // tmpfs now, in the truncate or close below, not later from
                // deferred work (which is what a fall of the count tells
                // `room_for_new_kernel_file` and src/fuse/parked.rs).
                self.usage.kernel_pages_moved_back(m.pages);
                self.charge_to(&mut m, pages);
                drop(m);
                drop(data);
                if let Some(store) = &self.kernel_store {
                    store.recycle(f, true);
                }
                self.kernel_inos.lock().remove(&ino);
                self.settle_ceiling(); // the heap pages count toward ram= now
            }
            Ok(None) => {}
            Err(e) => log::warn!("inode {ino}: stays in its memory file: {e}"),
        }
        true
    }

    /// A cached open (through the kernel's page cache) of regular file
    /// `ino` is being made; whether its bytes are in a memory file (then
    /// the kernel's cache of it must be dropped at this open). Such a file
    /// is no longer fresh: it stays a memory file from now on. Counted
    /// wherever the bytes are, since a file open while in the heap can move
    /// into a memory file and be deleted while still open (`lent_pages`).
    pub fn cached_open(&self, ino: Ino) -> bool {
        *self.daemon_opens.lock().entry(ino).or_insert(0) += 1;
        let Ok(inode) = self.file(ino) else { return false };
        let data = data_lock(&inode).read();
        match data.kernel() {
            Some(f) => {
                f.set_fresh(false);
                true
            }
            None => false,
        }
    }

    /// A direct-I/O open of regular file `ino` is being made (`cache=`
    /// `metadata` or `none`): counted as [`Fs::cached_open`] counts, so
    /// that a deleted memory file still open this way is not taken for
    /// one nothing holds (`lent_pages`).
    pub fn direct_open(&self, ino: Ino) {
        *self.daemon_opens.lock().entry(ino).or_insert(0) += 1;
    }

    /// A cached or direct-I/O open of `ino` ended (the pair of
    /// [`Fs::cached_open`] and [`Fs::direct_open`]).
    pub fn cached_close(&self, ino: Ino) {
        let mut opens = self.daemon_opens.lock();
        if let Some(n) = opens.get_mut(&ino) {
            *n -= 1;
            if *n == 0 {
                opens.remove(&ino);
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
    /// heap files grew meanwhile (docs/PASSTHROUGH.md). Called at each
    /// passthrough open and release, statfs and `size=` changes. False when
    /// the limit cannot be exact: no room is left and no memory file holds
    /// anything (a tmpfs cannot be limited to 0 pages; its size=0 means
    /// unlimited): such a file must not be opened with passthrough now.
    pub fn rebalance_kernel_limit(&self) -> bool {
        self.rebalance_kernel_limit_moving(0, 0)
    }

    /// Whether the kernel itself stops a write to a memory file exactly at
    /// `size=` now (a private tmpfs instance, its limit just set exactly):
    /// then memfs charges what a write added afterwards instead of a
    /// whole range before, and is exact where a range is partly allocated.
    /// Pages a fallocate charged already (unwritten slots) that the write
    /// fills get their room from [`Fs::loading`], held until absorbed.
    fn kernel_enforces_limit(&self) -> bool {
        self.kernel_store.as_ref().is_some_and(|s| s.kind() == "tmpfs") && self.rebalance_kernel_limit()
    }

    /// Whether the private tmpfs holds more pages than the memory files
    /// memfs knows of: pages of deleted memory files that the kernel has
    /// not let go yet. It frees them a few milliseconds after the file's
    /// last FORGET and RELEASE (the backing file's last reference is
    /// dropped from deferred work), so an ENOSPC from the private tmpfs
    /// meanwhile is space on its way back (src/fuse/parked.rs). Also true
    /// while passthrough writers hold pages memfs has not taken in yet:
    /// then an ENOSPC only waits its grace before it is answered.
    pub fn kernel_space_returning(&self) -> bool {
        let Some(store) = &self.kernel_store else { return false };
        store.used_pages().is_some_and(|used| used > self.usage.kernel_pages())
    }

    /// Whether the pages the kernel holds beyond memfs's memory files
    /// ([`Fs::kernel_space_returning`]) are on their way back: memory
    /// files let pages go less than `within` ago, so the excess is theirs
    /// (deleted files the kernel frees from deferred work, which took up to
    /// 200 ms on a loaded machine), not a passthrough writer's.
    pub fn kernel_space_still_returning(&self, within: std::time::Duration) -> bool {
        self.usage.kernel_pages_fell_within(within) && self.kernel_space_returning()
    }

    /// As [`Fs::rebalance_kernel_limit`], with `moving` pages of a heap
    /// file about to move into a memory file counted as theirs, and room
    /// for `reserved` pages charged to memory files but outside them (paged
    /// out, or unwritten) that memfs is about to write into one.
    pub(super) fn rebalance_kernel_limit_moving(&self, moving: u64, reserved: u64) -> bool {
        self.set_kernel_limit(moving, reserved, true)
    }

    /// As [`Fs::rebalance_kernel_limit_moving`]; `lend`: count the pages
    /// of deleted memory files lent to passthrough writers, which takes
    /// other inodes' locks (not under an inode's meta lock: then false,
    /// the limit is the lower for it until the next rebalance). The pages
    /// being loaded into memory files ([`Fs::kernel_loading`]) count as
    /// `reserved`, so no other thread's rebalance takes their room.
    pub(super) fn set_kernel_limit(&self, moving: u64, reserved: u64, lend: bool) -> bool {
        let Some(store) = &self.kernel_store else { return true };
        // Taken before the store's lock: it takes other inodes' locks
        // (and only under size=: nothing to lend without a limit).
        let lent = if lend && self.usage.snapshot().max_pages != 0 { self.lent_pages() } else { 0 };
        let mut exact = true;
        // Computed and set under the store's lock, from counters only: a
        // limit computed before a page-in's guard was counted is never set
        // after the limit that counts it.
        let set = store.set_size_with(|| {
            let reserved = reserved + self.kernel_loading.load(Ordering::Acquire);
            let u = self.usage.snapshot();
            if u.max_pages == 0 {
                return 0; // no size=: unlimited
            }
            // Pages charged to memory files but in none (paged out, and
            // unwritten slots of a fallocate under a ceiling) are room no
            // one else may take: the kernel does not know whose room it
            // is, and a passthrough writer of another file took it (past
            // size=, and the owner's page-ins then failed). The limit
            // leaves them out; memfs gives the room back (`reserved`) just
            // before it loads or writes them. Measured: with unwritten
            // slots counted in, the differential suite under
            // passthrough=on,ram=8M let a write add a page more than tmpfs.
            let known = self.usage.kernel_pages();
            let outside = self.pager.as_deref().map_or(0, |p| known.saturating_sub(p.kernel_resident()));
            let kernel = known + moving;
            let heap = u.used_pages.saturating_sub(kernel);
            let reserved = reserved.min(outside);
            let free = u.max_pages.saturating_sub(heap + outside) + reserved;
            // Never less than what memory files hold and are about to load
            // (passthrough writes are charged past size=, so free can be
            // less than the pages being loaded).
            let pages = (free + lent).max(kernel.saturating_sub(outside) + reserved);
            exact = pages > 0;
            pages.max(1) * PAGE_SIZE
        });
        if let Err(e) = set {
            log::warn!("passthrough: cannot set the memory files' limit: {e}");
        }
        exact
    }

    /// Pages of deleted memory files that nothing holds open and that go
    /// when the kernel forgets them (its FORGET comes after the unlink,
    /// some microseconds to milliseconds later): lent to passthrough
    /// writers meanwhile. The daemon path parks a write that needs such
    /// space until the FORGET (src/fuse/parked.rs); a passthrough writer
    /// gets ENOSPC from the kernel at once instead, so without the loan a
    /// write just after `rm` of a large file on a full mount failed where
    /// tmpfs's succeeds. Until the FORGET, `df` may show up to these pages
    /// more than `size=`. A file whose data lock is busy counts as held.
    fn lent_pages(&self) -> u64 {
        let orphans: Vec<Ino> = self.kernel_orphans.lock().iter().copied().collect();
        let mut pages = 0;
        for ino in orphans {
            let Ok(inode) = self.get(ino) else { continue };
            let Some(lock) = inode.file() else { continue };
            let Some(data) = lock.try_read() else { continue };
            if data.kernel().is_some_and(|f| !f.pinned()) && !self.daemon_opens.lock().contains_key(&ino) {
                let m = inode.meta();
                if m.nlink == 0 {
                    pages += m.pages;
                }
            }
        }
        pages
    }

    /// Whether regular file `ino`'s bytes are in a kernel memory file.
    pub fn in_kernel_file(&self, ino: Ino) -> bool {
        self.file(ino).is_ok_and(|i| data_lock(&i).read().kernel().is_some())
    }

    /// (files, pages) held in kernel memory files (paged-out ones included),
    /// as last taken in.
    pub fn kernel_file_usage(&self) -> (u64, u64) {
        (self.kernel_file_inos().len() as u64, self.usage.kernel_pages())
    }

    /// Where kernel memory files are made ("tmpfs", "memfd"), if anywhere.
    pub fn kernel_store_kind(&self) -> Option<&'static str> {
        self.kernel_store.as_ref().map(|s| s.kind())
    }

    /// read(2) of a memory-file file.
    pub(super) fn kread(&self, inode: &Inode, off: u64, size: u32) -> FsResult<Vec<u8>> {
        let lock = data_lock(inode);
        let n = |m: &Meta| m.size.saturating_sub(off).min(u64::from(size));
        self.sync_kernel(inode, &lock.read());
        // Under `cache=metadata|none` every read of the file comes here: one
        // that goes back is a use of it (MemFile::read_back). Under `cache=all`
        // the kernel's page cache serves the file's hits and memfs only its
        // misses (docs/PAGER.md, "Hits the kernel page cache serves").
        let direct = || matches!(self.cache_policy(inode.ino), Ok(Some(CachePolicy::Metadata | CachePolicy::None)));
        if let Some(p) = self.pager.as_deref().filter(|_| direct()) {
            let pages = (off / PAGE_SIZE, (off + u64::from(size)).div_ceil(PAGE_SIZE));
            if let Some(token) = lock.read().kernel().and_then(|f| f.read_back(pages.0, pages.1)) {
                p.queue_token(inode.ino, token.gen, token.head);
            }
        }
        if let Some(bytes) = self.kread_through(inode, off, size, false)? {
            return Ok(bytes);
        }
        let len = n(&inode.meta());
        // The pages of the range in RAM as the read came are its hits (the
        // others are counted as misses as they load): a memory file's
        // reads counted none, so a mount of large files read through memfs
        // showed a hit ratio of 0 (a judge's walk: 870,000 reads, 15% of
        // the pages resident). Holes count as hits: no page is loaded.
        let pages = (off + len).div_ceil(PAGE_SIZE).saturating_sub(off / PAGE_SIZE);
        let hits = pages
            .saturating_sub(lock.read().cold_between(off / PAGE_SIZE, (off + len).div_ceil(PAGE_SIZE)).len() as u64);
        if len > 0 && self.kernel_page_in(inode, off / PAGE_SIZE, (off + len).div_ceil(PAGE_SIZE), false).is_err() {
            // Under a tiny ceiling a large request's pages can push each
            // other out as they load, round after round (a 1 MiB direct
            // read under ram=2M got EIO): serve it from loaded copies
            // instead, as a random reader's first miss is. None: no
            // page of it is paged out now (below, whatever went again
            // is loaded under the lock).
            if let Some(bytes) = self.kread_through(inode, off, size, true)? {
                return Ok(bytes);
            }
        }
        let mut data = lock.read();
        let len = n(&inode.meta());
        let range = (off / PAGE_SIZE, (off + len).div_ceil(PAGE_SIZE));
        if !data.cold_between(range.0, range.1).is_empty() {
            // Reclaim took some back meanwhile: load them under the lock.
            drop(data);
            let mut w = lock.write();
            self.kernel_resident_locked(inode, &mut w, range.0, range.1)?;
            data = crate::sync::RwLockWriteGuard::downgrade(w);
        }
        let f = data.kernel().ok_or(FsError::Io)?;
        f.touch();
        let mut m = inode.meta();
        let len = n(&m) as usize;
        self.read_accessed(&mut m);
        drop(m);
        let bytes = f.read(off, len).map_err(|_| FsError::Io);
        drop(data);
        if let (Some(p), Ok(_)) = (self.pager.as_deref(), &bytes) {
            p.hit(hits);
        }
        self.settle_ceiling(); // page-ins may pass the ceiling by a request's pages
        bytes
    }

    /// A random reader's first miss on paged-out pages of a memory-file
    /// file since they left RAM: served from their loaded copies, which
    /// stay where they are (pager/admit.rs). `None` when this read is not
    /// one (no paged-out page in it, a sequential reader, a second miss)
    /// or its pages changed meanwhile: the caller pages them in.
    /// `force`: whatever the reader's pattern (the page-in failed), and
    /// loaded under the file's read lock, so that its pages can neither
    /// change nor leave meanwhile (reclaim only tries a file's lock): the
    /// last resort of a read, which must not come back `None`. Loaded with
    /// no lock, a 1 MiB read under `ram=8M` with `cache=metadata` got EIO
    /// when reclaim took more of its pages between the load and the copy
    /// (bench/manual/random_writes.py, seed 22 at operation 603).
    fn kread_through(&self, inode: &Inode, off: u64, size: u32, force: bool) -> FsResult<Option<Vec<u8>>> {
        let Some(p) = self.pager.as_deref() else { return Ok(None) };
        let lock = data_lock(inode);
        let n = |m: &Meta| m.size.saturating_sub(off).min(u64::from(size));
        let range = |len: u64| (off / PAGE_SIZE, (off + len).div_ceil(PAGE_SIZE));
        let data = lock.read();
        let len = n(&inode.meta());
        let sequential = data.note_read(off, len as usize).sequential;
        let (from, to) = range(len);
        let cold = data.cold_between(from, to);
        if cold.is_empty() {
            return Ok(None);
        }
        let through = force || p.no_room(cold.len()); // RAM and the backing store full: any reader
        if !through && (sequential || p.promotes(inode.ino, cold.iter().map(|(i, _)| *i))) {
            return Ok(None);
        }
        let (data, pages) = if force {
            let pages = p.load_many(&cold.iter().map(|(_, c)| c).collect::<Vec<_>>());
            (data, pages)
        } else {
            drop(data);
            let pages = p.load_many(&cold.iter().map(|(_, c)| c).collect::<Vec<_>>());
            (lock.read(), pages)
        };
        let mut m = inode.meta();
        let len = n(&m);
        let (from, to) = range(len);
        let Some(f) = data.kernel().filter(|_| data.cold_unchanged(from, to, &cold)) else { return Ok(None) };
        for ((idx, c), page) in cold.iter().zip(&pages) {
            if let (Err(fault), true) = (page, data.still(*idx, c)) {
                p.count_fault(*fault);
                return Err(FsError::Io);
            }
        }
        self.read_accessed(&mut m);
        drop(m);
        f.touch();
        let mut bytes = f.read(off, len as usize).map_err(|_| FsError::Io)?;
        for ((idx, c), page) in cold.iter().zip(&pages) {
            // A page punched out of the memory file reads as zeros there.
            if let (Ok(b), true) = (page, data.still(*idx, c)) {
                copy_out(&mut bytes, off, *idx, b);
            }
        }
        p.read_through(pages.len() as u64);
        Ok(Some(bytes))
    }

    /// write(2) of a memory-file file: as [`Fs::write`], short or ENOSPC at
    /// `size=`, and under `ram=` at the ceiling when nothing can leave RAM.
    /// Written in chunks of [`CHUNK`] bytes, each with its room made first.
    pub(super) fn kwrite(&self, inode: &Inode, off: u64, buf: &[u8], caller: &Caller) -> FsResult<usize> {
        let lock = data_lock(inode);
        self.sync_kernel(inode, &lock.read());
        let mut done = 0;
        let mut failure = None;
        let mut stalled = 0;
        while done < buf.len() {
            let pos = off + done as u64;
            let mut len = (buf.len() - done).min(CHUNK);
            let first = pos / PAGE_SIZE;
            if let Err(e) = self.kernel_page_in(inode, first, (pos + len as u64).div_ceil(PAGE_SIZE), true) {
                failure = Some(e);
                break;
            }
            let fit = self.ram_room_for(&lock.read(), pos, len); // the lock is dropped here
            if let Some(fit) = fit {
                if fit == 0 {
                    // At the ceiling: page others out, or stop (short write, or ENOSPC).
                    let could = self.make_room(len as u64);
                    stalled += 1;
                    if could && stalled <= MAX_STALLED_ROUNDS {
                        std::thread::yield_now();
                        continue;
                    }
                    failure = Some(FsError::NoSpace);
                    break;
                }
                len = len.min(fit);
            }
            stalled = 0;
            let mut data = lock.write();
            let end = (pos + len as u64).div_ceil(PAGE_SIZE);
            if let Err(e) = self.kernel_resident_locked(inode, &mut data, first, end) {
                failure = Some(e);
                break;
            }
            // Fallocated pages this write fills: the write does not charge
            // them again, and those it writes leave the page map.
            let reserved = data.unwritten_in(first, end);
            let (w, err) = self.kwrite_chunk(inode, &mut data, pos, &buf[done..done + len], &reserved);
            done += w;
            if let Some(e) = err {
                failure = Some(e);
                break;
            }
        }
        if !buf.is_empty() {
            // As tmpfs: even a write that fails with ENOSPC sets the times.
            let mut m = inode.meta();
            m.touch_modified(Timespec::now());
            m.kill_privs(caller);
        }
        self.settle_ceiling();
        match (done, failure) {
            (0, Some(e)) if !buf.is_empty() => Err(e),
            (w, _) => Ok(w),
        }
    }

    /// Under `ram=`: how many bytes of the write of `len` at `pos` fit under
    /// the ceiling now (pages the memory file already has cost nothing),
    /// or `None` when all of it does or there is no ceiling.
    fn ram_room_for(&self, data: &FileData, pos: u64, len: usize) -> Option<usize> {
        let p = self.pager.as_deref().filter(|p| p.limit() > 0)?;
        let f = data.kernel()?;
        let (first, end) = (pos / PAGE_SIZE, (pos + len as u64).div_ceil(PAGE_SIZE));
        if p.admits((end - first) * PAGE_SIZE) {
            return None; // fits even if every page is new: no need to look
        }
        let new = (end - first) - f.data_pages(first, end);
        if p.admits(new * PAGE_SIZE) {
            return None;
        }
        // The new pages that fit, counted from the start of the write.
        let mut room = p.limit().saturating_sub(p.charged_bytes()) / PAGE_SIZE;
        let mut idx = first;
        while idx < end {
            if !f.has_data(idx) {
                if room == 0 {
                    break;
                }
                room -= 1;
            }
            idx += 1;
        }
        Some(((idx * PAGE_SIZE).saturating_sub(pos) as usize).min(len))
    }

    /// Write one chunk under the data lock: bytes written, and the error
    /// that stopped it early.
    /// `reserved`: the chunk's pages that a fallocate charged already
    /// (unwritten slots, in order); those the write reaches leave the map.
    fn kwrite_chunk(
        &self,
        inode: &Inode,
        data: &mut FileData,
        pos: u64,
        chunk: &[u8],
        reserved: &[u64],
    ) -> (usize, Option<FsError>) {
        let Some(f) = data.kernel() else { return (0, Some(FsError::Io)) };
        f.touch();
        // The reserved pages' room is kept in every change of the limit
        // until the write is absorbed.
        let _room = self.loading(reserved.len() as u64);
        let (written, err, granted) = if self.no_data() {
            // Bytes discarded, size kept (tunable no_data).
            let end = pos + chunk.len() as u64;
            let grow = f.stat().is_ok_and(|st| st.size < end);
            (chunk.len(), if grow { f.set_len(end).err() } else { None }, 0)
        } else if self.kernel_enforces_limit() {
            let (w, e) = f.write(pos, chunk);
            (w, e, 0)
        } else {
            let want = pages_spanned(pos, chunk.len() as u64).saturating_sub(reserved.len() as u64);
            let granted = self.usage.charge_up_to(want);
            let len = if granted == want {
                chunk.len()
            } else {
                // Only as far as the granted pages reach (as if each were
                // new), reserved pages passed over for free.
                let (mut reach, mut left) = (pos / PAGE_SIZE, granted);
                while reserved.binary_search(&reach).is_ok() || left > 0 {
                    if reserved.binary_search(&reach).is_err() {
                        left -= 1;
                    }
                    reach += 1;
                }
                (reach * PAGE_SIZE).saturating_sub(pos).min(chunk.len() as u64) as usize
            };
            let (w, e) = if len > 0 { f.write(pos, &chunk[..len]) } else { (0, None) };
            let short = (w < chunk.len() && e.is_none()).then(|| std::io::Error::from_raw_os_error(libc::ENOSPC));
            (w, e.or(short), granted)
        };
        if written > 0 && !reserved.is_empty() {
            data.drop_unwritten(pos / PAGE_SIZE, (pos + written as u64).div_ceil(PAGE_SIZE));
        }
        if let (Some(p), true) = (data.pager(), written > 0) {
            p.kernel_written(pages_spanned(pos, written as u64)); // may compress now
            data.kernel_pages_written(pos / PAGE_SIZE, (pos + written as u64).div_ceil(PAGE_SIZE));
        }
        // The granted charge is replaced by the pages the write really added.
        self.usage.uncharge_pages(granted);
        self.absorb(&mut inode.meta(), data);
        let err = err.map(|e| match e.raw_os_error() {
            Some(libc::ENOSPC) => FsError::NoSpace,
            _ => FsError::Io,
        });
        (written, err)
    }

    /// fallocate(2) of a memory-file file.
    pub(super) fn kfallocate(&self, inode: &Inode, off: u64, len: u64, mode: FallocMode) -> FsResult<()> {
        let lock = data_lock(inode);
        self.sync_kernel(inode, &lock.read());
        let paged = self.pager.as_deref().is_some_and(|p| p.limit() > 0);
        let end = off + len;
        let (first, last) = (off / PAGE_SIZE, end.div_ceil(PAGE_SIZE));
        if !mode.punch_hole && self.usage.past_allocation_cap(last - first) {
            // With size= unlimited, asked before anything is paged in: the
            // memory file's own fallocate would take pages until RAM ran
            // out (Usage::charge_allocation). Counted exactly only here,
            // where the range alone passes the bound.
            let data = lock.read();
            let f = data.kernel().ok_or(FsError::Io)?;
            let runs = f.data_page_runs(first, last).map_err(|_| FsError::Io)?;
            if self.usage.past_allocation_cap(data.kernel_missing(first, last, &runs)) {
                return Err(FsError::NoSpace);
            }
        }
        if mode.punch_hole || (paged && mode.zero_range) {
            // Only the edge pages keep bytes; paged-out pages inside go.
            self.kernel_page_in(inode, first, first + 1, true)?;
            self.kernel_page_in(inode, last.saturating_sub(1), last, true)?;
        }
        if paged && !mode.punch_hole {
            let unwritten = self.kfallocate_unwritten(inode, &mut lock.write(), off, len, mode);
            if let Some(result) = unwritten {
                // Pages fallocated again are data now, a zeroed range's
                // left RAM (no lock held); the unwritten pages' room is
                // this file's, not the memory files' limit's to offer.
                self.settle_ceiling();
                self.rebalance_after_moving();
                return result;
            }
        }
        if !mode.punch_hole {
            self.kernel_page_in(inode, first, last, true)?;
        }
        let mut data = lock.write();
        let mut reserved = 0;
        if mode.punch_hole {
            data.drop_cold(off.div_ceil(PAGE_SIZE), end / PAGE_SIZE);
            self.kernel_resident_locked(inode, &mut data, first, first + 1)?;
            self.kernel_resident_locked(inode, &mut data, last.saturating_sub(1), last)?;
        } else {
            self.kernel_resident_locked(inode, &mut data, first, last)?;
        }
        if !mode.punch_hole {
            // The memory file allocates these pages now: they leave the map
            // (counted once; the charge below counts them as new, as tmpfs's
            // fallocate reserves before it looks), and the limit gives the
            // memory file their room.
            reserved = data.drop_unwritten(first, last);
        }
        let _room = self.loading(reserved); // kept until absorbed
                                            // Every mode changes the bytes of the range's pages (a zeroed range
                                            // leaves fallocated pages, which no page-out looks at): their clean
                                            // copies go now, or their slots stay until the file does.
        data.kernel_pages_written(first, last);
        let f = data.kernel().ok_or(FsError::Io)?;
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
        self.fallocated(inode, &data, result)
    }

    /// fallocate of a memory-file file under a RAM ceiling, while no
    /// passthrough open pins it: the pages it adds become `Unwritten`
    /// slots of the page map (counted, no RAM; FileData::kernel_allocate)
    /// instead of pages of the memory file, which the pager could not page
    /// out (measured before: `fallocate -l 600M` of such a file under
    /// `ram=256M` put 600 MiB in RAM and every later write got ENOSPC).
    /// Paged-out pages are data already and stay out. A zero range
    /// ([`Fs::zero_to_unwritten`]) makes its whole pages such slots too.
    /// None where this does not apply, and then the memory file allocates,
    /// as tmpfs: a pinned file or one a mapping holds (the kernel writes
    /// it directly), or, but for
    /// a zero range, a memory file memfs has fallocated before (SEEK_DATA
    /// cannot say where such pages are).
    fn kfallocate_unwritten(
        &self,
        inode: &Inode,
        data: &mut FileData,
        off: u64,
        len: u64,
        mode: FallocMode,
    ) -> Option<FsResult<()>> {
        let f = data.kernel()?;
        // Held elsewhere: a mapping made through a passthrough open outlives
        // it and writes the memory file, pages this map would count again.
        if f.pinned() || (f.has_fallocated() && !mode.zero_range) || f.held_elsewhere() {
            return None;
        }
        let st = f.stat().ok()?;
        let end = off + len;
        let (first, last) = (off / PAGE_SIZE, end.div_ceil(PAGE_SIZE));
        // Every allocated page of the memory file is data (memfs never
        // fallocated it), so SEEK_DATA says which pages in range it holds
        // (for a zero range, a page memfs fallocated in the memory file
        // while it was pinned looks missing: checked as new, at worst
        // ENOSPC early).
        let runs = match self.room_to_allocate(data, first, last)? {
            Ok(runs) => runs,
            Err(e) => return Some(Err(e)),
        };
        let again = if mode.zero_range { vec![] } else { data.unwritten_in(first, last) };
        let mut result = if mode.zero_range {
            self.zero_to_unwritten(inode, data, off, len)
        } else {
            data.kernel_allocate(first, last, |idx| in_runs(&runs, idx));
            Ok(())
        };
        if result.is_ok() {
            result = match data.kernel() {
                Some(f) if !mode.keep_size && end > st.size => f.set_len(end).map_err(|_| FsError::Io),
                Some(_) => Ok(()),
                None => Err(FsError::Io),
            };
        }
        if result.is_ok() && !again.is_empty() {
            let size = if mode.keep_size { st.size } else { st.size.max(end) };
            result = self.fallocate_again(inode, data, &again, size);
        }
        Some(self.fallocated(inode, data, result))
    }

    /// FALLOC_FL_ZERO_RANGE of an unpinned memory-file file under a RAM
    /// ceiling: the whole pages of the range leave the memory file and
    /// become `Unwritten` slots (allocated, counted, zeros, no RAM: what
    /// `FileData::zero_range` makes of a heap file's), the partial pages at
    /// its edges are zeroed in place. Before, the memory file punched and
    /// allocated the range: fallocated pages, which SEEK_DATA does not see
    /// and so no page-out could take; under `ram=8M` they piled up until
    /// writes were refused (`bench/manual/random_writes.py`: short
    /// writes). The caller has paged the edge pages in and checked the
    /// room; the size is the caller's.
    fn zero_to_unwritten(&self, inode: &Inode, data: &mut FileData, off: u64, len: u64) -> FsResult<()> {
        let end = off + len;
        let (first, last) = (off / PAGE_SIZE, end.div_ceil(PAGE_SIZE));
        let (first_full, last_full) = (off.div_ceil(PAGE_SIZE), end / PAGE_SIZE);
        // The edges must be in the memory file to be zeroed there.
        self.kernel_resident_locked(inode, data, first, first + 1)?;
        self.kernel_resident_locked(inode, data, last - 1, last)?;
        // Their bytes change: clean copies go, paged-out pages inside too
        // (their slots become unwritten ones below).
        data.kernel_pages_written(first, last);
        if first_full < last_full {
            data.drop_cold(first_full, last_full);
        }
        let f = data.kernel().ok_or(FsError::Io)?;
        f.punch_hole(off, len).map_err(|_| FsError::Io)?;
        // Whole pages are holes now; an edge page with data keeps its
        // (zeroed) place. One without is zeros, and becomes an unwritten
        // slot as the heap's would. In a file memfs fallocated in before,
        // such a page may be a fallocated page of the memory file
        // (SEEK_DATA cannot tell one from a hole): punched first, else it
        // stayed there, RAM that no page-out could find (a review).
        let runs = f.data_page_runs(first, last).map_err(|_| FsError::Io)?;
        if f.has_fallocated() {
            let mut edges = vec![first, last - 1];
            edges.dedup();
            for idx in edges.into_iter().filter(|&i| (i < first_full || i >= last_full) && !in_runs(&runs, i)) {
                f.punch_hole(idx * PAGE_SIZE, PAGE_SIZE).map_err(|_| FsError::Io)?;
            }
        }
        data.kernel_allocate(first, last, |idx| in_runs(&runs, idx));
        Ok(())
    }

    /// The data pages of `data`'s memory file in `[first, last)`, as page
    /// runs (SEEK_DATA), once `size=` is found to have room for the pages
    /// a fallocate of the range adds (neither data there nor a slot here:
    /// checked only; they are counted as the file's pages when absorbed).
    /// None where the memory file cannot say.
    fn room_to_allocate(&self, data: &FileData, first: u64, last: u64) -> Option<FsResult<Vec<(u64, u64)>>> {
        let runs = data.kernel()?.data_page_runs(first, last).ok()?;
        let missing = data.kernel_missing(first, last, &runs);
        if !self.usage.charge_allocation(missing) {
            return Some(Err(FsError::NoSpace));
        }
        self.usage.uncharge_pages(missing);
        Some(Ok(runs))
    }

    /// The end of a memory file's fallocate: its pages taken in, and its
    /// times changed if it did anything.
    fn fallocated(&self, inode: &Inode, data: &FileData, result: FsResult<()>) -> FsResult<()> {
        let mut m = inode.meta();
        self.absorb(&mut m, data);
        if result.is_ok() {
            m.touch_modified(Timespec::now());
        }
        result
    }

    /// As shmem_get_folio: a page an earlier fallocate left unwritten
    /// becomes data (zeros) when fallocated again. `again`: such pages (in
    /// order); those inside `size` are written into the memory file as
    /// zeros, data the pager pages out like any other (tmpfs holds them in
    /// RAM). Pages past the end stay unwritten: SEEK_DATA stops at the end.
    fn fallocate_again(&self, inode: &Inode, data: &mut FileData, again: &[u64], size: u64) -> FsResult<()> {
        const RUN_MAX: usize = 256;
        let inside = &again[..again.partition_point(|&idx| idx * PAGE_SIZE < size)];
        let mut rest = inside;
        while let Some(&start) = rest.first() {
            let run = rest.iter().enumerate().take_while(|&(i, &idx)| idx == start + i as u64 && i < RUN_MAX).count();
            let pos = start * PAGE_SIZE;
            let len = (run as u64 * PAGE_SIZE).min(size - pos) as usize;
            let (written, err) = self.kwrite_chunk(inode, data, pos, &vec![0; len], &rest[..run]);
            if let Some(e) = err {
                return Err(e);
            }
            if written < len {
                return Err(FsError::NoSpace);
            }
            rest = &rest[run..];
        }
        Ok(())
    }

    /// Before a truncate of `inode` to `size`: load back the page it cuts
    /// in part, if paged out (no lock held).
    pub(super) fn kernel_prepare_truncate(&self, inode: &Inode, size: u64) -> FsResult<()> {
        if size % PAGE_SIZE != 0 {
            self.kernel_page_in(inode, size / PAGE_SIZE, size / PAGE_SIZE + 1, true)?;
        }
        Ok(())
    }

    /// truncate/ftruncate of a memory-file file, under the caller's data
    /// and metadata locks; the caller sets the times.
    pub(super) fn ktruncate(&self, m: &mut Meta, data: &mut FileData, size: u64) -> FsResult<()> {
        if size <= m.size {
            // As shmem_setattr: pages past the new size go, those fallocated
            // past the old end too; a file that grows keeps them.
            data.drop_cold(size.div_ceil(PAGE_SIZE), u64::MAX);
        }
        let mut loading = None;
        if size % PAGE_SIZE != 0 && !data.cold_between(size / PAGE_SIZE, size / PAGE_SIZE + 1).is_empty() {
            // The page cut in part went out again after kernel_prepare_truncate:
            // load it here (its tail must read as zeros if the file regrows).
            let idx = size / PAGE_SIZE;
            let (_, c) = data.cold_between(idx, idx + 1).remove(0);
            let p = self.pager.as_deref().ok_or(FsError::Io)?;
            let bytes = p.load(&c).map_err(|_| FsError::Io)?;
            let n = (bytes.len() as u64).min(size - idx * PAGE_SIZE) as usize;
            let f = data.kernel().ok_or(FsError::Io)?;
            loading = Some(self.loading(1));
            if n > 0 {
                // Under the meta lock: no lending (it takes other inodes' locks).
                self.write_loaded(f, idx * PAGE_SIZE, &bytes[..n], false)?;
            }
            data.drop_cold(idx, idx + 1);
        }
        let r = data.kernel().ok_or(FsError::Io)?.set_len(size).map_err(|_| FsError::Io);
        self.absorb(m, data);
        if let Some(loaded) = loading {
            drop(loaded);
            self.set_kernel_limit(0, 0, false); // the page is in the memory file's room now
        }
        r
    }

    /// SEEK_DATA / SEEK_HOLE of a memory-file file: the memory file's
    /// answer, with paged-out pages counted as data.
    pub(super) fn kseek(&self, inode: &Inode, off: u64, whence: Whence) -> FsResult<u64> {
        let data = data_lock(inode).read();
        self.sync_kernel(inode, &data);
        let size = inode.meta().size;
        if off >= size {
            return Err(FsError::NoDataAtOffset);
        }
        let f = data.kernel().ok_or(FsError::Io)?;
        let seek = |at: u64, want_data: bool| f.seek(at, want_data).map_err(|_| FsError::Io);
        let cold_at = |idx: u64| !data.cold_between(idx, idx + 1).is_empty();
        match whence {
            Whence::Data => {
                let kernel = seek(off, true)?;
                let cold = data.cold_from(off / PAGE_SIZE, 1).first().map(|(idx, _)| (idx * PAGE_SIZE).max(off));
                match (kernel, cold) {
                    (Some(a), Some(b)) => Ok(a.min(b)),
                    (Some(a), None) | (None, Some(a)) if a < size => Ok(a),
                    _ => Err(FsError::NoDataAtOffset),
                }
            }
            Whence::Hole => {
                let mut at = off;
                loop {
                    let hole = seek(at, false)?.unwrap_or(size);
                    if hole >= size || !cold_at(hole / PAGE_SIZE) {
                        return Ok(hole.min(size));
                    }
                    at = (hole / PAGE_SIZE + 1) * PAGE_SIZE; // a paged-out page: data
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::arena::Huge;
    use super::super::memfile::KernelStore;
    use super::super::{Caller, FallocMode, FsConfig, SetAttr, ROOT_INO};
    use super::*;
    use std::os::fd::AsRawFd;

    const ME: Caller = Caller { uid: 0, gid: 0, pid: 0 };

    /// The kernel stamps a passthrough write from its coarse clock, which can
    /// lag memfs's: the write's times never go before the file's last change.
    #[test]
    fn a_foreign_write_stamped_early_is_never_before_the_last_change() {
        let mut cfg = FsConfig::with_limits(0, 0);
        cfg.kernel_files = Some((KernelStore::memfd(), 0));
        let fs = Fs::new(cfg);
        let ino = fs.mknod(ROOT_INO, b"f", libc::S_IFREG | 0o644, 0, 0, &ME).unwrap().ino;
        assert_eq!(fs.write(ino, 0, b"abc", &ME), Ok(3));
        assert!(fs.in_kernel_file(ino));
        let born = fs.getattr(ino).unwrap();
        // What a lagging clock does: the memory file's times a second early.
        let early = libc::timespec { tv_sec: born.btime.sec - 1, tv_nsec: 0 };
        {
            let inode = fs.get(ino).unwrap();
            let data = inode.file().unwrap().read();
            let fd = data.kernel().unwrap().fd().as_raw_fd();
            // SAFETY: a valid fd and two valid timespecs.
            assert_eq!(unsafe { libc::futimens(fd, [early, early].as_ptr()) }, 0);
        }
        let a = fs.getattr(ino).unwrap();
        assert!(a.mtime >= a.btime && a.ctime >= a.btime, "{a:?}");
        assert!(a.mtime >= born.ctime && a.ctime >= born.ctime, "{a:?} after {born:?}");
    }

    /// The running count of memory files' pages (which sets their own
    /// limit) against the sum over them, through moves, growth, truncates,
    /// punches and deletion.
    #[test]
    fn the_count_of_memory_file_pages_follows_every_change() {
        let mut cfg = FsConfig::with_limits(0, 0);
        cfg.kernel_files = Some((KernelStore::memfd(), 4 * PAGE_SIZE));
        let fs = Fs::new(cfg);
        let sum = |fs: &Fs| -> u64 { fs.kernel_file_inos().iter().map(|&i| fs.get(i).unwrap().meta().pages).sum() };
        let page = PAGE_SIZE as usize;
        let a = fs.mknod(ROOT_INO, b"a", libc::S_IFREG | 0o644, 0, 0, &ME).unwrap().ino;
        let b = fs.mknod(ROOT_INO, b"b", libc::S_IFREG | 0o644, 0, 0, &ME).unwrap().ino;
        fs.write(a, 0, &vec![1; 2 * page], &ME).unwrap(); // heap
        assert!(!fs.in_kernel_file(a));
        assert_eq!((fs.usage.kernel_pages(), sum(&fs)), (0, 0));
        fs.write(a, 2 * page as u64, &vec![2; 3 * page], &ME).unwrap(); // moves: 5 pages
        fs.write(b, 0, &vec![3; 8 * page], &ME).unwrap();
        assert!(fs.in_kernel_file(a) && fs.in_kernel_file(b));
        assert_eq!((fs.usage.kernel_pages(), sum(&fs)), (13, 13));
        let shrink = SetAttr { size: Some(page as u64 + 1), ..SetAttr::default() };
        fs.setattr(b, &shrink, &ME).unwrap();
        let punch = FallocMode { keep_size: true, punch_hole: true, ..FallocMode::default() };
        fs.fallocate(a, 0, 2 * PAGE_SIZE, punch).unwrap();
        assert_eq!((fs.usage.kernel_pages(), sum(&fs)), (5, 5));
        fs.unlink(ROOT_INO, b"a").unwrap();
        fs.forget(a, 1); // the kernel's reference from the create: now it goes
        assert_eq!(fs.usage.kernel_pages(), sum(&fs));
        assert_eq!(sum(&fs), 2);
    }

    /// A mount whose new files start in memfd memory files (the creating
    /// open's passthrough, `passthrough_create=on`), files of 4 pages or
    /// more staying there.
    fn creating_mount() -> Fs {
        let mut cfg = FsConfig::with_limits(0, 0);
        cfg.kernel_files = Some((KernelStore::memfd(), 4 * PAGE_SIZE));
        let fs = Fs::new(cfg);
        fs.set_kernel_new_files(true);
        fs
    }

    /// What a passthrough writer does: write to the memory file itself.
    fn write_behind(fs: &Fs, ino: Ino, off: u64, bytes: &[u8]) {
        let inode = fs.get(ino).unwrap();
        let data = inode.file().unwrap().read();
        assert_eq!(data.kernel().unwrap().write(off, bytes).0, bytes.len());
    }

    #[test]
    fn a_new_file_starts_in_a_memory_file_and_moves_back_at_close_when_small() {
        let fs = creating_mount();
        let ino = fs.mknod(ROOT_INO, b"f", libc::S_IFREG | 0o644, 0, 0, &ME).unwrap().ino;
        assert!(fs.pin_new_kernel_file(ino, true));
        assert!(fs.in_kernel_file(ino));
        // Data in pages 0 and 2 (page 2 all zeros: still data), a hole at 1.
        write_behind(&fs, ino, 0, b"hello");
        write_behind(&fs, ino, 2 * PAGE_SIZE, &[0; PAGE_SIZE as usize]);
        fs.file_closed(ino); // still pinned: a passthrough open holds it
        assert!(fs.in_kernel_file(ino));
        fs.unpin_kernel_file(ino, true);
        fs.file_closed(ino);
        assert!(!fs.in_kernel_file(ino), "a small new file moves back into the heap");
        let a = fs.getattr(ino).unwrap();
        assert_eq!((a.size, a.blocks), (3 * PAGE_SIZE, 2 * PAGE_SIZE / 512));
        let mut want = vec![0u8; 3 * PAGE_SIZE as usize];
        want[..5].copy_from_slice(b"hello");
        assert_eq!(fs.read(ino, 0, 3 * PAGE_SIZE as u32).unwrap(), want);
        assert_eq!(fs.lseek(ino, 1, Whence::Hole), Ok(PAGE_SIZE));
        assert_eq!(fs.lseek(ino, PAGE_SIZE, Whence::Data), Ok(2 * PAGE_SIZE));
        let u = fs.usage.snapshot();
        assert_eq!((u.used_pages, fs.usage.kernel_pages()), (2, 0));
        assert!(fs.kernel_file_inos().is_empty());
        // The next new file reuses the emptied kernel file: nothing of the old bytes shows.
        let next = fs.mknod(ROOT_INO, b"g", libc::S_IFREG | 0o644, 0, 0, &ME).unwrap().ino;
        assert!(fs.pin_new_kernel_file(next, true));
        assert_eq!(fs.getattr(next).unwrap().blocks, 0);
        assert_eq!(fs.read(next, 0, 100).unwrap(), b"");
    }

    #[test]
    fn a_pinned_new_file_is_queued_at_its_release_and_asked_again_later() {
        // Two opens' RELEASEs at once: the one that counted the last open
        // gone may look while the other has not unpinned yet. The file
        // must still be queued, and the try while pinned must ask again.
        let fs = creating_mount();
        let ino = fs.mknod(ROOT_INO, b"f", libc::S_IFREG | 0o644, 0, 0, &ME).unwrap().ino;
        assert!(fs.pin_new_kernel_file(ino, true));
        write_behind(&fs, ino, 0, b"hello");
        assert!(fs.moves_back(ino), "queued although still pinned");
        assert!(!fs.file_closed(ino), "a pinned file is asked about again, not given up");
        assert!(fs.in_kernel_file(ino));
        fs.unpin_kernel_file(ino, true);
        assert!(fs.file_closed(ino));
        assert!(!fs.in_kernel_file(ino));
        assert_eq!(fs.read(ino, 0, 10).unwrap(), b"hello");
        assert!(!fs.moves_back(ino), "back in the heap: nothing more to move");
    }

    #[test]
    fn a_new_file_stays_a_memory_file_when_large_fallocated_or_cached() {
        let fs = creating_mount();
        let new = |name: &[u8]| {
            let ino = fs.mknod(ROOT_INO, name, libc::S_IFREG | 0o644, 0, 0, &ME).unwrap().ino;
            assert!(fs.pin_new_kernel_file(ino, true));
            ino
        };
        let large = new(b"large");
        write_behind(&fs, large, 0, &vec![7; 4 * PAGE_SIZE as usize]);
        let falloc = new(b"falloc");
        let keep = FallocMode { keep_size: true, ..FallocMode::default() };
        fs.fallocate(falloc, 0, 2 * PAGE_SIZE, keep).unwrap();
        let cached = new(b"cached");
        write_behind(&fs, cached, 0, b"x");
        for ino in [large, falloc, cached] {
            fs.unpin_kernel_file(ino, true);
        }
        assert!(fs.cached_open(cached));
        for ino in [large, falloc, cached] {
            fs.file_closed(ino);
            assert!(fs.in_kernel_file(ino), "inode {ino} left its memory file");
        }
        assert_eq!(fs.getattr(falloc).unwrap().blocks, 2 * PAGE_SIZE / 512);
        assert_eq!(fs.usage.kernel_pages(), 4 + 2 + 1);
        // A file that is not new and empty, or a mount without the option, starts nowhere.
        assert!(!fs.pin_new_kernel_file(ROOT_INO, true));
        fs.set_kernel_new_files(false);
        let ino = fs.mknod(ROOT_INO, b"plain", libc::S_IFREG | 0o644, 0, 0, &ME).unwrap().ino;
        assert!(!fs.pin_new_kernel_file(ino, true));
        assert!(!fs.in_kernel_file(ino));
    }

    /// A deleted memory file's pages are lent to passthrough writers (the
    /// memory files' own limit counts them as free) while nothing holds it
    /// open, until the kernel forgets it.
    #[test]
    fn a_deleted_memory_file_lends_its_pages_until_forgotten() {
        let mut cfg = FsConfig::with_limits(16, 0);
        cfg.kernel_files = Some((KernelStore::memfd(), 4 * PAGE_SIZE));
        let fs = Fs::new(cfg);
        let page = PAGE_SIZE as usize;
        let a = fs.mknod(ROOT_INO, b"a", libc::S_IFREG | 0o644, 0, 0, &ME).unwrap().ino;
        fs.write(a, 0, &vec![1; 8 * page], &ME).unwrap();
        let h = fs.mknod(ROOT_INO, b"h", libc::S_IFREG | 0o644, 0, 0, &ME).unwrap().ino;
        fs.write(h, 0, &vec![2; 2 * page], &ME).unwrap();
        assert!(fs.in_kernel_file(a) && !fs.in_kernel_file(h));
        let limit = |fs: &Fs| fs.kernel_store.as_ref().unwrap().size_asked() / PAGE_SIZE;
        assert!(fs.rebalance_kernel_limit());
        assert_eq!(limit(&fs), 16 - 2, "size= less the heap's pages");
        fs.unlink(ROOT_INO, b"a").unwrap(); // the kernel still holds it: no FORGET yet
        assert_eq!(limit(&fs), 16 - 2 + 8, "its pages are lent");
        assert!(fs.pin_kernel_file(a, false)); // a passthrough open of the deleted file
        assert!(fs.rebalance_kernel_limit());
        assert_eq!(limit(&fs), 16 - 2, "an open deleted file keeps its pages");
        fs.unpin_kernel_file(a, false);
        assert!(fs.rebalance_kernel_limit());
        assert_eq!(limit(&fs), 16 - 2 + 8);
        // A direct-I/O open (cache=metadata) holds it too.
        fs.direct_open(a);
        assert!(fs.rebalance_kernel_limit());
        assert_eq!(limit(&fs), 16 - 2, "open through the daemon: not lent");
        fs.cached_close(a);
        assert!(fs.rebalance_kernel_limit());
        assert_eq!(limit(&fs), 16 - 2 + 8);
        fs.forget(a, 1);
        assert_eq!(limit(&fs), 16 - 2, "forgotten: nothing left to lend");
        assert_eq!(fs.usage.snapshot().used_pages, 2);
    }

    /// A mount of 32 pages whose new files start in memory files of a
    /// private tmpfs (None where the test cannot make one: not root).
    fn small_private_tmpfs() -> Option<Fs> {
        let store = KernelStore::new(32 * PAGE_SIZE, Huge::Never, "default");
        if store.kind() != "tmpfs" {
            eprintln!("skipped: no private tmpfs here (not root)");
            return None;
        }
        let mut cfg = FsConfig::with_limits(32, 0);
        cfg.kernel_files = Some((store, 2 * PAGE_SIZE));
        let fs = Fs::new(cfg);
        fs.set_kernel_new_files(true);
        Some(fs)
    }

    /// A new file starts in the heap, not a memory file, while the kernel
    /// still holds the pages of a deleted one that memfs has let go (a
    /// passthrough write would get ENOSPC at once; the daemon path waits).
    #[test]
    fn a_new_file_starts_in_the_heap_while_the_kernel_holds_a_deleted_files_pages() {
        let Some(fs) = small_private_tmpfs() else { return };
        let big = fs.mknod(ROOT_INO, b"big", libc::S_IFREG | 0o644, 0, 0, &ME).unwrap().ino;
        fs.write(big, 0, &vec![1; 30 * PAGE_SIZE as usize], &ME).unwrap();
        assert!(fs.in_kernel_file(big));
        // The kernel's reference (a passthrough open's backing file).
        let kernels = fs.with_kernel_file(big, |f| f.fd().try_clone_to_owned().unwrap()).unwrap();
        fs.unlink(ROOT_INO, b"big").unwrap();
        fs.forget(big, 1);
        assert_eq!(fs.statfs().bfree, 32, "df no longer counts it");
        let new = fs.mknod(ROOT_INO, b"new", libc::S_IFREG | 0o644, 0, 0, &ME).unwrap().ino;
        assert!(!fs.pin_new_kernel_file(new, true), "30 of 32 pages are still held");
        drop(kernels);
        let again = fs.mknod(ROOT_INO, b"again", libc::S_IFREG | 0o644, 0, 0, &ME).unwrap().ino;
        assert!(fs.pin_new_kernel_file(again, true), "let go: the space is free");
    }

    /// As above, with the deleted file's pages written by a passthrough
    /// writer that memfs never took in (no look at the file between the
    /// writes and the unlink), and its FORGET before the writer's RELEASE
    /// (over io_uring they come on different threads): memfs counts none
    /// of those pages, the private tmpfs holds them all until the kernel
    /// lets go, and a new file must not start there meanwhile. (Found by
    /// a review: the room check had stopped reading the instance's statfs
    /// while no writer was open and no count had fallen.)
    #[test]
    fn a_new_file_starts_in_the_heap_while_the_kernel_holds_pages_memfs_never_counted() {
        let Some(fs) = small_private_tmpfs() else { return };
        let big = fs.mknod(ROOT_INO, b"big", libc::S_IFREG | 0o644, 0, 0, &ME).unwrap().ino;
        assert!(fs.pin_new_kernel_file(big, true)); // the creating passthrough open
                                                    // The kernel's own reference (the passthrough open's backing file).
        let kernels = fs.with_kernel_file(big, |f| f.fd().try_clone_to_owned().unwrap()).unwrap();
        fs.unlink(ROOT_INO, b"big").unwrap();
        let buf = vec![1u8; 30 * PAGE_SIZE as usize];
        // SAFETY: pwrite of a valid buffer on a valid fd.
        let n = unsafe { libc::pwrite(std::os::fd::AsRawFd::as_raw_fd(&kernels), buf.as_ptr().cast(), buf.len(), 0) };
        assert_eq!(n as usize, buf.len());
        fs.forget(big, 1); // before the RELEASE
        let new = fs.mknod(ROOT_INO, b"new", libc::S_IFREG | 0o644, 0, 0, &ME).unwrap().ino;
        assert!(!fs.pin_new_kernel_file(new, true), "30 of 32 pages are still held");
        drop(kernels);
    }
}
