//! Space accounting: the `size=` and `nr_inodes=` limits and what is used.
//!
//! Owns the counters and nothing else. Policy, as in mm/shmem.c: a charge
//! that would pass a limit is refused and the caller reports ENOSPC, never
//! ENOMEM, so a full file system gives an error and not an OOM kill.
//!
//! What counts:
//! - `size=` counts data pages (4 KiB each, written or preallocated, and
//!   long symlink targets), exactly as tmpfs counts its pages. Metadata
//!   (inodes, names, xattrs) does not count against `size=`.
//! - `nr_inodes=` works like tmpfs's "ispace": every inode costs
//!   [`INODE_COST`] units and every xattr costs 40 + name + value bytes, out
//!   of `nr_inodes * INODE_COST`. Free inodes shown by statfs are the free
//!   units divided by [`INODE_COST`]. With `nr_inodes=0` nothing is limited.
//!
//! Charges use compare-and-swap so concurrent writers can never overshoot.
//!
//! Also kept here, for statistics: pages and inodes per owner uid (moved on
//! chown), and an estimate of metadata bytes (inodes, names, xattrs). The
//! per-uid map's locks are leaves: taken under an inode's `meta`, never
//! holding anything else.
//!
//! And a hint for whoever gives freed heap back to the kernel (src/trim.rs):
//! bytes of pages and metadata freed and not used again since it last
//! looked (frees add, new pages and metadata take away, never below zero),
//! and a hook called each time that passes [`RELEASE_STEP`]. So a workload
//! that deletes and creates in turn, reusing what it freed, never calls it;
//! a large delete does. The hook must be cheap and must not block: it runs
//! on the path that frees.

use dashmap::DashMap;

use super::types::PAGE_SIZE;

use crate::sync::{AtomicU64, OnceLock, Ordering};

/// Freed and not reused bytes (pages and metadata) that call the release
/// hook. 8 MiB: deleting 100,000 empty files frees about 27 MiB, which a
/// step of 32 MiB left in the daemon for good (the trim itself waits for an
/// idle second, so a smaller step costs a busy mount nothing).
pub const RELEASE_STEP: u64 = 8 << 20;

/// Called when [`RELEASE_STEP`] bytes were freed since the last `take_released`.
pub struct ReleaseHook(pub Box<dyn Fn() + Send + Sync>);

impl std::fmt::Debug for ReleaseHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ReleaseHook")
    }
}

/// Units of inode space one inode costs (tmpfs's BOGO_INODE_SIZE).
pub const INODE_COST: u64 = 1024;

/// Units of inode space an xattr costs (tmpfs's simple_xattr_space).
/// Metadata bytes a new inode is assumed to need when checking the
/// metadata ceiling (inode, table slot, directory entry and name).
pub const META_PER_INODE: u64 = 512;

pub fn xattr_cost(name_len: usize, value_len: usize) -> u64 {
    40 + name_len as u64 + value_len as u64
}

/// Limits and usage of one mount.
#[derive(Debug)]
pub struct Usage {
    /// Page limit; 0 = unlimited.
    max_pages: AtomicU64,
    used_pages: AtomicU64,
    /// Of `used_pages`, those of files whose bytes are in kernel memory
    /// files (their paged-out pages included): kept as they change, so
    /// that the memory files' own limit is set without a pass over them.
    kernel_pages: AtomicU64,
    /// When `kernel_pages` last fell, in ms since `epoch` plus one (0:
    /// never): pages of a deleted or shrunk memory file are then on their
    /// way out of the kernel (src/fuse/parked.rs waits for them).
    kernel_fell_ms: AtomicU64,
    epoch: std::time::Instant,
    /// Inode limit; 0 = unlimited.
    max_inodes: AtomicU64,
    /// Ceiling on `meta_bytes` (`meta=`/`metapct=`); 0 = none.
    max_meta: AtomicU64,
    /// Inode space used (inodes * INODE_COST + xattr costs).
    used_ispace: AtomicU64,
    /// Live inodes (for statistics; the limit is on ispace).
    inodes: AtomicU64,
    /// Live inodes without a name (link count 0: unlinked but still
    /// referenced by the kernel, or O_TMPFILE), until freed.
    orphans: AtomicU64,
    /// Estimated heap bytes of metadata.
    meta_bytes: AtomicU64,
    /// Pages and inodes per owner.
    by_uid: DashMap<u32, UidCounters>,
    /// Bytes freed and not reused since the release hook's owner last took them.
    released: AtomicU64,
    on_release: OnceLock<ReleaseHook>,
}

