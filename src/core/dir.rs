//! Directory contents: name -> child, with readdir cookies that stay valid
//! while the directory changes.
//!
//! Owns one directory's entries; no locking, no timestamps, no accounting.
//! Every entry gets a cookie from a per-directory counter when it is
//! inserted (a rename inserts anew, so a moved entry gets a fresh cookie).
//!
//! Listing order is newest first, as tmpfs's stable offsets list: the
//! stream walks cookies downwards, and the position handed to the kernel
//! for an entry (its d_off, where the next read resumes) is
//! `END_POS - cookie`, which grows along the stream. Resuming at a position
//! returns only entries older than the last one returned. So every stream
//! is finite without any per-open state: an entry created or renamed after
//! the stream passed its place has a newer cookie and is never returned by
//! that stream (a bulk renamer that renames each entry it reads ends, as on
//! tmpfs); an entry present for the whole listing is seen exactly once; and
//! a saved position (telldir) stays valid across any change. Positions 1
//! and 2 are "." and ".."; entry positions are above them.
//!
//! The name index is a hash table (O(1) lookup) or a B-tree (O(log n),
//! smaller and steadier at very large sizes), chosen per mount with
//! `dirindex=`; readdir resumes in O(log n) through the ordered cookie
//! index. Both indexes share the name allocation.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use super::types::{Ino, Kind};

/// First cookie handed to a real entry.
pub const FIRST_COOKIE: u64 = 3;

/// Positions of real entries are `END_POS - cookie`: above 2 ("." and "..")
/// for any cookie a directory can reach (2^62 inserts), below `i64::MAX` so
/// the kernel's signed file position holds them.
pub const END_POS: u64 = 1 << 62;

/// Stream position (d_off) of the entry with `cookie`.
pub fn position(cookie: u64) -> u64 {
    END_POS - cookie
}

/// A directory entry as stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    pub ino: Ino,
    pub kind: Kind,
    pub cookie: u64,
}

/// Which structure indexes names (mount option `dirindex=`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DirIndex {
    #[default]
    Hash,
    BTree,
}

/// Name -> entry, by the mount's choice of structure.
#[derive(Debug)]
enum NameIndex {
    Hash(HashMap<Arc<[u8]>, Entry>),
    BTree(BTreeMap<Arc<[u8]>, Entry>),
}

impl NameIndex {
    fn len(&self) -> usize {
        match self {
            NameIndex::Hash(m) => m.len(),
            NameIndex::BTree(m) => m.len(),
        }
    }

    fn get(&self, name: &[u8]) -> Option<&Entry> {
        match self {
            NameIndex::Hash(m) => m.get(name),
            NameIndex::BTree(m) => m.get(name),
        }
    }

    fn get_mut(&mut self, name: &[u8]) -> Option<&mut Entry> {
        match self {
            NameIndex::Hash(m) => m.get_mut(name),
            NameIndex::BTree(m) => m.get_mut(name),
        }
    }

    fn insert(&mut self, name: Arc<[u8]>, e: Entry) {
        match self {
            NameIndex::Hash(m) => m.insert(name, e),
            NameIndex::BTree(m) => m.insert(name, e),
        };
    }

    fn remove(&mut self, name: &[u8]) -> Option<Entry> {
        match self {
            NameIndex::Hash(m) => m.remove(name),
            NameIndex::BTree(m) => m.remove(name),
        }
    }
}

/// The entries of one directory.
#[derive(Debug)]
pub struct Dir {
    by_name: NameIndex,
    by_cookie: BTreeMap<u64, Arc<[u8]>>,
    next_cookie: u64,
}

impl Default for Dir {
    fn default() -> Self {
        Dir::new(DirIndex::default())
    }
}

impl Dir {
    pub fn new(index: DirIndex) -> Dir {
        let by_name = match index {
            DirIndex::Hash => NameIndex::Hash(HashMap::new()),
            DirIndex::BTree => NameIndex::BTree(BTreeMap::new()),
        };
        Dir { by_name, by_cookie: BTreeMap::new(), next_cookie: FIRST_COOKIE }
    }

    pub fn len(&self) -> usize {
        self.by_name.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_name.len() == 0
    }

    pub fn get(&self, name: &[u8]) -> Option<Entry> {
        self.by_name.get(name).copied()
    }

    /// Add `name`; the caller has checked it is absent.
    pub fn insert(&mut self, name: &[u8], ino: Ino, kind: Kind) {
        let cookie = self.next_cookie;
        self.next_cookie += 1;
        let name: Arc<[u8]> = Arc::from(name);
        self.by_cookie.insert(cookie, name.clone());
        self.by_name.insert(name, Entry { ino, kind, cookie });
    }

    /// Remove `name`, returning its entry.
    pub fn remove(&mut self, name: &[u8]) -> Option<Entry> {
        let entry = self.by_name.remove(name)?;
        self.by_cookie.remove(&entry.cookie);
        Some(entry)
    }

