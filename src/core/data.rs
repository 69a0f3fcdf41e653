//! File contents: a sparse array of page-sized blocks.
//!
//! Owns the bytes of one regular file and nothing else: no locking, no
//! accounting, no timestamps. Callers pass a `charge` callback that says
//! whether one more page may be allocated (the `size=` limit lives in
//! `usage.rs`), and adjust the accounting by the counts returned here.
//!
//! Representation:
//! - a hole costs nothing: absent pages read as zeros;
//! - a page allocated by fallocate but never written is `None` ("unwritten"):
//!   it counts as allocated (st_blocks, `size=`) and SEEK_DATA sees it as a
//!   hole, as tmpfs does with its not-uptodate fallocated folios; a second
//!   fallocate over it makes it data (zeros), as shmem_get_folio does;
//! - a written page holds only as many bytes as it needs (rounded up to a
//!   power of two, at least 64, at most one page); bytes past its length
//!   read as zeros. A 1 KiB file therefore uses 1 KiB of heap, not 4;
//! - a file with only page 0 keeps it inline, without a map node.
//!
//! Each page is a separate allocation, so a later pager can move single
//! pages out of memory.

use std::collections::BTreeMap;
use std::ops::Bound;

use super::types::PAGE_SIZE;

const PAGE: usize = PAGE_SIZE as usize;

/// One page slot: `None` = allocated but unwritten (reads as zeros).
type Page = Option<Box<[u8]>>;

#[derive(Debug, Default)]
enum Pages {
    #[default]
    Empty,
    /// Only page 0 exists (the common small file).
    First(Page),
    Many(BTreeMap<u64, Page>),
}

/// The pages of one regular file.
#[derive(Debug, Default)]
pub struct FileData {
    pages: Pages,
}

/// Size of a page buffer that must hold `len` bytes.
fn buffer_len(len: usize) -> usize {
    len.next_power_of_two().clamp(64, PAGE)
}

/// Index of the page holding byte `off`.
fn page_of(off: u64) -> u64 {
    off / PAGE_SIZE
}

impl FileData {
    /// Number of allocated pages (written or unwritten).
    pub fn page_count(&self) -> u64 {
        match &self.pages {
            Pages::Empty => 0,
            Pages::First(_) => 1,
            Pages::Many(m) => m.len() as u64,
        }
    }

    fn get(&self, idx: u64) -> Option<&Page> {
        match &self.pages {
            Pages::Empty => None,
            Pages::First(p) => (idx == 0).then_some(p),
            Pages::Many(m) => m.get(&idx),
        }
    }

    fn get_mut(&mut self, idx: u64) -> Option<&mut Page> {
        match &mut self.pages {
            Pages::Empty => None,
            Pages::First(p) => (idx == 0).then_some(p),
            Pages::Many(m) => m.get_mut(&idx),
        }
    }

    /// Insert a page that is not present yet.
    fn insert(&mut self, idx: u64, page: Page) {
        match std::mem::take(&mut self.pages) {
            Pages::Empty if idx == 0 => self.pages = Pages::First(page),
            Pages::Empty => self.pages = Pages::Many(BTreeMap::from([(idx, page)])),
            Pages::First(first) => {
                self.pages = Pages::Many(BTreeMap::from([(0, first), (idx, page)]));
            }
            Pages::Many(mut m) => {
                m.insert(idx, page);
                self.pages = Pages::Many(m);
            }
        }
    }

    /// Remove every page with index >= `from`; returns how many were removed.
    fn remove_from(&mut self, from: u64) -> u64 {
        match &mut self.pages {
            Pages::Empty => 0,
            Pages::First(_) if from == 0 => {
                self.pages = Pages::Empty;
                1
            }
            Pages::First(_) => 0,
            Pages::Many(m) => {
                let tail = m.split_off(&from);
                let removed = tail.len() as u64;
                if m.is_empty() {
                    self.pages = Pages::Empty;
                }
                removed
            }
        }
    }

    /// Remove pages with index in `[from, to)`; returns how many were removed.
    fn remove_range(&mut self, from: u64, to: u64) -> u64 {
        if from >= to {
            return 0;
        }
        match &mut self.pages {
            Pages::Empty => 0,
            Pages::First(_) if from == 0 => {
                self.pages = Pages::Empty;
                1
            }
            Pages::First(_) => 0,
            Pages::Many(m) => {
                let doomed: Vec<u64> = m.range(from..to).map(|(k, _)| *k).collect();
                for k in &doomed {
                    m.remove(k);
                }
                if m.is_empty() {
                    self.pages = Pages::Empty;
                }
                doomed.len() as u64
            }
        }
    }

