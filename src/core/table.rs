//! The inode table: inode number to inode, for every inode that has a name
//! or a kernel reference.
//!
//! Owns the mapping only, not what an inode holds nor when it goes (mod.rs
//! decides that). Sharded by the inode number's low bits into [`SHARDS`]
//! hash tables of bare `InodeRef` pointers, each behind its own lock from
//! src/sync.rs (so the model-checked tests see them): the key is the
//! inode's own `ino`, so a slot is one pointer and a control byte, where a
//! `DashMap<Ino, InodeRef>` slot carried the key beside it (issue 14:
//! about 13 bytes an inode instead of 26, at the tables' usual load).
//!
//! Locks: a shard's lock is held for one table operation and nothing else
//! is taken under it (no inode lock: `remove_if`'s test reads only
//! atomics). docs/DESIGN.md, lock order row 3.

use hashbrown::HashTable;

use super::inode::{Inode, InodeRef};
use super::types::Ino;
use crate::sync::RwLock;

const SHARD_BITS: u32 = 6;
/// Shards: enough that two workers rarely meet on one.
pub const SHARDS: usize = 1 << SHARD_BITS;

pub struct InodeTable {
    shards: Box<[RwLock<HashTable<InodeRef>>]>,
}

/// The shard of `ino`, and its hash inside the shard: inode numbers are
/// handed out in sequence, so the shard takes the low bits and the hash
/// multiplies the rest by an odd constant (a bijection on the low bits,
/// which pick the bucket; the high bits, which hashbrown keeps as a tag,
/// well mixed).
fn place(ino: Ino) -> (usize, u64) {
    let shard = (ino & (SHARDS as u64 - 1)) as usize;
    (shard, (ino >> SHARD_BITS).wrapping_mul(0x9E37_79B9_7F4A_7C15))
}

fn rehash(inode: &InodeRef) -> u64 {
    place(inode.ino).1
}

impl std::fmt::Debug for InodeTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "InodeTable({} inodes)", self.len())
    }
}

impl InodeTable {
    pub fn new() -> InodeTable {
        InodeTable { shards: (0..SHARDS).map(|_| RwLock::new(HashTable::new())).collect() }
    }

    pub fn get(&self, ino: Ino) -> Option<InodeRef> {
        let (s, h) = place(ino);
        self.shards[s].read().find(h, |i| i.ino == ino).cloned()
    }

    pub fn contains(&self, ino: Ino) -> bool {
        let (s, h) = place(ino);
        self.shards[s].read().find(h, |i| i.ino == ino).is_some()
    }

    /// Add `inode`, whose number is not in the table (numbers are never reused).
    pub fn insert(&self, inode: InodeRef) {
        let (s, h) = place(inode.ino);
        let mut t = self.shards[s].write();
        debug_assert!(t.find(h, |i| i.ino == inode.ino).is_none());
        t.insert_unique(h, inode, rehash);
    }

    /// Remove `ino` if `keep_not` says so of it (under the shard's lock,
    /// so no one can look it up in between); what was removed.
    pub fn remove_if(&self, ino: Ino, keep_not: impl FnOnce(&Inode) -> bool) -> Option<InodeRef> {
        let (s, h) = place(ino);
        let mut t = self.shards[s].write();
        match t.find_entry(h, |i| i.ino == ino) {
            Ok(e) if keep_not(e.get()) => Some(e.remove().0),
            _ => None,
        }
    }

    pub fn len(&self) -> usize {
        self.shards.iter().map(|s| s.read().len()).sum()
    }

    /// Room for entries without growing.
    pub fn capacity(&self) -> usize {
        self.shards.iter().map(|s| s.read().capacity()).sum()
    }

    /// Size every shard to what it holds, one shard at a time.
    pub fn shrink_to_fit(&self) {
        for s in self.shards.iter() {
            s.write().shrink_to_fit(rehash);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::inode::{Content, Meta};
    use crate::core::types::Kind;
    use crate::core::usage::Usage;
    use crate::sync::Arc;

    fn inode(ino: Ino, usage: &Arc<Usage>) -> InodeRef {
        Inode::create(ino, Kind::Fifo, Meta::default(), Content::Special(Kind::Fifo), usage.clone())
    }

    #[test]
    fn finds_removes_and_shrinks() {
        let usage = Arc::new(Usage::new(0, 0));
        let t = InodeTable::new();
        for ino in 1..=10_000 {
            t.insert(inode(ino, &usage));
        }
        assert_eq!(t.len(), 10_000);
        assert!(t.get(77).is_some_and(|i| i.ino == 77));
        assert!(t.get(10_001).is_none() && !t.contains(0));
        assert!(t.remove_if(5, |_| false).is_none(), "kept");
        assert!(t.contains(5));
        for ino in 1..=9_990 {
            assert_eq!(t.remove_if(ino, |_| true).map(|i| i.ino), Some(ino));
        }
        assert!(t.remove_if(3, |_| true).is_none(), "gone already");
        let before = t.capacity();
        t.shrink_to_fit();
        assert!(t.capacity() < before / 10, "{} of {before}", t.capacity());
        assert_eq!((t.len(), t.get(9_995).map(|i| i.ino)), (10, Some(9_995)));
        // Grows again.
        for ino in 20_000..21_000 {
            t.insert(inode(ino, &usage));
        }
        assert_eq!(t.len(), 1_010);
    }

    #[test]
    fn concurrent_inserts_lookups_and_removals_agree() {
        let usage = Arc::new(Usage::new(0, 0));
        let t = Arc::new(InodeTable::new());
        let threads: Vec<_> = (0..4u64)
            .map(|k| {
                let (t, usage) = (t.clone(), usage.clone());
                std::thread::spawn(move || {
                    for n in 0..5_000u64 {
                        let ino = 1 + n * 4 + k;
                        t.insert(inode(ino, &usage));
                        assert!(t.get(ino).is_some());
                        if n % 2 == 0 {
                            assert!(t.remove_if(ino, |_| true).is_some());
                        }
                    }
                })
            })
            .collect();
        for th in threads {
            th.join().unwrap();
        }
        assert_eq!(t.len(), 4 * 2_500);
        assert!((1..=20_000u64).all(|ino| t.contains(ino) == ((ino - 1) / 4 % 2 == 1)));
    }
}
