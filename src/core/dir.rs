//! Directory contents: name -> child, with readdir cookies that stay valid
//! while the directory changes.
//!
//! Owns one directory's entries; no locking, no timestamps, no accounting.
//! Every entry gets a cookie from a per-directory counter when it is
//! inserted; readdir returns entries in cookie order and resumes after the
//! last cookie it gave out. An entry present for the whole listing is seen
//! exactly once; one added or removed meanwhile may or may not be seen.
//! Cookies 1 and 2 are "." and "..", so entry cookies start at 3.
//!
//! The name index is a hash table (O(1) lookup) or a B-tree (O(log n),
//! smaller and steadier at very large sizes), chosen per mount with
//! `dirindex=`; readdir resumes in O(log n) through the ordered cookie
//! index. Both indexes share the name allocation.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use super::types::{Ino, Kind};

/// First cookie handed to a real entry ("." is 1 and ".." is 2).
pub const FIRST_COOKIE: u64 = 3;

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

    /// Entries with cookie > `after`, in cookie order.
    pub fn iter_after(&self, after: u64) -> impl Iterator<Item = (&[u8], Entry)> + '_ {
        self.by_cookie
            .range(after.saturating_add(1)..)
            .filter_map(|(_, name)| self.by_name.get(name).map(|e| (&name[..], *e)))
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
        let first: Vec<_> = d.iter_after(0).take(4).map(|(n, e)| (n.to_vec(), e.cookie)).collect();
        let resume = first.last().unwrap().1;
        // Remove an entry already returned and one not yet returned; add one.
        d.remove(b"f1");
        d.remove(b"f7");
        d.insert(b"new", 200, Kind::File);
        let rest: Vec<_> = d.iter_after(resume).map(|(n, _)| n.to_vec()).collect();
        let mut seen: Vec<_> = first.into_iter().map(|(n, _)| n).collect();
        seen.extend(rest);
        for i in [0, 2, 3, 4, 5, 6, 8, 9] {
            let name = format!("f{i}").into_bytes();
            assert_eq!(seen.iter().filter(|n| **n == name).count(), 1, "{i}");
        }
        assert!(!seen.contains(&b"f7".to_vec()));
    }

    #[test]
    fn replace_keeps_position() {
        let mut d = Dir::new(DirIndex::BTree);
        d.insert(b"a", 5, Kind::File);
        d.insert(b"b", 6, Kind::File);
        let old = d.replace(b"a", 9, Kind::Dir).unwrap();
        assert_eq!(old.ino, 5);
        let names: Vec<_> = d.iter_after(0).map(|(n, e)| (n.to_vec(), e.ino)).collect();
        assert_eq!(names, vec![(b"a".to_vec(), 9), (b"b".to_vec(), 6)]);
    }
}
