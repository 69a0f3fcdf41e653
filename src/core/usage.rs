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

use crate::sync::{AtomicU64, Ordering};

/// Units of inode space one inode costs (tmpfs's BOGO_INODE_SIZE).
pub const INODE_COST: u64 = 1024;

/// Units of inode space an xattr costs (tmpfs's simple_xattr_space).
pub fn xattr_cost(name_len: usize, value_len: usize) -> u64 {
    40 + name_len as u64 + value_len as u64
}

/// Limits and usage of one mount.
#[derive(Debug)]
pub struct Usage {
    /// Page limit; 0 = unlimited.
    max_pages: AtomicU64,
    used_pages: AtomicU64,
    /// Inode limit; 0 = unlimited.
    max_inodes: AtomicU64,
    /// Inode space used (inodes * INODE_COST + xattr costs).
    used_ispace: AtomicU64,
    /// Live inodes (for statistics; the limit is on ispace).
    inodes: AtomicU64,
}

/// A snapshot of [`Usage`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UsageSnapshot {
    pub max_pages: u64,
    pub used_pages: u64,
    pub max_inodes: u64,
    pub used_ispace: u64,
    pub inodes: u64,
}

/// Add `n` to `counter` unless that passes `limit` (0 = no limit).
fn try_add(counter: &AtomicU64, n: u64, limit: u64) -> bool {
    counter
        .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
            let new = used.checked_add(n)?;
            (limit == 0 || new <= limit).then_some(new)
        })
        .is_ok()
}

impl Usage {
    pub fn new(max_pages: u64, max_inodes: u64) -> Usage {
        Usage {
            max_pages: AtomicU64::new(max_pages),
            used_pages: AtomicU64::new(0),
            max_inodes: AtomicU64::new(max_inodes),
            used_ispace: AtomicU64::new(0),
            inodes: AtomicU64::new(0),
        }
    }

    pub fn charge_pages(&self, n: u64) -> bool {
        n == 0 || try_add(&self.used_pages, n, self.max_pages.load(Ordering::Acquire))
    }

    pub fn uncharge_pages(&self, n: u64) {
        if n > 0 {
            self.used_pages.fetch_sub(n, Ordering::AcqRel);
        }
    }

    fn ispace_limit(&self) -> u64 {
        self.max_inodes.load(Ordering::Acquire).saturating_mul(INODE_COST)
    }

    /// Charge one inode's worth of inode space (a new inode, or an extra hard link).
    pub fn charge_inode(&self) -> bool {
        try_add(&self.used_ispace, INODE_COST, self.ispace_limit())
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

    pub fn charge_ispace(&self, units: u64) -> bool {
        units == 0 || try_add(&self.used_ispace, units, self.ispace_limit())
    }

    pub fn uncharge_ispace(&self, units: u64) {
        if units > 0 {
            self.used_ispace.fetch_sub(units, Ordering::AcqRel);
        }
    }

    /// Change the page limit; refused (returns false) below what is in use.
    pub fn set_max_pages(&self, max: u64) -> bool {
        let used = self.used_pages.load(Ordering::Acquire);
        if max != 0 && max < used {
            return false;
        }
        self.max_pages.store(max, Ordering::Release);
        true
    }

    /// Change the inode limit; refused (returns false) below what is in use.
    pub fn set_max_inodes(&self, max: u64) -> bool {
        let used = self.used_ispace.load(Ordering::Acquire);
        if max != 0 && max.saturating_mul(INODE_COST) < used {
            return false;
        }
        self.max_inodes.store(max, Ordering::Release);
        true
    }

    pub fn snapshot(&self) -> UsageSnapshot {
        UsageSnapshot {
            max_pages: self.max_pages.load(Ordering::Acquire),
            used_pages: self.used_pages.load(Ordering::Acquire),
            max_inodes: self.max_inodes.load(Ordering::Acquire),
            used_ispace: self.used_ispace.load(Ordering::Acquire),
            inodes: self.inodes.load(Ordering::Acquire),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let u = Usage::new(0, 2);
        assert!(u.charge_inode());
        assert!(u.charge_ispace(xattr_cost(6, 100)));
        // 1024 + 146 used of 2048: a second inode no longer fits.
        assert!(!u.charge_inode());
        u.uncharge_ispace(xattr_cost(6, 100));
        assert!(u.charge_inode());
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