    /// Indices of present pages in `[from, to)`, in order (none if `from >= to`).
    fn indices_in(&self, from: u64, to: u64) -> Vec<u64> {
        if from >= to {
            return vec![];
        }
        match &self.pages {
            Pages::Empty => vec![],
            Pages::First(_) => {
                if from == 0 && to > 0 {
                    vec![0]
                } else {
                    vec![]
                }
            }
            Pages::Many(m) => m.range(from..to).map(|(k, _)| *k).collect(),
        }
    }

    /// Read `len` bytes at `off` (the caller has clamped to the file size).
    pub fn read(&self, off: u64, len: usize) -> Vec<u8> {
        let mut out = vec![0u8; len];
        if len == 0 {
            return out;
        }
        let end = off + len as u64;
        let mut visit = |idx: u64, page: &Page| {
            let Some(bytes) = page else { return };
            let page_start = idx * PAGE_SIZE;
            let from = off.max(page_start);
            let to = end.min(page_start + bytes.len() as u64);
            if from < to {
                let src = &bytes[(from - page_start) as usize..(to - page_start) as usize];
                out[(from - off) as usize..(to - off) as usize].copy_from_slice(src);
            }
        };
        match &self.pages {
            Pages::Empty => {}
            Pages::First(p) => visit(0, p),
            Pages::Many(m) => {
                for (idx, page) in m.range(page_of(off)..=page_of(end - 1)) {
                    visit(*idx, page);
                }
            }
        }
        out
    }

    /// Write `data` at `off`. Allocates pages as needed, asking `charge` for
    /// each new one; stops at the first refusal. Returns (bytes written,
    /// pages added). Bytes written is short only when `charge` refused.
    pub fn write(&mut self, off: u64, data: &[u8], charge: &mut dyn FnMut() -> bool) -> (usize, u64) {
        let mut done = 0usize;
        let mut added = 0u64;
        while done < data.len() {
            let pos = off + done as u64;
            let idx = page_of(pos);
            let in_page = (pos % PAGE_SIZE) as usize;
            let n = (PAGE - in_page).min(data.len() - done);
            let chunk = &data[done..done + n];
            match self.get_mut(idx) {
                Some(slot) => write_into(slot, in_page, chunk),
                None => {
                    if !charge() {
                        break;
                    }
                    added += 1;
                    let page = if in_page == 0 && n == PAGE {
                        Box::from(chunk)
                    } else {
                        let mut b = vec![0u8; buffer_len(in_page + n)].into_boxed_slice();
                        b[in_page..in_page + n].copy_from_slice(chunk);
                        b
                    };
                    self.insert(idx, Some(page));
                }
            }
            done += n;
        }
        (done, added)
    }

    /// Cut the file to `size` bytes: drop pages past it and zero the tail of
    /// the last one. Returns pages removed.
    pub fn truncate(&mut self, size: u64) -> u64 {
        let keep = size.div_ceil(PAGE_SIZE);
        let removed = self.remove_from(keep);
        let rem = (size % PAGE_SIZE) as usize;
        if rem != 0 {
            if let Some(Some(bytes)) = self.get_mut(keep - 1) {
                if bytes.len() > rem {
                    bytes[rem..].fill(0);
                }
            }
        }
        removed
    }

    /// Zero bytes `[off, off+len)`; pages wholly inside the range are freed
    /// (including pages preallocated past EOF). Returns pages removed.
    pub fn punch_hole(&mut self, off: u64, len: u64) -> u64 {
        let end = off.saturating_add(len);
        if off >= end {
            return 0;
        }
        let first_full = off.div_ceil(PAGE_SIZE);
        let last_full = end / PAGE_SIZE; // exclusive
        let removed = self.remove_range(first_full, last_full);
        self.zero_partial(off, end);
        removed
    }

    /// Zero the bytes of the partial pages at the edges of `[off, end)`.
    fn zero_partial(&mut self, off: u64, end: u64) {
        for idx in [page_of(off), page_of(end.saturating_sub(1))] {
            let page_start = idx * PAGE_SIZE;
            if let Some(Some(bytes)) = self.get_mut(idx) {
                let from = off.max(page_start) - page_start;
                let to = (end.min(page_start + PAGE_SIZE) - page_start).min(bytes.len() as u64);
                if from < to {
                    bytes[from as usize..to as usize].fill(0);
                }
            }
        }
    }