#[derive(Debug, Default)]
struct UidCounters {
    pages: AtomicU64,
    inodes: AtomicU64,
}

/// What one user owns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UidUsage {
    pub uid: u32,
    pub pages: u64,
    pub inodes: u64,
}

/// A snapshot of [`Usage`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UsageSnapshot {
    pub max_pages: u64,
    pub used_pages: u64,
    pub max_inodes: u64,
    pub used_ispace: u64,
    pub inodes: u64,
    /// Estimated heap bytes of metadata (inodes, names, xattrs, symlink targets).
    pub meta_bytes: u64,
}

fn add_signed(counter: &AtomicU64, n: i64) {
    if n >= 0 {
        counter.fetch_add(n as u64, Ordering::AcqRel);
    } else {
        counter.fetch_sub(n.unsigned_abs(), Ordering::AcqRel);
    }
}

// A limit change racing a charge. The charge adds to `used` and then reads
// the limit again; the change stores the limit and then reads `used` again
// (all SeqCst, so of the two second reads at least one sees the other's
// write). A charge that finds itself above the limit it reads after adding
// takes itself back; a change that finds `used` above its new limit puts the
// old limit back and is refused. So `used` never stays above a limit.

/// Set `limit` (0 = none; in units of `scale` of `used`) unless `used` is above it.
fn set_limit(limit: &AtomicU64, max: u64, used: &AtomicU64, scale: u64) -> bool {
    let fits = || max == 0 || used.load(Ordering::SeqCst) <= max.saturating_mul(scale);
    if !fits() {
        return false;
    }
    let old = limit.swap(max, Ordering::SeqCst);
    if fits() {
        return true;
    }
    let _ = limit.compare_exchange(max, old, Ordering::SeqCst, Ordering::SeqCst);
    false
}

/// The machine's RAM in pages, as sysconf says (the host's, in a
/// container); no bound where sysconf cannot say.
fn phys_pages() -> u64 {
    static PAGES: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *PAGES.get_or_init(|| {
        // SAFETY: sysconf has no memory-safety preconditions.
        let (pages, page) = unsafe { (libc::sysconf(libc::_SC_PHYS_PAGES), libc::sysconf(libc::_SC_PAGESIZE)) };
        if pages <= 0 || page <= 0 {
            return u64::MAX;
        }
        ((pages as u64).saturating_mul(page as u64) / PAGE_SIZE).max(1)
    })
}

/// Add `n` to `used` unless that passes `limit` (0 = none; units of `scale`).
fn try_add(used: &AtomicU64, n: u64, limit: &AtomicU64, scale: u64) -> bool {
    let cap = || match limit.load(Ordering::SeqCst) {
        0 => u64::MAX,
        l => l.saturating_mul(scale),
    };
    let added =
        used.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |u| u.checked_add(n).filter(|&new| new <= cap())).is_ok();
    if added && used.load(Ordering::SeqCst) > cap() {
        // A smaller limit came in meanwhile (see set_limit): take it back.
        used.fetch_sub(n, Ordering::SeqCst);
        return false;
    }
    added
}

