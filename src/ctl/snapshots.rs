//! Snapshots of control files, one per inode number the kernel was given.
//!
//! Why they exist: memfs answers OPEN with ENOSYS, so the kernel keeps the
//! page cache of every file across opens and never tells us when a file is
//! opened. A statistics file served under one inode number would be read
//! stale from that cache. So every LOOKUP of a control file (and every
//! readdirplus entry for one) renders the content once and hands out a new
//! inode number for it; the kernel sees a different inode on each open and
//! reads it from here. FORGET drops the snapshot.
//!
//! Owns the map from inode number to content and its bound: beyond
//! [`MAX_SNAPSHOTS`] the oldest are dropped, so a kernel that never sends
//! FORGET cannot grow the daemon without limit (a read of a dropped
//! snapshot renders the file again). The map sits behind one mutex: control
//! files are not on any hot path.

use std::collections::BTreeMap;

use crate::core::Timespec;
use crate::sync::{Arc, AtomicU64, Mutex, Ordering};

/// Most snapshots kept at once.
pub const MAX_SNAPSHOTS: usize = 10_000;

/// Bits of an inode number that carry the snapshot sequence number.
pub const SEQ_BITS: u32 = 48;
const SEQ_MASK: u64 = (1 << SEQ_BITS) - 1;

/// A control file's content as rendered at one lookup.
#[derive(Debug)]
pub struct Snapshot {
    pub content: Vec<u8>,
    pub time: Timespec,
}

/// The live snapshots, by inode number.
#[derive(Debug)]
pub struct Snapshots {
    /// By sequence number (unique across files, so the first is the
    /// oldest), with the full inode number it was handed out under.
    map: Mutex<BTreeMap<u64, (u64, Arc<Snapshot>)>>,
    /// Next sequence number (never 0: sequence 0 names a directory).
    next: AtomicU64,
    cap: usize,
}

impl Snapshots {
    pub fn new(cap: usize) -> Snapshots {
        Snapshots { map: Mutex::new(BTreeMap::new()), next: AtomicU64::new(1), cap }
    }

    /// A new sequence number for an inode (1..2^48, wrapping past 0).
    pub fn next_seq(&self) -> u64 {
        loop {
            let seq = self.next.fetch_add(1, Ordering::Relaxed) & SEQ_MASK;
            if seq != 0 {
                return seq;
            }
        }
    }

    /// Keep `snap` under `ino`, dropping the oldest beyond the bound.
    pub fn insert(&self, ino: u64, snap: Arc<Snapshot>) {
        let mut map = self.map.lock();
        map.insert(ino & SEQ_MASK, (ino, snap));
        while map.len() > self.cap {
            map.pop_first();
        }
    }

    pub fn get(&self, ino: u64) -> Option<Arc<Snapshot>> {
        self.map.lock().get(&(ino & SEQ_MASK)).filter(|(i, _)| *i == ino).map(|(_, s)| s.clone())
    }

    pub fn remove(&self, ino: u64) {
        let mut map = self.map.lock();
        if map.get(&(ino & SEQ_MASK)).is_some_and(|(i, _)| *i == ino) {
            map.remove(&(ino & SEQ_MASK));
        }
    }

    pub fn len(&self) -> usize {
        self.map.lock().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snap(s: &str) -> Arc<Snapshot> {
        Arc::new(Snapshot { content: s.as_bytes().to_vec(), time: Timespec::default() })
    }

    #[test]
    fn bounded_dropping_the_oldest() {
        let s = Snapshots::new(3);
        let inos: Vec<u64> = (0..5).map(|i| (i % 2) << SEQ_BITS | s.next_seq()).collect();
        for (i, ino) in inos.iter().enumerate() {
            s.insert(*ino, snap(&i.to_string()));
        }
        assert_eq!(s.len(), 3);
        assert!(s.get(inos[0]).is_none() && s.get(inos[1]).is_none());
        assert_eq!(s.get(inos[4]).unwrap().content, b"4");
        s.remove(inos[4]);
        assert!(s.get(inos[4]).is_none());
        assert_eq!(s.len(), 2);
        // Another file's inode with the same sequence is not this snapshot.
        let other = inos[3] ^ (1 << SEQ_BITS);
        assert!(s.get(other).is_none());
        s.remove(other);
        assert_eq!(s.len(), 2);
    }

    #[test]
    fn sequence_never_zero() {
        let s = Snapshots::new(1);
        s.next.store(SEQ_MASK, Ordering::Relaxed);
        assert_eq!(s.next_seq(), SEQ_MASK);
        assert_eq!(s.next_seq(), 1);
    }
}