    /// Point an existing `name` at another inode (rename over, exchange),
    /// keeping its position in the listing.
    pub fn replace(&mut self, name: &[u8], ino: Ino, kind: Kind) -> Option<Entry> {
        let entry = self.by_name.get_mut(name)?;
        let old = *entry;
        entry.ino = ino;
        entry.kind = kind;
        Some(old)
    }

    /// The entries a stream resuming at position `pos` returns next: those
    /// older than the entry whose position `pos` is, newest first (all of
    /// them for `pos` <= 2, the positions of "." and ".."). A position past
    /// every entry returns nothing.
    pub fn iter_after(&self, pos: u64) -> impl Iterator<Item = (&[u8], Entry)> + '_ {
        let below = if pos <= 2 { u64::MAX } else { END_POS.saturating_sub(pos) };
        self.by_cookie.range(..below).rev().filter_map(|(_, name)| self.by_name.get(name).map(|e| (&name[..], *e)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listing_resumes_after_removal_without_skip_or_repeat() {
        for index in [DirIndex::Hash, DirIndex::BTree] {
            listing_resumes(Dir::new(index));
        }
    }

    fn listing_resumes(mut d: Dir) {
        for i in 0..10u64 {
            d.insert(format!("f{i}").as_bytes(), 100 + i, Kind::File);
        }
        let first: Vec<_> = d.iter_after(0).take(4).map(|(n, e)| (n.to_vec(), position(e.cookie))).collect();
        let resume = first.last().unwrap().1;
        // Newest first: f9..f6 came back. Remove one already returned (f8)
        // and one not yet returned (f1); add one, which this stream skips.
        d.remove(b"f8");
        d.remove(b"f1");
        d.insert(b"new", 200, Kind::File);
        let rest: Vec<_> = d.iter_after(resume).map(|(n, _)| n.to_vec()).collect();
        let mut seen: Vec<_> = first.into_iter().map(|(n, _)| n).collect();
        seen.extend(rest);
        for i in [0, 2, 3, 4, 5, 6, 7, 8, 9] {
            let name = format!("f{i}").into_bytes();
            assert_eq!(seen.iter().filter(|n| **n == name).count(), 1, "{i}");
        }
        assert!(!seen.contains(&b"f1".to_vec()));
        assert!(!seen.contains(&b"new".to_vec()));
    }

    #[test]
    fn replace_keeps_position() {
        let mut d = Dir::new(DirIndex::BTree);
        d.insert(b"a", 5, Kind::File);
        d.insert(b"b", 6, Kind::File);
        let old = d.replace(b"a", 9, Kind::Dir).unwrap();
        assert_eq!(old.ino, 5);
        let names: Vec<_> = d.iter_after(0).map(|(n, e)| (n.to_vec(), e.ino)).collect();
        assert_eq!(names, vec![(b"b".to_vec(), 6), (b"a".to_vec(), 9)]);
    }

    /// A stream that renames or re-creates every entry it reads ends, and
    /// returns each original entry once.
    #[test]
    fn renaming_each_entry_read_ends_the_stream() {
        for index in [DirIndex::Hash, DirIndex::BTree] {
            let mut d = Dir::new(index);
            for i in 0..100u64 {
                d.insert(format!("f{i}").as_bytes(), i + 10, Kind::File);
            }
            let mut pos = 2;
            let mut seen = Vec::new();
            loop {
                // Read in batches of 7, as getdents does, renaming as it goes.
                let batch: Vec<_> = d.iter_after(pos).take(7).map(|(n, e)| (n.to_vec(), e)).collect();
                let Some((_, last)) = batch.last() else { break };
                pos = position(last.cookie);
                for (name, e) in batch {
                    d.remove(&name);
                    let mut new = b"r".to_vec();
                    new.extend_from_slice(&name);
                    d.insert(&new, e.ino, e.kind);
                    seen.push(name);
                }
                assert!(seen.len() <= 100, "stream did not end");
            }
            seen.sort();
            let mut want: Vec<_> = (0..100).map(|i| format!("f{i}").into_bytes()).collect();
            want.sort();
            assert_eq!(seen, want);
        }
    }

    #[test]
    fn positions_stay_above_dot_entries_and_grow_along_the_stream() {
        let mut d = Dir::new(DirIndex::Hash);
        for i in 0..5u64 {
            d.insert(format!("f{i}").as_bytes(), i + 10, Kind::File);
        }
        let pos: Vec<_> = d.iter_after(2).map(|(_, e)| position(e.cookie)).collect();
        assert!(pos[0] > 2 && pos.windows(2).all(|w| w[0] < w[1]), "{pos:?}");
        assert_eq!(d.iter_after(*pos.last().unwrap()).count(), 0);
        assert_eq!(d.iter_after(u64::MAX).count(), 0);
    }
}