impl Usage {
    pub fn new(max_pages: u64, max_inodes: u64) -> Usage {
        Usage {
            max_pages: AtomicU64::new(max_pages),
            used_pages: AtomicU64::new(0),
            kernel_pages: AtomicU64::new(0),
            kernel_fell_ms: AtomicU64::new(0),
            epoch: std::time::Instant::now(),
            max_inodes: AtomicU64::new(max_inodes),
            max_meta: AtomicU64::new(0),
            used_ispace: AtomicU64::new(0),
            inodes: AtomicU64::new(0),
            orphans: AtomicU64::new(0),
            meta_bytes: AtomicU64::new(0),
            released: AtomicU64::new(0),
            on_release: OnceLock::new(),
            by_uid: DashMap::new(),
        }
    }

    /// Add signed amounts to what `uid` owns.
    pub fn account_uid(&self, uid: u32, pages: i64, inodes: i64) {
        if pages == 0 && inodes == 0 {
            return;
        }
        let c = self.by_uid.entry(uid).or_default();
        add_signed(&c.pages, pages);
        add_signed(&c.inodes, inodes);
    }

    /// Move `pages` and one inode from one owner to another (chown).
    pub fn move_uid(&self, from: u32, to: u32, pages: u64) {
        if from != to {
            self.account_uid(from, -(pages as i64), -1);
            self.account_uid(to, pages as i64, 1);
        }
    }

    pub fn by_uid(&self) -> Vec<UidUsage> {
        let mut v: Vec<UidUsage> = self
            .by_uid
            .iter()
            .map(|r| UidUsage {
                uid: *r.key(),
                pages: r.pages.load(Ordering::Acquire),
                inodes: r.inodes.load(Ordering::Acquire),
            })
            .filter(|u| u.pages > 0 || u.inodes > 0)
            .collect();
        v.sort_by_key(|u| u.uid);
        v
    }

    /// The metadata byte estimate now.
    pub fn meta_bytes(&self) -> u64 {
        self.meta_bytes.load(Ordering::Acquire)
    }

    /// Add a signed amount to the metadata byte estimate.
    pub fn account_meta(&self, bytes: i64) {
        add_signed(&self.meta_bytes, bytes);
        if bytes < 0 {
            self.note_released(bytes.unsigned_abs());
        } else {
            self.note_reused(bytes.unsigned_abs());
        }
    }

    /// Install the release hook (once; later calls are ignored).
    pub fn on_release(&self, hook: ReleaseHook) {
        let _ = self.on_release.set(hook);
    }

    /// Bytes freed and not reused since the last `take_released`.
    pub fn released(&self) -> u64 {
        self.released.load(Ordering::Acquire)
    }

    /// Bytes freed and not reused since the last call; starts the count again.
    pub fn take_released(&self) -> u64 {
        self.released.swap(0, Ordering::AcqRel)
    }

    fn note_reused(&self, bytes: u64) {
        if self.released.load(Ordering::Relaxed) > 0 {
            let _ = self.released.fetch_update(Ordering::AcqRel, Ordering::Relaxed, |v| Some(v.saturating_sub(bytes)));
        }
    }

    fn note_released(&self, bytes: u64) {
        let before = self.released.fetch_add(bytes, Ordering::AcqRel);
        if before < RELEASE_STEP && before + bytes >= RELEASE_STEP {
            if let Some(hook) = self.on_release.get() {
                (hook.0)();
            }
        }
    }

    pub fn charge_pages(&self, n: u64) -> bool {
        if n == 0 {
            return true;
        }
        let ok = try_add(&self.used_pages, n, &self.max_pages, 1);
        if ok {
            self.note_reused(n.saturating_mul(PAGE_SIZE));
        }
        ok
    }

    /// Charge `n` pages a fallocate adds. As [`Usage::charge_pages`], and
    /// with `size=` unlimited (0) at most as many pages as the machine has
    /// RAM at once: each costs a slot of the page map even where it holds
    /// no RAM, and `fallocate -l 1E` of such a mount walked 2^48 pages
    /// under the file's lock (a review), where it now gets ENOSPC. tmpfs
    /// without a limit tries, until memory runs out.
    pub fn charge_allocation(&self, n: u64) -> bool {
        !self.past_allocation_cap(n) && self.charge_pages(n)
    }

