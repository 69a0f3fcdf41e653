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
//! Layout (issue 14: millions of entries must be compact, and their memory
//! must come back when they go):
//! - `recs`, one 24-byte record per entry in cookie order (insertion
//!   appends, so it stays sorted): cookie, inode number, and the name's
//!   place in `names`, its length and the kind, packed in one word. A
//!   removed entry leaves a tombstone (inode number 0) until compaction;
//! - `names`, every name's bytes one after another: no allocation per
//!   name;
//! - the name index holds record numbers (4 bytes): a hash table (O(1)
//!   lookup, hashed with a per-directory random key) or a B-tree keyed by
//!   name (O(log n), ordered), chosen per mount with `dirindex=`.
//!
//! Readdir resumes in O(log n) by a binary search of `recs` by cookie.
//! When tombstones outnumber the live entries (and are at least
//! [`COMPACT_MIN`]), the directory is compacted: records and names are
//! copied to allocations sized to the live entries plus a quarter, and the
//! index is rebuilt at its new size; the last removal frees everything. That is O(n) once per n/2 removals,
//! so O(1) per removal, and a steady create/remove loop never resizes on
//! every operation; an emptied directory frees everything.

use std::collections::hash_map::RandomState;
use std::collections::BTreeMap;
use std::hash::BuildHasher;

use hashbrown::HashTable;

use super::types::{Ino, Kind};

/// First cookie handed to a real entry.
pub const FIRST_COOKIE: u64 = 3;

/// Positions of real entries are `END_POS - cookie`: above 2 ("." and "..")
/// for any cookie a directory can reach (2^62 inserts), below `i64::MAX` so
/// the kernel's signed file position holds them.
pub const END_POS: u64 = 1 << 62;

/// Tombstones below which a directory is never compacted.
pub const COMPACT_MIN: usize = 32;

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

const KINDS: [Kind; 7] =
    [Kind::File, Kind::Dir, Kind::Symlink, Kind::Fifo, Kind::Socket, Kind::CharDev, Kind::BlockDev];

/// A name's place in `names` (bits 16..64), its length (8..16) and the
/// entry's kind (0..8). Names are at most 255 bytes (the caller checks).
#[derive(Clone, Copy, Debug)]
struct Packed(u64);

impl Packed {
    fn new(off: usize, len: usize, kind: Kind) -> Packed {
        debug_assert!(len <= u8::MAX as usize);
        let k = KINDS.iter().position(|&x| x == kind).unwrap_or(0) as u64;
        Packed((off as u64) << 16 | (len as u64 & 0xff) << 8 | k)
    }

    fn off(self) -> usize {
        (self.0 >> 16) as usize
    }

    fn len(self) -> usize {
        (self.0 >> 8 & 0xff) as usize
    }

    fn kind(self) -> Kind {
        KINDS[(self.0 & 0xff) as usize % KINDS.len()]
    }

    fn with_kind(self, kind: Kind) -> Packed {
        Packed::new(self.off(), self.len(), kind)
    }
}

/// One entry, or a tombstone (`ino` 0).
#[derive(Clone, Copy, Debug)]
struct Rec {
    cookie: u64,
    ino: Ino,
    name: Packed,
}

impl Rec {
    fn entry(&self) -> Entry {
        Entry { ino: self.ino, kind: self.name.kind(), cookie: self.cookie }
    }

    fn is_live(&self) -> bool {
        self.ino != 0
    }
}

fn name_of<'a>(names: &'a [u8], r: &Rec) -> &'a [u8] {
    &names[r.name.off()..r.name.off() + r.name.len()]
}

/// Name -> record number, by the mount's choice of structure.
#[derive(Debug)]
enum NameIndex {
    Hash(HashTable<u32>, RandomState),
    BTree(BTreeMap<Box<[u8]>, u32>),
}

/// The entries of one directory.
#[derive(Debug)]
pub struct Dir {
    recs: Vec<Rec>,
    names: Vec<u8>,
    index: NameIndex,
    live: usize,
    next_cookie: u64,
}

impl Default for Dir {
    fn default() -> Self {
        Dir::new(DirIndex::default())
    }
}

impl Dir {
    pub fn new(index: DirIndex) -> Dir {
        let index = match index {
            DirIndex::Hash => NameIndex::Hash(HashTable::new(), RandomState::new()),
            DirIndex::BTree => NameIndex::BTree(BTreeMap::new()),
        };
        Dir { recs: Vec::new(), names: Vec::new(), index, live: 0, next_cookie: FIRST_COOKIE }
    }

    pub fn len(&self) -> usize {
        self.live
    }

    pub fn is_empty(&self) -> bool {
        self.live == 0
    }

