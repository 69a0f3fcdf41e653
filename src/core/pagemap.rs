//! A file's pages by index: the page map of `data.rs`, in three forms.
//!
//! Owns only the shape of the map, not what a page is (it is generic over
//! the value) nor any accounting. The forms, chosen by the map itself:
//! - `One`: a single page held inline, no allocation (most files of a
//!   pager mount are one page: a B-tree leaf of eleven slots cost 392 bytes
//!   for it);
//! - `Run`: the pages from `start` on in one array, a hole being an empty
//!   slot: the form of files written in order, as almost all are. A page
//!   costs its value (24 bytes for data.rs's slot) and an eighth of that in
//!   spare capacity, where a B-tree filled in order costs 67 bytes: its
//!   nodes split half full, and a key is stored beside each value. On a
//!   store many times the RAM ceiling this index is what is left in RAM of
//!   every page paged out (issue 8: 4.7 GiB under `ram=256M` had an index
//!   of 83 MB);
//! - `Tree`: a B-tree, for sparse files, where an array would hold mostly
//!   holes.
//!
//! A run becomes a tree when it would span more than three slots per page
//! (past that a tree entry, at 2.8 values' cost, is cheaper); a tree becomes
//! a run when it spans at most two slots per page, looked at each time its
//! size reaches a power of two (so the O(n) look is amortised), and a run
//! or tree down to one page holds it inline. Between the two bounds the map
//! keeps its form, so one page written or punched at the edge cannot make
//! it flap between forms.

use std::collections::{BTreeMap, VecDeque};
use std::ops::{Bound, RangeBounds};

/// Slots a run may span beyond twice (when made) or three times (when kept)
/// its pages: a small file with a hole or two stays a run.
const RUN_SLACK: u64 = 64;

/// Whether `pages` pages spanning `span` indices may be made into a run.
fn may_become_run(pages: u64, span: u64) -> bool {
    span <= 2 * pages + RUN_SLACK
}

/// Whether a run of `pages` pages spanning `span` indices may stay one.
fn may_stay_run(pages: u64, span: u64) -> bool {
    span <= 3 * pages + RUN_SLACK
}

/// Pages `start..start + slots.len()`; `None` is a hole. Never empty, and
/// its first and last slots hold pages. At least two pages (one is `One`).
#[derive(Debug)]
pub struct Run<V> {
    start: u64,
    slots: VecDeque<Option<V>>,
    pages: usize,
}

impl<V> Run<V> {
    fn end(&self) -> u64 {
        self.start + self.slots.len() as u64
    }

    /// Room for `more` slots, growing by an eighth at least: amortised
    /// O(1) growth with a little spare capacity, where doubling would leave
    /// up to half of a large file's index unused.
    fn reserve(&mut self, more: usize) {
        let len = self.slots.len();
        if self.slots.capacity() < len + more {
            self.slots.reserve_exact(more.max(len / 8).max(4));
        }
    }

    /// Drop holes at both ends (the first and last slots hold pages again).
    fn trim(&mut self) {
        while matches!(self.slots.front(), Some(None)) {
            self.slots.pop_front();
            self.start += 1;
        }
        while matches!(self.slots.back(), Some(None)) {
            self.slots.pop_back();
        }
        if self.slots.capacity() > 2 * self.slots.len() + 16 {
            self.slots.shrink_to(self.slots.len() + self.slots.len() / 8);
        }
    }

    fn into_pages(self) -> impl Iterator<Item = (u64, V)> {
        let start = self.start;
        self.slots.into_iter().zip(start..).filter_map(|(v, i)| v.map(|v| (i, v)))
    }
}

#[derive(Debug)]
pub enum PageMap<V> {
    Tree(BTreeMap<u64, V>),
    One(u64, V),
    /// Boxed: the map stays three words, as a small file pays for it.
    Run(Box<Run<V>>),
}

impl<V> Default for PageMap<V> {
    fn default() -> PageMap<V> {
        PageMap::Tree(BTreeMap::new())
    }
}

/// The indices `r` covers, as `lo..hi` (`hi` exclusive, saturating).
fn bounds<R: RangeBounds<u64>>(r: &R) -> (u64, u64) {
    let lo = match r.start_bound() {
        Bound::Included(&a) => a,
        Bound::Excluded(&a) => a.saturating_add(1),
        Bound::Unbounded => 0,
    };
    let hi = match r.end_bound() {
        Bound::Included(&b) => b.saturating_add(1),
        Bound::Excluded(&b) => b,
        Bound::Unbounded => u64::MAX,
    };
    (lo, hi)
}

