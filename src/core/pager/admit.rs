//! Which page-in makes a page resident again: the second one.
//!
//! A random read that misses in the daemon (the page is compressed or on
//! the backing store) is served from the loaded copy, and the page stays
//! where it was; only a page read this way again, while its id is still
//! remembered here, is made resident. This is S3-FIFO's ghost applied to
//! page-ins, and it matters most behind the kernel's page cache: a page a
//! reader fetched through memfs is then held by the kernel, and a resident
//! copy in memfs would only be a second one, bought by compressing (and
//! perhaps writing back) another page to make room for it. Measured on
//! the pager benchmark's case 1 (a working set twice the ceiling, zipf
//! reads): most daemon reads there are first touches of the working set's
//! tail, each of which paid a page-out as well as its page-in.
//!
//! Sequential readers are not filtered (their pages are loaded ahead in
//! batches and pass through S3-FIFO's small queue as before), nor are
//! writes, `memfs prime` or passthrough opens, which page in whole.
//!
//! Owns a FIFO of page ids and a map of the same ids, at most `cap` of
//! them (as many pages as the ceiling holds): about 50 bytes an id.

use std::collections::{HashMap, VecDeque};

use super::policy::PageId;

/// Page ids read once through, oldest first.
#[derive(Debug, Default)]
pub struct SecondTouch {
    /// Ids with the number of the read-through that put them here.
    order: VecDeque<(PageId, u64)>,
    /// The ids remembered now, with the number of their entry in `order`
    /// (an id forgotten and read through again has a stale older entry).
    seen: HashMap<PageId, u64>,
    next: u64,
}

impl SecondTouch {
    /// A read missed on pages `ids`: whether to make them resident. Yes
    /// when at least half of them were read through before (all are then
    /// forgotten); otherwise all are remembered (those seen before anew),
    /// the oldest ids beyond `cap` dropped.
    ///
    /// Half, not any: a 64 KiB random read after a 4 KiB reader's run
    /// overlaps a page or more of what that reader took through in most
    /// of its reads, and admitting all sixteen pages for one of them made
    /// each such read pay sixteen page-outs (pager benchmark case 1 at 2x:
    /// 58 us a read against 26 us read through, the anchor 36).
    pub fn admit(&mut self, ids: &[PageId], cap: usize) -> bool {
        let seen = ids.iter().filter(|id| self.seen.contains_key(id)).count();
        if seen > 0 && seen * 2 >= ids.len() {
            for id in ids {
                self.seen.remove(id);
            }
            return true;
        }
        for &id in ids {
            self.seen.insert(id, self.next);
            self.order.push_back((id, self.next));
            self.next += 1;
        }
        // Entries of ids admitted since stay in `order` until they reach
        // its front: the bound counts them, so it holds either way.
        while self.order.len() > cap.max(1) {
            if let Some((old, n)) = self.order.pop_front() {
                if self.seen.get(&old) == Some(&n) {
                    self.seen.remove(&old);
                }
            }
        }
        false
    }

    /// Forget the ids of pages `gone`, and give back room no longer needed.
    pub fn compact(&mut self, gone: &std::collections::HashSet<PageId>) {
        self.order.retain(|(id, _)| !gone.contains(id));
        self.seen.retain(|id, _| !gone.contains(id));
        super::policy::shrink_if_oversized(&mut self.order);
        if self.seen.capacity() > 2 * self.seen.len() + 64 {
            self.seen.shrink_to_fit();
        }
    }

    /// The ids held (to find those of deleted files without this lock).
    pub fn ids(&self) -> Vec<PageId> {
        self.seen.keys().copied().collect()
    }

    /// Ids held (for the pager's overhead figure).
    pub fn len(&self) -> usize {
        self.order.len()
    }

    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(idx: u64) -> PageId {
        PageId { ino: 7, idx }
    }

    #[test]
    fn the_second_read_of_a_page_admits_it_and_the_first_does_not() {
        let mut s = SecondTouch::default();
        assert!(!s.admit(&[id(1), id(2)], 100));
        assert!(!s.admit(&[id(3)], 100));
        assert!(s.admit(&[id(2), id(9)], 100), "page 2 was read once before");
        // Admitted pages are forgotten: a later miss on them starts over.
        assert!(!s.admit(&[id(2)], 100));
        assert!(s.admit(&[id(1)], 100));
    }

    #[test]
    fn a_run_comes_in_when_half_of_its_pages_were_read_before() {
        let mut s = SecondTouch::default();
        let run = |from: u64| (from..from + 8).map(id).collect::<Vec<_>>();
        assert!(!s.admit(&[id(1), id(2), id(3)], 100));
        assert!(!s.admit(&run(3), 100), "one page of eight read before: read through");
        assert!(!s.admit(&run(12), 100));
        assert!(s.admit(&run(8), 100), "seven of eight read before (8..=10 and 12..=15)");
        assert!(s.admit(&run(16), 100), "four of eight (16..=19)");
        assert!(!s.admit(&run(5), 100), "three of eight (5..=7): 8.. came in and were forgotten");
        assert!(s.admit(&[id(1)], 100), "a single page: its second read brings it in");
    }

    #[test]
    fn ids_beyond_the_cap_are_forgotten_oldest_first() {
        let mut s = SecondTouch::default();
        for i in 0..10 {
            assert!(!s.admit(&[id(i)], 4));
        }
        assert!(s.len() <= 4);
        assert!(!s.admit(&[id(0)], 4), "page 0 fell out: a first touch again");
        assert!(s.admit(&[id(9)], 4), "page 9 is still remembered");
    }

    #[test]
    fn a_page_read_through_again_after_admission_is_remembered_anew() {
        let mut s = SecondTouch::default();
        assert!(!s.admit(&[id(1)], 3));
        assert!(s.admit(&[id(1)], 3));
        // Its old entry is still queued; its new one must outlive it.
        assert!(!s.admit(&[id(1)], 3));
        assert!(!s.admit(&[id(2)], 3));
        assert!(!s.admit(&[id(3)], 3)); // drops the stale entry of page 1
        assert!(s.admit(&[id(1)], 3), "the stale entry took the new one with it");
    }
}