    /// Heap bytes this directory's entries hold (capacity, not length):
    /// records, names and the index, for tests and estimates.
    pub fn heap_bytes(&self) -> usize {
        let index = match &self.index {
            // A bucket of 4 bytes and a control byte each.
            NameIndex::Hash(t, _) => t.capacity() * 5,
            // Per entry: the key's allocation (16-byte header + name) and a
            // share of a node (key 16 + value 4, nodes about two-thirds full).
            NameIndex::BTree(m) => m.keys().map(|k| 16 + k.len().next_multiple_of(16) + 30).sum(),
        };
        self.recs.capacity() * std::mem::size_of::<Rec>() + self.names.capacity() + index
    }

    /// Record number of `name`, if present.
    fn find(&self, name: &[u8]) -> Option<usize> {
        let (recs, names) = (&self.recs, &self.names);
        match &self.index {
            NameIndex::Hash(t, keys) => {
                t.find(keys.hash_one(name), |&i| name_of(names, &recs[i as usize]) == name).map(|&i| i as usize)
            }
            NameIndex::BTree(m) => m.get(name).map(|&i| i as usize),
        }
    }

    pub fn get(&self, name: &[u8]) -> Option<Entry> {
        self.find(name).map(|i| self.recs[i].entry())
    }

    /// Add `name`; the caller has checked it is absent.
    pub fn insert(&mut self, name: &[u8], ino: Ino, kind: Kind) {
        if self.recs.len() >= u32::MAX as usize {
            self.compact(); // 4 billion records: only tombstones can make room
        }
        let cookie = self.next_cookie;
        self.next_cookie += 1;
        let pos = self.recs.len() as u32;
        let packed = Packed::new(self.names.len(), name.len(), kind);
        self.names.extend_from_slice(name);
        self.recs.push(Rec { cookie, ino, name: packed });
        let Dir { recs, names, index, .. } = self;
        match index {
            NameIndex::Hash(t, keys) => {
                t.insert_unique(keys.hash_one(name), pos, |&i| keys.hash_one(name_of(names, &recs[i as usize])));
            }
            NameIndex::BTree(m) => {
                m.insert(name.into(), pos);
            }
        }
        self.live += 1;
    }

    /// Remove `name`, returning its entry.
    pub fn remove(&mut self, name: &[u8]) -> Option<Entry> {
        let Dir { recs, names, index, .. } = self;
        let pos = match index {
            NameIndex::Hash(t, keys) => {
                let found = t.find_entry(keys.hash_one(name), |&i| name_of(names, &recs[i as usize]) == name);
                found.ok()?.remove().0
            }
            NameIndex::BTree(m) => m.remove(name)?,
        } as usize;
        let entry = self.recs[pos].entry();
        self.recs[pos].ino = 0;
        self.live -= 1;
        let dead = self.recs.len() - self.live;
        if (dead >= COMPACT_MIN && dead >= self.live) || self.live == 0 {
            self.compact();
        }
        Some(entry)
    }

    /// Point an existing `name` at another inode (rename over, exchange),
    /// keeping its position in the listing.
    pub fn replace(&mut self, name: &[u8], ino: Ino, kind: Kind) -> Option<Entry> {
        let pos = self.find(name)?;
        let r = &mut self.recs[pos];
        let old = r.entry();
        r.ino = ino;
        r.name = r.name.with_kind(kind);
        Some(old)
    }