    /// Pages in `[off, off+len)` not yet allocated.
    pub fn missing_pages(&self, off: u64, len: u64) -> u64 {
        if len == 0 {
            return 0;
        }
        let (from, to) = (page_of(off), page_of(off + len - 1) + 1);
        (to - from) - self.indices_in(from, to).len() as u64
    }

    /// Allocate (unwritten) every missing page in `[off, off+len)`; the caller
    /// has charged `missing_pages` for them. Returns pages added.
    pub fn allocate(&mut self, off: u64, len: u64) -> u64 {
        if len == 0 {
            return 0;
        }
        let (from, to) = (page_of(off), page_of(off + len - 1) + 1);
        let present = self.indices_in(from, to);
        let mut added = 0;
        let mut present = present.into_iter().peekable();
        for idx in from..to {
            if present.peek() == Some(&idx) {
                present.next();
                // As shmem_get_folio: fallocating a page an earlier fallocate
                // left unwritten initializes it, so it becomes data (zeros).
                if let Some(slot @ None) = self.get_mut(idx) {
                    *slot = Some(Box::default());
                }
                continue;
            }
            self.insert(idx, None);
            added += 1;
        }
        added
    }

    /// Zero `[off, off+len)` and leave it allocated (FALLOC_FL_ZERO_RANGE);
    /// the caller has charged `missing_pages`. Returns pages added.
    pub fn zero_range(&mut self, off: u64, len: u64) -> u64 {
        if len == 0 {
            return 0;
        }
        let end = off + len;
        let first_full = off.div_ceil(PAGE_SIZE);
        let last_full = end / PAGE_SIZE;
        for idx in self.indices_in(first_full, last_full) {
            if let Some(slot) = self.get_mut(idx) {
                *slot = None;
            }
        }
        self.zero_partial(off, end);
        self.allocate(off, len)
    }

    /// SEEK_DATA: the first offset >= `off` inside written data, or None.
    pub fn seek_data(&self, off: u64, size: u64) -> Option<u64> {
        if off >= size {
            return None;
        }
        let idx = self.next_page(page_of(off), |p| p.is_some())?;
        let at = (idx * PAGE_SIZE).max(off);
        (at < size).then_some(at)
    }

    /// SEEK_HOLE: the first offset >= `off` in a hole (EOF counts as a hole).
    pub fn seek_hole(&self, off: u64, size: u64) -> Option<u64> {
        if off >= size {
            return None;
        }
        let mut idx = page_of(off);
        while self.get(idx).is_some_and(|p| p.is_some()) {
            idx += 1;
        }
        Some((idx * PAGE_SIZE).max(off).min(size))
    }

    /// First page index >= `from` whose slot satisfies `pred`.
    fn next_page(&self, from: u64, pred: impl Fn(&Page) -> bool) -> Option<u64> {
        match &self.pages {
            Pages::Empty => None,
            Pages::First(p) => (from == 0 && pred(p)).then_some(0),
            Pages::Many(m) => {
                m.range((Bound::Included(from), Bound::Unbounded)).find(|(_, p)| pred(p)).map(|(k, _)| *k)
            }
        }
    }
}