impl<V> PageMap<V> {
    pub fn len(&self) -> usize {
        match self {
            PageMap::Tree(t) => t.len(),
            PageMap::One(..) => 1,
            PageMap::Run(r) => r.pages,
        }
    }

    pub fn get(&self, idx: u64) -> Option<&V> {
        match self {
            PageMap::Tree(t) => t.get(&idx),
            PageMap::One(k, p) => (*k == idx).then_some(p),
            PageMap::Run(r) => r.slots.get(usize::try_from(idx.checked_sub(r.start)?).ok()?)?.as_ref(),
        }
    }

    pub fn get_mut(&mut self, idx: u64) -> Option<&mut V> {
        match self {
            PageMap::Tree(t) => t.get_mut(&idx),
            PageMap::One(k, p) => (*k == idx).then_some(p),
            PageMap::Run(r) => r.slots.get_mut(usize::try_from(idx.checked_sub(r.start)?).ok()?)?.as_mut(),
        }
    }

    /// Put `page` at `idx`; the page that was there.
    pub fn insert(&mut self, idx: u64, page: V) -> Option<V> {
        match self {
            PageMap::Tree(t) if t.is_empty() => {
                *self = PageMap::One(idx, page);
                None
            }
            PageMap::Tree(t) => {
                let old = t.insert(idx, page);
                if old.is_none() && t.len().is_power_of_two() {
                    self.make_run_if_dense();
                }
                old
            }
            PageMap::One(k, p) if *k == idx => Some(std::mem::replace(p, page)),
            PageMap::One(..) => {
                let PageMap::One(k, p) = std::mem::take(self) else { unreachable!("matched One above") };
                *self = PageMap::Tree(BTreeMap::from([(k, p), (idx, page)]));
                self.make_run_if_dense();
                None
            }
            PageMap::Run(r) => {
                if let Some(i) = idx.checked_sub(r.start).filter(|&i| i < r.slots.len() as u64) {
                    let old = r.slots[i as usize].replace(page);
                    r.pages += usize::from(old.is_none());
                    return old;
                }
                let span = r.end().max(idx + 1) - r.start.min(idx);
                if !may_stay_run(r.pages as u64 + 1, span) {
                    self.make_tree();
                    return self.insert(idx, page);
                }
                if idx >= r.end() {
                    let gap = (idx - r.end()) as usize;
                    r.reserve(gap + 1);
                    r.slots.extend(std::iter::repeat_with(|| None).take(gap));
                    r.slots.push_back(Some(page));
                } else {
                    let gap = (r.start - idx - 1) as usize;
                    r.reserve(gap + 1);
                    for _ in 0..gap {
                        r.slots.push_front(None);
                    }
                    r.slots.push_front(Some(page));
                    r.start = idx;
                }
                r.pages += 1;
                None
            }
        }
    }

    pub fn remove(&mut self, idx: u64) -> Option<V> {
        match self {
            PageMap::One(k, _) if *k == idx => match std::mem::take(self) {
                PageMap::One(_, p) => Some(p),
                _ => unreachable!("matched One above"),
            },
            PageMap::One(..) => None,
            PageMap::Tree(t) => {
                let gone = t.remove(&idx);
                self.settle();
                gone
            }
            PageMap::Run(r) => {
                let i = usize::try_from(idx.checked_sub(r.start)?).ok()?;
                let gone = r.slots.get_mut(i)?.take()?;
                r.pages -= 1;
                r.trim();
                self.settle();
                Some(gone)
            }
        }
    }

    /// Remove every page from `from` on; the pages removed, in order.
    pub fn split_off(&mut self, from: u64) -> Vec<V> {
        let gone = match self {
            PageMap::One(k, _) if *k >= from => {
                let k = *k;
                return self.remove(k).into_iter().collect();
            }
            PageMap::One(..) => return vec![],
            PageMap::Tree(t) => t.split_off(&from).into_values().collect(),
            PageMap::Run(r) if from <= r.start => {
                let PageMap::Run(r) = std::mem::take(self) else { unreachable!("matched Run above") };
                return r.into_pages().map(|(_, v)| v).collect();
            }
            PageMap::Run(r) if from >= r.end() => return vec![],
            PageMap::Run(r) => {
                let tail = r.slots.split_off((from - r.start) as usize);
                let gone: Vec<V> = tail.into_iter().flatten().collect();
                r.pages -= gone.len();
                r.trim();
                gone
            }
        };
        self.settle();
        gone
    }