    /// Whether a fallocate adding `n` pages passes the bound
    /// [`Usage::charge_allocation`] keeps with `size=` unlimited (a memory
    /// file allocating in the kernel asks before the kernel does it).
    pub fn past_allocation_cap(&self, n: u64) -> bool {
        self.max_pages.load(Ordering::SeqCst) == 0 && n > phys_pages()
    }

    /// Charge as many of `n` pages as fit under `size=`; how many were charged.
    pub fn charge_up_to(&self, n: u64) -> u64 {
        if self.charge_pages(n) {
            return n;
        }
        let (max, used) = (self.max_pages.load(Ordering::SeqCst), self.used_pages.load(Ordering::SeqCst));
        let room = max.saturating_sub(used).min(n);
        if room > 0 && self.charge_pages(room) {
            room
        } else {
            0
        }
    }

    /// Charge pages that already exist (written by the kernel itself, through
    /// passthrough), whatever the limit says: they are there.
    pub fn charge_existing(&self, n: u64) {
        if n > 0 {
            self.used_pages.fetch_add(n, Ordering::AcqRel);
            self.note_reused(n.saturating_mul(PAGE_SIZE));
        }
    }

    /// Pages of files in kernel memory files changed by `delta`.
    pub fn kernel_pages_changed(&self, delta: i64) {
        if delta >= 0 {
            self.kernel_pages.fetch_add(delta as u64, Ordering::AcqRel);
        } else {
            self.kernel_pages.fetch_sub(delta.unsigned_abs(), Ordering::AcqRel);
            let now = self.epoch.elapsed().as_millis() as u64 + 1;
            self.kernel_fell_ms.store(now, Ordering::Release);
        }
    }

    /// A memory file counted with `pages` is let go (its file deleted):
    /// the kernel frees what it holds of it, counted or not, when it drops
    /// its last reference, so this is a fall whatever `pages` is
    /// ([`Usage::kernel_pages_fell_within`]).
    pub fn kernel_file_dropped(&self, pages: u64) {
        self.kernel_pages.fetch_sub(pages, Ordering::AcqRel);
        let now = self.epoch.elapsed().as_millis() as u64 + 1;
        self.kernel_fell_ms.store(now, Ordering::Release);
    }

    /// `pages` of a memory file moved back into the heap: memfs frees them
    /// from the kernel itself, at once, so this fall of `kernel_pages` is
    /// not one that the kernel completes later
    /// ([`Usage::kernel_pages_fell_within`]).
    pub fn kernel_pages_moved_back(&self, pages: u64) {
        self.kernel_pages.fetch_sub(pages, Ordering::AcqRel);
    }

    /// Whether `kernel_pages` fell less than `within` ago.
    pub fn kernel_pages_fell_within(&self, within: std::time::Duration) -> bool {
        let fell = self.kernel_fell_ms.load(Ordering::Acquire);
        fell > 0 && self.epoch.elapsed().as_millis() as u64 + 1 < fell.saturating_add(within.as_millis() as u64)
    }

    /// Pages of files in kernel memory files, paged-out ones included.
    pub fn kernel_pages(&self) -> u64 {
        self.kernel_pages.load(Ordering::Acquire)
    }

    pub fn uncharge_pages(&self, n: u64) {
        if n > 0 {
            self.used_pages.fetch_sub(n, Ordering::AcqRel);
            self.note_released(n.saturating_mul(PAGE_SIZE));
        }
    }

    /// Charge one inode's worth of inode space (a new inode, or an extra hard link).
    pub fn charge_inode(&self) -> bool {
        self.meta_room(META_PER_INODE) && try_add(&self.used_ispace, INODE_COST, &self.max_inodes, INODE_COST)
    }

    /// Set the metadata ceiling in bytes (`meta=`/`metapct=`; 0 = none).
    pub fn set_max_meta(&self, bytes: u64) {
        self.max_meta.store(bytes, Ordering::Relaxed);
    }