/// Copy `chunk` into a present page at `in_page`, growing its buffer if needed.
fn write_into(slot: &mut Page, in_page: usize, chunk: &[u8]) {
    let end = in_page + chunk.len();
    let bytes = slot.get_or_insert_with(|| vec![0u8; buffer_len(end)].into_boxed_slice());
    if bytes.len() < end {
        let mut grown = vec![0u8; buffer_len(end)].into_boxed_slice();
        grown[..bytes.len()].copy_from_slice(bytes);
        *bytes = grown;
    }
    bytes[in_page..end].copy_from_slice(chunk);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn yes() -> impl FnMut() -> bool {
        || true
    }

    #[test]
    fn small_file_uses_small_buffer_and_reads_back() {
        let mut d = FileData::default();
        let (n, added) = d.write(0, &[7u8; 1000], &mut yes());
        assert_eq!((n, added), (1000, 1));
        assert!(matches!(&d.pages, Pages::First(Some(b)) if b.len() == 1024));
        assert_eq!(d.read(0, 1000), vec![7u8; 1000]);
        assert_eq!(d.read(990, 20)[10..], [0u8; 10]);
    }

    #[test]
    fn sparse_write_far_away_costs_one_page() {
        let mut d = FileData::default();
        let (_, added) = d.write(1 << 40, b"x", &mut yes());
        assert_eq!(added, 1);
        assert_eq!(d.page_count(), 1);
        assert_eq!(d.read((1 << 40) - 2, 3), vec![0, 0, b'x']);
    }

    #[test]
    fn refused_charge_gives_short_write() {
        let mut d = FileData::default();
        let mut budget = 2;
        let mut charge = || {
            if budget == 0 {
                return false;
            }
            budget -= 1;
            true
        };
        let (n, added) = d.write(100, &[1u8; 3 * PAGE], &mut charge);
        assert_eq!(added, 2);
        assert_eq!(n, 2 * PAGE - 100);
    }

    #[test]
    fn truncate_zeroes_tail_so_regrow_reads_zero() {
        let mut d = FileData::default();
        d.write(0, &[9u8; 3 * PAGE], &mut yes());
        assert_eq!(d.truncate(PAGE as u64 + 10), 1);
        assert_eq!(d.read(PAGE as u64, 20)[..10], [9u8; 10]);
        assert_eq!(d.read(PAGE as u64 + 10, 10), vec![0u8; 10]);
    }

    #[test]
    fn punch_hole_frees_inner_pages_and_zeroes_edges() {
        let mut d = FileData::default();
        d.write(0, &[5u8; 4 * PAGE], &mut yes());
        let removed = d.punch_hole(100, 3 * PAGE as u64);
        assert_eq!(removed, 2);
        let all = d.read(0, 4 * PAGE);
        assert!(all[..100].iter().all(|&b| b == 5));
        assert!(all[100..100 + 3 * PAGE].iter().all(|&b| b == 0));
        assert!(all[100 + 3 * PAGE..].iter().all(|&b| b == 5));
    }

    #[test]
    fn seek_data_and_hole() {
        let mut d = FileData::default();
        let size = 10 * PAGE as u64;
        d.write(3 * PAGE as u64, &[1u8; PAGE], &mut yes());
        assert_eq!(d.seek_data(0, size), Some(3 * PAGE as u64));
        assert_eq!(d.seek_hole(0, size), Some(0));
        assert_eq!(d.seek_hole(3 * PAGE as u64 + 5, size), Some(4 * PAGE as u64));
        assert_eq!(d.seek_data(4 * PAGE as u64, size), None);
        assert_eq!(d.seek_hole(size, size), None);
    }

    #[test]
    fn fallocated_pages_count_but_are_holes() {
        let mut d = FileData::default();
        assert_eq!(d.missing_pages(0, 2 * PAGE as u64), 2);
        assert_eq!(d.allocate(0, 2 * PAGE as u64), 2);
        assert_eq!(d.page_count(), 2);
        assert_eq!(d.seek_data(0, 2 * PAGE as u64), None);
        assert_eq!(d.read(0, 10), vec![0u8; 10]);
        d.write(5, b"ab", &mut || panic!("no new page needed"));
        assert_eq!(d.read(4, 4), vec![0, b'a', b'b', 0]);
    }

    #[test]
    fn ranges_inside_one_page_do_not_panic() {
        let mut d = FileData::default();
        d.write(0, &[3u8; 3 * PAGE], &mut yes());
        assert_eq!(d.zero_range(1000, 500), 0);
        assert_eq!(d.punch_hole(5000, 10), 0);
        assert_eq!(d.read(995, 10), [3, 3, 3, 3, 3, 0, 0, 0, 0, 0]);
        assert_eq!(d.read(4999, 12)[..2], [3, 0]);
    }

    #[test]
    fn second_fallocate_turns_unwritten_pages_into_data() {
        let mut d = FileData::default();
        d.allocate(1000, 4096);
        assert_eq!(d.seek_data(0, 5096), None);
        assert_eq!(d.allocate(0, 10_000), 1);
        assert_eq!(d.seek_hole(1, 5096), Some(5096));
        assert_eq!(d.seek_data(0, 20_000), Some(0));
        assert_eq!(d.read(0, 8), vec![0u8; 8]);
    }

    #[test]
    fn zero_range_keeps_allocation() {
        let mut d = FileData::default();
        d.write(0, &[3u8; 2 * PAGE], &mut yes());
        let added = d.zero_range(10, PAGE as u64 * 3);
        assert_eq!(added, 2);
        assert_eq!(d.page_count(), 4);
        let all = d.read(0, 2 * PAGE);
        assert!(all[..10].iter().all(|&b| b == 3));
        assert!(all[10..].iter().all(|&b| b == 0));
    }
}