    /// After a removal: a run that became sparse is a tree, and a map of
    /// one page holds it inline (its node or array freed).
    fn settle(&mut self) {
        if matches!(self, PageMap::Run(r) if !may_stay_run(r.pages as u64, r.slots.len() as u64)) {
            self.make_tree();
        }
        if self.len() > 1 || matches!(self, PageMap::One(..)) {
            return;
        }
        let first = match std::mem::take(self) {
            PageMap::Tree(mut t) => t.pop_first(),
            PageMap::Run(r) => r.into_pages().next(),
            PageMap::One(..) => unreachable!("returned above"),
        };
        if let Some((k, p)) = first {
            *self = PageMap::One(k, p);
        }
    }

    /// A tree whose pages are dense enough as a run.
    fn make_run_if_dense(&mut self) {
        let PageMap::Tree(t) = self else { return };
        let (Some((&first, _)), Some((&last, _))) = (t.first_key_value(), t.last_key_value()) else { return };
        if t.len() < 2 || !may_become_run(t.len() as u64, last - first + 1) {
            return;
        }
        let PageMap::Tree(t) = std::mem::take(self) else { unreachable!("matched Tree above") };
        let span = (last - first + 1) as usize;
        let mut slots = VecDeque::with_capacity(span + span / 8);
        let pages = t.len();
        let mut next = first;
        for (k, v) in t {
            slots.extend(std::iter::repeat_with(|| None).take((k - next) as usize));
            slots.push_back(Some(v));
            next = k + 1;
        }
        *self = PageMap::Run(Box::new(Run { start: first, slots, pages }));
    }

    fn make_tree(&mut self) {
        if let PageMap::Run(_) = self {
            let PageMap::Run(r) = std::mem::take(self) else { unreachable!("matched Run above") };
            *self = PageMap::Tree(r.into_pages().collect());
        }
    }

    /// Pages with index in `r`, in order.
    pub fn range<R: RangeBounds<u64>>(&self, r: R) -> impl Iterator<Item = (u64, &V)> {
        let (one, tree, run) = match self {
            PageMap::One(k, p) => (r.contains(k).then_some((*k, p)), None, None),
            PageMap::Tree(t) => (None, Some(t.range(r).map(|(k, v)| (*k, v))), None),
            PageMap::Run(run) => {
                let (lo, hi) = bounds(&r);
                let (lo, hi) = (lo.max(run.start), hi.min(run.end()));
                let slots = (lo < hi).then(|| {
                    let at = (lo - run.start) as usize;
                    run.slots
                        .range(at..at + (hi - lo) as usize)
                        .zip(lo..)
                        .filter_map(|(v, i)| v.as_ref().map(|v| (i, v)))
                });
                (None, None, slots)
            }
        };
        one.into_iter().chain(tree.into_iter().flatten()).chain(run.into_iter().flatten())
    }

    pub fn values(&self) -> impl Iterator<Item = &V> {
        self.range(..).map(|(_, p)| p)
    }