    /// Change the metadata ceiling live; refused (returns false) below the
    /// metadata in use.
    pub fn change_max_meta(&self, bytes: u64) -> bool {
        set_limit(&self.max_meta, bytes, &self.meta_bytes, 1)
    }

    pub fn max_meta(&self) -> u64 {
        self.max_meta.load(Ordering::Relaxed)
    }

    /// Whether `bytes` more metadata fit under the ceiling (never paged,
    /// so a new inode, name or xattr past it is ENOSPC, as in MemFS).
    fn meta_room(&self, bytes: u64) -> bool {
        let max = self.max_meta();
        max == 0 || self.meta_bytes.load(Ordering::Acquire) + bytes <= max
    }

    pub fn uncharge_inode(&self) {
        self.used_ispace.fetch_sub(INODE_COST, Ordering::AcqRel);
    }

    /// Count a live inode (statistics only; the limit is on inode space).
    pub fn inode_created(&self) {
        self.inodes.fetch_add(1, Ordering::AcqRel);
    }

    pub fn inode_freed(&self) {
        self.inodes.fetch_sub(1, Ordering::AcqRel);
    }

    /// An inode lost its last name (or was made without one).
    pub fn orphaned(&self) {
        self.orphans.fetch_add(1, Ordering::AcqRel);
    }