    /// The entries a stream resuming at position `pos` returns next: those
    /// older than the entry whose position `pos` is, newest first (all of
    /// them for `pos` <= 2, the positions of "." and ".."). A position past
    /// every entry returns nothing.
    pub fn iter_after(&self, pos: u64) -> impl Iterator<Item = (&[u8], Entry)> + '_ {
        let below = if pos <= 2 { u64::MAX } else { END_POS.saturating_sub(pos) };
        let end = self.recs.partition_point(|r| r.cookie < below);
        self.recs[..end].iter().rev().filter(|r| r.is_live()).map(|r| (name_of(&self.names, r), r.entry()))
    }

    /// Copy the live entries to allocations sized to them (plus a quarter)
    /// and rebuild the index; an empty directory frees everything.
    fn compact(&mut self) {
        let live = self.live;
        let name_bytes: usize = self.recs.iter().filter(|r| r.is_live()).map(|r| r.name.len()).sum();
        let mut recs = Vec::with_capacity(live + live / 4);
        let mut names = Vec::with_capacity(name_bytes + name_bytes / 4);
        // Old record number -> new (BTree index only).
        let mut moved = Vec::new();
        let btree = matches!(self.index, NameIndex::BTree(_));
        if btree {
            moved = vec![u32::MAX; self.recs.len()];
        }
        for (old, r) in self.recs.iter().enumerate() {
            if !r.is_live() {
                continue;
            }
            if btree {
                moved[old] = recs.len() as u32;
            }
            let packed = Packed::new(names.len(), r.name.len(), r.name.kind());
            names.extend_from_slice(name_of(&self.names, r));
            recs.push(Rec { cookie: r.cookie, ino: r.ino, name: packed });
        }
        self.recs = recs;
        self.names = names;
        let Dir { recs, names, index, .. } = self;
        match index {
            NameIndex::Hash(t, keys) => {
                let mut fresh = HashTable::with_capacity(live);
                for (i, r) in recs.iter().enumerate() {
                    let h = keys.hash_one(name_of(names, r));
                    fresh.insert_unique(h, i as u32, |&j| keys.hash_one(name_of(names, &recs[j as usize])));
                }
                *t = fresh;
            }
            NameIndex::BTree(m) => {
                for v in m.values_mut() {
                    *v = moved[*v as usize];
                }
            }
        }
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

    /// Mass removal shrinks the directory (records, names, index) and it
    /// grows again; an emptied directory holds nothing.
    #[test]
    fn removal_shrinks_and_the_directory_regrows() {
        for index in [DirIndex::Hash, DirIndex::BTree] {
            let mut d = Dir::new(index);
            let n = 20_000u64;
            for i in 0..n {
                d.insert(format!("file-{i:06}").as_bytes(), i + 10, Kind::File);
            }
            let full = d.heap_bytes();
            assert!(full >= n as usize * 24, "{full}");
            for i in 0..n - 100 {
                assert_eq!(d.remove(format!("file-{i:06}").as_bytes()).map(|e| e.ino), Some(i + 10));
            }
            assert_eq!(d.len(), 100);
            assert!(d.heap_bytes() * 20 < full, "{index:?}: {} of {full} bytes kept for 100 entries", d.heap_bytes());
            for i in n - 100..n {
                assert_eq!(d.get(format!("file-{i:06}").as_bytes()).map(|e| e.ino), Some(i + 10), "{i}");
            }
            for i in n - 100..n {
                d.remove(format!("file-{i:06}").as_bytes());
            }
            assert_eq!((d.len(), d.heap_bytes()), (0, 0), "{index:?}: an empty directory frees everything");
            for i in 0..1000u64 {
                d.insert(format!("again-{i}").as_bytes(), i + 1, Kind::Dir);
            }
            assert_eq!(d.iter_after(0).count(), 1000);
            assert_eq!(d.get(b"again-999").map(|e| (e.ino, e.kind)), Some((1000, Kind::Dir)));
        }
    }

    /// A stream reading while entries are removed (compacting the
    /// directory under it) resumes where it was: each entry present
    /// throughout is returned once.
    #[test]
    fn positions_survive_compaction() {
        for index in [DirIndex::Hash, DirIndex::BTree] {
            let mut d = Dir::new(index);
            for i in 0..1000u64 {
                d.insert(format!("f{i}").as_bytes(), i + 10, Kind::File);
            }
            let mut pos = 2;
            let mut seen = vec![];
            loop {
                let batch: Vec<_> = d.iter_after(pos).take(50).map(|(n, e)| (n.to_vec(), e)).collect();
                let Some((_, last)) = batch.last() else { break };
                pos = position(last.cookie);
                seen.extend(batch.into_iter().map(|(n, _)| n));
                // Remove the oldest entries not yet read: enough to compact.
                let gone: Vec<Vec<u8>> = d.iter_after(pos).skip(100).take(60).map(|(n, _)| n.to_vec()).collect();
                for n in gone {
                    d.remove(&n);
                }
            }
            let distinct: std::collections::HashSet<_> = seen.iter().collect();
            assert_eq!(distinct.len(), seen.len(), "{index:?}: an entry came twice");
            for (n, e) in d.iter_after(0) {
                assert!(seen.contains(&n.to_vec()), "{index:?}: {e:?} still there but never read");
            }
        }
    }

    /// A steady create/remove loop does not compact on every operation:
    /// the records stay within a bounded multiple of the live entries.
    #[test]
    fn a_create_remove_loop_stays_bounded() {
        let mut d = Dir::new(DirIndex::Hash);
        for i in 0..1000u64 {
            d.insert(format!("k{i}").as_bytes(), i + 1, Kind::File);
        }
        for i in 1000..50_000u64 {
            d.insert(format!("k{i}").as_bytes(), i + 1, Kind::File);
            d.remove(format!("k{}", i - 1000).as_bytes());
            assert!(d.recs.len() <= 2 * 1000 + COMPACT_MIN + 1, "{}", d.recs.len());
        }
        assert_eq!(d.len(), 1000);
        assert_eq!(d.get(b"k49999").map(|e| e.ino), Some(50_000));
        assert!(d.get(b"k48999").is_none());
    }
}