    pub fn keys(&self) -> impl Iterator<Item = u64> + '_ {
        self.range(..).map(|(k, _)| k)
    }

    /// The map's form, for tests.
    #[cfg(test)]
    pub fn form(&self) -> &'static str {
        match self {
            PageMap::Tree(t) if t.is_empty() => "empty",
            PageMap::Tree(_) => "tree",
            PageMap::One(..) => "one",
            PageMap::Run(_) => "run",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rng(mut x: u64) -> impl FnMut(u64) -> u64 {
        move |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        }
    }

    /// Every operation against a B-tree, over random inserts, removes and
    /// cuts at several spreads (dense files, sparse ones, both in turn):
    /// the same pages in the same order, and the form the rules say.
    #[test]
    fn the_page_map_holds_what_a_btree_would() {
        for (seed, spread) in [(0x2545_F491_4F6C_DD1D, 6), (7, 300), (11, 5000), (13, 40)] {
            let mut next = rng(seed);
            let (mut map, mut model) = (PageMap::<u64>::default(), BTreeMap::<u64, u64>::new());
            let mut forms = std::collections::BTreeSet::new();
            for step in 0..40_000u64 {
                // Runs of appends, as files are written, between random steps.
                let idx =
                    if step % 500 < 250 { model.last_key_value().map_or(0, |(k, _)| k + 1) } else { next(spread) };
                match next(10) {
                    0..=4 => assert_eq!(map.insert(idx, step), model.insert(idx, step)),
                    5..=6 => assert_eq!(map.remove(idx), model.remove(&idx)),
                    7 if next(20) == 0 => {
                        assert_eq!(map.split_off(idx), model.split_off(&idx).into_values().collect::<Vec<_>>())
                    }
                    7 => {}
                    8 => {
                        let got: Vec<(u64, u64)> = map.range(idx..idx + 3).map(|(k, v)| (k, *v)).collect();
                        assert_eq!(got, model.range(idx..idx + 3).map(|(k, v)| (*k, *v)).collect::<Vec<_>>());
                        let got: Vec<u64> = map.range(idx..).map(|(k, _)| k).take(5).collect();
                        assert_eq!(got, model.range(idx..).map(|(k, _)| *k).take(5).collect::<Vec<_>>());
                        let got: Vec<u64> = map.range(..=idx).map(|(k, _)| k).collect();
                        assert_eq!(got, model.range(..=idx).map(|(k, _)| *k).collect::<Vec<_>>());
                    }
                    _ => {
                        if let Some(v) = map.get_mut(idx) {
                            *v += 1;
                        }
                        if let Some(v) = model.get_mut(&idx) {
                            *v += 1;
                        }
                    }
                }
                assert_eq!(map.len(), model.len());
                assert_eq!(map.get(idx), model.get(&idx));
                assert_eq!(map.form() == "one", model.len() == 1, "one page is held inline");
                if let PageMap::Run(r) = &map {
                    assert!(
                        r.pages >= 2
                            && r.slots.front().is_some_and(Option::is_some)
                            && r.slots.back().is_some_and(Option::is_some)
                    );
                    assert!(may_stay_run(r.pages as u64, r.slots.len() as u64), "a sparse run is a tree");
                    assert!(
                        r.slots.capacity() <= 2 * r.slots.len() + 16 || r.slots.len() < 64,
                        "spare capacity is trimmed"
                    );
                }
                forms.insert(map.form());
                if step % 1000 == 0 {
                    assert_eq!(map.keys().collect::<Vec<_>>(), model.keys().copied().collect::<Vec<_>>());
                }
            }
            assert_eq!(map.keys().collect::<Vec<_>>(), model.keys().copied().collect::<Vec<_>>());
            let want: &[&str] = if spread > 1000 { &["one", "run", "tree"] } else { &["one", "run"] };
            assert!(want.iter().all(|f| forms.contains(f)), "spread {spread}: {forms:?}");
        }
    }

    /// A file written in order is a run, whose array is within an eighth
    /// (and a few slots) of its pages; written backwards too. A sparse file
    /// is a tree, and becomes a run when filled in.
    #[test]
    fn files_written_in_order_are_runs_and_sparse_ones_trees() {
        let mut map = PageMap::<u64>::default();
        for i in 0..100_000 {
            map.insert(i, i);
        }
        let PageMap::Run(r) = &map else { panic!("{}", map.form()) };
        assert!(r.slots.capacity() <= 100_000 + 100_000 / 8 + 16, "{}", r.slots.capacity());
        let mut back = PageMap::<u64>::default();
        for i in (0..10_000).rev() {
            back.insert(i, i);
        }
        assert_eq!(back.form(), "run");
        assert_eq!(back.keys().collect::<Vec<_>>(), (0..10_000).collect::<Vec<_>>());

        let mut sparse = PageMap::<u64>::default();
        for i in 0..1000 {
            sparse.insert(i * 1000, i);
        }
        assert_eq!(sparse.form(), "tree");
        for i in 0..1_000_000 {
            sparse.insert(i, i);
        }
        assert_eq!(sparse.form(), "run");
        // Punched down to every fourth page: a tree again.
        for i in 0..1_000_000 {
            if i % 4 != 0 {
                sparse.remove(i);
            }
        }
        assert_eq!(sparse.form(), "tree");
        assert_eq!(sparse.len(), 250_000);
        // Truncated to one page: inline.
        sparse.split_off(1);
        assert_eq!(sparse.form(), "one");
    }
}