    /// A nameless inode got a name, or was freed: counted off only when
    /// freed (its Drop), after its space was given back, never when the
    /// table lets go of it: another thread may hold it a moment longer,
    /// and a statfs that waits for the count to drop must then see the
    /// space free (CI: `close; statfs` over io_uring saw it still used).
    /// Saturating: a count never wraps to look like billions of orphans.
    pub fn unorphaned(&self) {
        let _ = self.orphans.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1));
    }

    /// Nameless inodes still alive.
    pub fn orphans(&self) -> u64 {
        self.orphans.load(Ordering::Acquire)
    }

    pub fn charge_ispace(&self, units: u64) -> bool {
        units == 0 || self.meta_room(units) && try_add(&self.used_ispace, units, &self.max_inodes, INODE_COST)
    }

    pub fn uncharge_ispace(&self, units: u64) {
        if units > 0 {
            self.used_ispace.fetch_sub(units, Ordering::AcqRel);
        }
    }

    /// Change the page limit; refused (returns false) below what is in use.
    pub fn set_max_pages(&self, max: u64) -> bool {
        set_limit(&self.max_pages, max, &self.used_pages, 1)
    }

    /// Change the inode limit; refused (returns false) below what is in use.
    pub fn set_max_inodes(&self, max: u64) -> bool {
        set_limit(&self.max_inodes, max, &self.used_ispace, INODE_COST)
    }

    pub fn snapshot(&self) -> UsageSnapshot {
        UsageSnapshot {
            max_pages: self.max_pages.load(Ordering::Acquire),
            used_pages: self.used_pages.load(Ordering::Acquire),
            max_inodes: self.max_inodes.load(Ordering::Acquire),
            used_ispace: self.used_ispace.load(Ordering::Acquire),
            inodes: self.inodes.load(Ordering::Acquire),
            meta_bytes: self.meta_bytes.load(Ordering::Acquire),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sync::Arc;

    #[test]
    fn a_limit_shrunk_during_charges_is_never_left_exceeded() {
        for _ in 0..20 {
            let u = Arc::new(Usage::new(1 << 20, 0));
            let charged = Arc::new(AtomicU64::new(0));
            let chargers: Vec<_> = (0..3)
                .map(|_| {
                    let (u, charged) = (u.clone(), charged.clone());
                    std::thread::spawn(move || {
                        for _ in 0..20_000 {
                            if u.charge_pages(1) {
                                charged.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                    })
                })
                .collect();
            // Shrink to just above what is in use, again and again.
            let mut shrunk = 0;
            for _ in 0..2_000 {
                shrunk += u64::from(u.set_max_pages(u.snapshot().used_pages + 8));
            }
            assert!(shrunk > 0, "no shrink ever succeeded: the race was not exercised");
            for c in chargers {
                c.join().unwrap();
            }
            let s = u.snapshot();
            assert_eq!(s.used_pages, charged.load(Ordering::Relaxed));
            assert!(s.max_pages != 0 && s.used_pages <= s.max_pages, "{s:?}");
        }
    }

    #[test]
    fn release_hook_fires_once_per_step_of_freed_and_unused_bytes() {
        let u = Usage::new(0, 0);
        let calls = Arc::new(AtomicU64::new(0));
        let seen = calls.clone();
        u.on_release(ReleaseHook(Box::new(move || {
            seen.fetch_add(1, Ordering::Relaxed);
        })));
        let step_pages = RELEASE_STEP / PAGE_SIZE;
        assert!(u.charge_pages(4 * step_pages));
        u.uncharge_pages(step_pages - 1);
        assert_eq!(calls.load(Ordering::Relaxed), 0);
        u.account_meta(-(PAGE_SIZE as i64)); // metadata counts too
        assert_eq!(calls.load(Ordering::Relaxed), 1);
        u.uncharge_pages(step_pages); // not taken yet: no second call
        assert_eq!(calls.load(Ordering::Relaxed), 1);
        assert_eq!(u.take_released(), 2 * RELEASE_STEP);
        u.uncharge_pages(step_pages);
        assert_eq!(calls.load(Ordering::Relaxed), 2);
        u.account_meta(100); // reuse takes away
        assert_eq!(u.take_released(), RELEASE_STEP - 100);
        // Deleting and creating in turn reuses what was freed: no call.
        for _ in 0..3 * step_pages {
            u.uncharge_pages(1);
            assert!(u.charge_pages(1));
        }
        assert_eq!(calls.load(Ordering::Relaxed), 2);
        assert_eq!(u.take_released(), 0);
        assert!(u.charge_pages(step_pages)); // growth never goes below zero
        u.uncharge_pages(step_pages);
        assert_eq!(calls.load(Ordering::Relaxed), 3);
    }

    #[test]
    fn page_limit_is_exact() {
        let u = Usage::new(3, 0);
        assert!(u.charge_pages(2));
        assert!(!u.charge_pages(2));
        assert!(u.charge_pages(1));
        assert!(!u.charge_pages(1));
        u.uncharge_pages(3);
        assert!(u.charge_pages(3));
    }

    #[test]
    fn inode_limit_counts_xattrs_like_tmpfs() {
        let u = Usage::new(0, 0);
        u.set_max_meta(1000);
        u.account_meta(600);
        assert!(!u.charge_inode(), "600 + 512 is past the 1000-byte metadata ceiling");
        assert!(u.charge_ispace(400));
        u.account_meta(400); // as storing the xattr does
        assert!(!u.charge_ispace(1));
        u.set_max_meta(0);
        assert!(u.charge_inode());
        let u = Usage::new(0, 2);
        assert!(u.charge_inode());
        assert!(u.charge_ispace(xattr_cost(6, 100)));
        // 1024 + 146 used of 2048: a second inode no longer fits.
        assert!(!u.charge_inode());
        u.uncharge_ispace(xattr_cost(6, 100));
        assert!(u.charge_inode());
    }

    #[test]
    fn per_uid_moves_on_chown() {
        let u = Usage::new(0, 0);
        u.account_uid(5, 3, 1);
        u.account_uid(6, 0, 1);
        u.move_uid(5, 6, 3);
        assert_eq!(u.by_uid(), vec![UidUsage { uid: 6, pages: 3, inodes: 2 }]);
    }

    #[test]
    fn shrink_below_use_is_refused() {
        let u = Usage::new(10, 0);
        assert!(u.charge_pages(5));
        assert!(!u.set_max_pages(4));
        assert!(u.set_max_pages(5));
        assert!(!u.charge_pages(1));
    }
}
